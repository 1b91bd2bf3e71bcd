"""A real local HTTP server speaking OpenAI's chat-completions wire format (tests, benchmarks).

``POST /v1/chat/completions`` answers with ``chat.completion`` JSON, or, when the request has
``"stream": true``, with SSE ``chat.completion.chunk`` events ending in ``data: [DONE]`` (plus a
final usage chunk when ``stream_options.include_usage``). ``GET /v1/models`` lists one model.

Scriptable: ``script(Behaviour(...), ...)`` queues one behaviour per coming request (an error
status with JSON body and headers, a delay to provoke timeouts, a given reply); when the queue is
empty the default reply is used (a string, or a callable of the request JSON). Every request is
recorded (path, headers, JSON) in ``requests``. The server machinery is ``fake_http``'s.

    with FakeOpenAI(reply="go forward", latency=0.1) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test")

Standalone: ``python -m tests.support.fake_openai --port P --latency 0.1 --reply "go forward"``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tests.support import fake_http
from tests.support.fake_http import RecordedRequest, ReplyFn, ScriptedHandler

__all__ = ["Behaviour", "FakeOpenAI", "RecordedRequest", "ReplyFn"]

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_api_key",
    403: "permission_denied",
    404: "not_found",
    429: "rate_limit_exceeded",
}


@dataclass
class Behaviour(fake_http.ScriptedBehaviour):
    """What the server does for one request.

    ``status`` != 200 answers with ``body`` (default ``{"error": {"message": ..., ...}}``) and
    ``headers`` (e.g. ``{"retry-after": "0.05"}``). ``delay`` seconds are slept first (on top of
    the server latency). ``reply`` overrides the default reply text, ``reasoning`` adds a
    ``reasoning_content`` field, ``empty_choices`` answers with ``choices: []``, ``usage``
    overrides the computed usage object.
    """

    reasoning: str | None = None
    finish_reason: str = "stop"
    empty_choices: bool = False
    usage: dict[str, Any] | None = None


def _prompt_words(request: dict[str, Any]) -> int:
    total = 0
    for msg in request.get("messages", []):
        content = msg.get("content")
        if isinstance(content, str):
            total += fake_http.words(content)
        elif isinstance(content, list):
            total += sum(fake_http.words(p.get("text", "")) for p in content if isinstance(p, dict))
    return total


class FakeOpenAI(fake_http.ScriptedHTTPServer[Behaviour, RecordedRequest]):
    """The server; start/stop it with ``with`` (or ``start()``/``stop()``)."""

    thread_name = "fake-openai"

    def __init__(
        self, reply: str | ReplyFn = "ok", *, latency: float = 0.0, host: str = "127.0.0.1",
        port: int = 0, model: str = "fake-model",
    ):
        """``reply``: default reply text or a function of the request JSON; ``latency``: seconds
        slept before every answer; ``port`` 0 picks a free port; ``model``: the model listed
        and answered when a request names none."""
        super().__init__(reply, latency=latency, host=host, port=port)
        self.model = model

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1`` (what ``AsyncOpenAI(base_url=...)`` takes)."""
        return f"{super().base_url}/v1"

    # -- wire format -------------------------------------------------------------------------
    def new_behaviour(self) -> Behaviour:
        return Behaviour()

    def record(
        self, path: str, headers: dict[str, str], request: Any
    ) -> RecordedRequest | None:
        """Chat-completion requests (``POST /v1/chat/completions``) are recorded (and
        scripted); other paths are 404, so a client that doubles the ``/v1`` prefix fails."""
        if path.split("?", 1)[0].rstrip("/") != "/v1/chat/completions":
            return None
        return RecordedRequest("POST", path, headers, request)

    def error_json(self, status: int, message: str) -> dict[str, Any]:
        error_type = _ERROR_TYPES.get(status, "server_error")
        return {"error": {"message": message, "type": error_type, "param": None, "code": None}}

    def route_error_json(self, status: int, message: str) -> dict[str, Any]:
        """The 400/404 answers outside the scripted flow carry no ``param``/``code``."""
        return {"error": {"message": message, "type": _ERROR_TYPES[status]}}

    def handle_get(self, out: ScriptedHandler) -> None:
        """``GET /v1/models`` lists the one model; other paths are 404."""
        if out.path.split("?", 1)[0].rstrip("/") != "/v1/models":
            out.send_json(404, self.not_found_body(out.path))
            return
        model = {"id": self.model, "object": "model", "created": 0, "owned_by": "fake"}
        out.send_json(200, {"object": "list", "data": [model]})

    def respond(
        self, out: ScriptedHandler, behaviour: Behaviour, record: RecordedRequest, request: Any
    ) -> None:
        if behaviour.status != 200:
            self.send_scripted_error(out, behaviour)
        elif request.get("stream"):
            events = [fake_http.sse_event(c) for c in self.chunks(behaviour, request)]
            out.send_sse([*events, "data: [DONE]\n\n"], behaviour.headers)
        else:
            out.send_json(200, self.completion_json(behaviour, request), behaviour.headers)

    # -- answers -----------------------------------------------------------------------------
    def _usage(self, behaviour: Behaviour, request: dict[str, Any], text: str) -> dict[str, Any]:
        if behaviour.usage is not None:
            return behaviour.usage
        prompt, completion = _prompt_words(request), fake_http.words(text)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    def completion_json(self, behaviour: Behaviour, request: dict[str, Any]) -> dict[str, Any]:
        """The ``chat.completion`` object for one request."""
        text = self.reply_text(behaviour, request)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if behaviour.reasoning is not None:
            message["reasoning_content"] = behaviour.reasoning
        choices = (
            []
            if behaviour.empty_choices
            else [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": behaviour.finish_reason,
                    "logprobs": None,
                }
            ]
        )
        return {
            "id": f"chatcmpl-{time.monotonic_ns()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", self.model),
            "choices": choices,
            "usage": self._usage(behaviour, request, text),
        }

    def chunks(self, behaviour: Behaviour, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The ``chat.completion.chunk`` objects of a streamed answer (without ``[DONE]``)."""
        text = self.reply_text(behaviour, request)
        base = {
            "id": f"chatcmpl-{time.monotonic_ns()}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": request.get("model", self.model),
        }
        include_usage = bool((request.get("stream_options") or {}).get("include_usage"))

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            out = {
                **base,
                "choices": [
                    {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
                ],
            }
            if include_usage:
                out["usage"] = None
            return out

        if not behaviour.empty_choices:
            yield chunk({"role": "assistant", "content": ""})
            for piece in fake_http.pieces(behaviour.reasoning or ""):
                yield chunk({"reasoning_content": piece})
            for piece in fake_http.pieces(text):
                yield chunk({"content": piece})
            yield chunk({}, behaviour.finish_reason)
        if include_usage:
            yield {**base, "choices": [], "usage": self._usage(behaviour, request, text)}


def main(argv: list[str] | None = None) -> None:
    """Serve until killed (for benchmarks and manual runs); prints the base URL."""
    fake_http.serve_until_killed(FakeOpenAI, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    main()
