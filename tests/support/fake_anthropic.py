"""A real local HTTP server speaking Anthropic's Messages wire format (tests, benchmarks).

``POST /v1/messages`` answers with a ``message`` object, or, when the request has
``"stream": true``, with the Messages SSE event sequence: ``message_start``, ``ping``, per content
block ``content_block_start`` / ``content_block_delta`` (``thinking_delta`` + ``signature_delta``,
``text_delta``) / ``content_block_stop``, then ``message_delta`` (stop reason and usage) and
``message_stop``. A scripted in-stream failure is sent as ``event: error``.

Errors use Anthropic's body shape ``{"type": "error", "error": {"type": ..., "message": ...}}``
with a ``request-id`` header. Requests are checked against the API's documented rules (roles
alternate and start with ``user``, no empty or whitespace-only text, no trailing whitespace in a
final assistant turn, ``budget_tokens`` >= 1024 and below ``max_tokens``, temperature only 1 with
thinking, base64 images, no unknown top-level fields); a violation is answered with HTTP 400
``invalid_request_error`` as the real API would, so a backend that builds a bad request fails.

Scriptable like ``fake_openai``: ``script(Behaviour(...), ...)`` queues one behaviour per coming
request; when the queue is empty the default reply is used (a string, or a callable of the
request JSON). Every request is recorded (path, headers, JSON) in ``requests``. The server
machinery is ``fake_http``'s.

    with FakeAnthropic(reply="go forward") as server:
        client = AsyncAnthropic(base_url=server.base_url, api_key="test")

Standalone: ``python -m tests.support.fake_anthropic --port P --latency 0.1 --reply "go forward"``.
"""

from __future__ import annotations

import base64
import binascii
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tests.support import fake_http
from tests.support.fake_http import RecordedRequest, ReplyFn, ScriptedHandler

__all__ = ["Behaviour", "FakeAnthropic", "RecordedRequest", "ReplyFn", "error_body"]

#: HTTP status -> Anthropic ``error.type`` (https://docs.anthropic.com/en/api/errors).
ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

#: Top-level request fields the Messages API accepts (anything else is a 400).
REQUEST_FIELDS = frozenset(
    {
        "model", "messages", "max_tokens", "system", "temperature", "top_p", "top_k",
        "stop_sequences", "stream", "metadata", "thinking", "tools", "tool_choice",
        "service_tier", "container", "mcp_servers", "context_management", "output_config",
        "inference_geo", "speed", "cache_control",
    }
)

IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
MIN_THINKING_BUDGET = 1024


def error_body(status: int, message: str) -> dict[str, Any]:
    """Anthropic's error body for ``status`` (``error.type`` from ``ERROR_TYPES``)."""
    return {
        "type": "error",
        "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message},
    }


@dataclass
class Behaviour(fake_http.ScriptedBehaviour):
    """What the server does for one request.

    ``status`` != 200 answers with ``body`` (default: Anthropic's error body for that status)
    and ``headers`` (e.g. ``{"retry-after": "0.05"}``). ``delay`` seconds are slept first (on top
    of the server latency). ``reply`` overrides the default reply text; ``thinking`` adds a
    ``thinking`` block before the text, ``redacted_thinking`` a ``redacted_thinking`` block;
    ``stop_reason`` is sent as is (``"refusal"`` also gets ``stop_details``); ``empty_content``
    answers with ``content: []``; ``usage`` replaces the computed usage object (fields:
    ``input_tokens``, ``output_tokens``, ``cache_creation_input_tokens``,
    ``cache_read_input_tokens``, optional ``output_tokens_details``). ``stream_error`` (streaming
    only): after the first text delta, send ``event: error`` with this ``error`` object
    (``{"type": "overloaded_error", "message": ...}``) and end the stream.
    """

    thinking: str | None = None
    redacted_thinking: bool = False
    stop_reason: str = "end_turn"
    empty_content: bool = False
    usage: dict[str, Any] | None = None
    stream_error: dict[str, Any] | None = None


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [b.get("text", "") for b in content if isinstance(b, dict)]
        return " ".join(str(t) for t in texts if t)
    return ""


def validate_request(request: dict[str, Any]) -> str | None:
    """The first rule of the Messages API that ``request`` breaks, as the API's 400 message
    would say it; None when the request is acceptable."""
    for name in request:
        if name not in REQUEST_FIELDS:
            return f"{name}: Extra inputs are not permitted"
    if not isinstance(request.get("model"), str) or not request["model"]:
        return "model: Field required"
    max_tokens = request.get("max_tokens")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        return "max_tokens: Field required (an integer >= 1)"
    system = request.get("system")
    if system is not None and not isinstance(system, str | list):
        return "system: Input should be a valid string or list of text blocks"
    if isinstance(system, str) and not system.strip():
        return "system: text content blocks must contain non-whitespace text"
    messages = request.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    problem = _check_messages(messages)
    if problem:
        return problem
    thinking = request.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget < MIN_THINKING_BUDGET:
            return f"thinking.enabled.budget_tokens: Input should be >= {MIN_THINKING_BUDGET}"
        if max_tokens <= budget:
            return "`max_tokens` must be greater than `thinking.budget_tokens`"
        temperature = request.get("temperature")
        if temperature is not None and temperature != 1:
            return "`temperature` may only be set to 1 when thinking is enabled"
        if "top_k" in request:
            return "`top_k` is not supported when thinking is enabled"
    return None


def _check_messages(messages: list[Any]) -> str | None:
    last = len(messages) - 1
    for i, msg in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
            return f"{where}.role: Input should be 'user' or 'assistant'"
        if i == 0 and msg["role"] != "user":
            return "messages: first message must use the \"user\" role"
        if i > 0 and msg["role"] == messages[i - 1].get("role"):
            return "messages: roles must alternate between \"user\" and \"assistant\""
        content = msg.get("content")
        final_assistant = i == last and msg["role"] == "assistant"
        if isinstance(content, str):
            if not content.strip() and not final_assistant:
                return (
                    f"{where}: all messages must have non-empty content except for the "
                    "optional final assistant message"
                )
            if final_assistant and content != content.rstrip():
                return "final assistant content cannot end with trailing whitespace"
            continue
        if not isinstance(content, list) or not content:
            return f"{where}.content: Input should be a valid string or a non-empty list"
        for j, block in enumerate(content):
            problem = _check_block(block, f"{where}.content.{j}")
            if problem:
                return problem
        tail = content[-1]
        if final_assistant and tail.get("type") == "text" and tail["text"] != tail["text"].rstrip():
            return "final assistant content cannot end with trailing whitespace"
    return None


def _check_block(block: Any, where: str) -> str | None:
    if not isinstance(block, dict):
        return f"{where}: Input should be an object"
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        if not isinstance(text, str) or not text.strip():
            return f"{where}: text content blocks must contain non-whitespace text"
        return None
    if kind == "image":
        source = block.get("source")
        if not isinstance(source, dict) or source.get("type") != "base64":
            return f"{where}.source.type: Input should be 'base64'"
        if source.get("media_type") not in IMAGE_TYPES:
            return f"{where}.source.media_type: Input should be one of {sorted(IMAGE_TYPES)}"
        try:
            base64.b64decode(str(source.get("data", "")), validate=True)
        except (binascii.Error, ValueError):
            return f"{where}.source.data: invalid base64 data"
        return None
    return f"{where}.type: unsupported content block type {kind!r}"


class FakeAnthropic(fake_http.ScriptedHTTPServer[Behaviour, RecordedRequest]):
    """The server; start/stop it with ``with`` (or ``start()``/``stop()``).

    ``FakeAnthropic(reply="ok", *, latency=0.0, host="127.0.0.1", port=0)``: ``reply`` is the
    default reply text or a function of the request JSON; ``latency`` seconds are slept before
    every answer; ``port`` 0 picks a free port. ``base_url`` (``http://127.0.0.1:<port>``) is
    what ``AsyncAnthropic(base_url=...)`` takes (the SDK appends ``/v1/messages``).
    """

    thread_name = "fake-anthropic"
    sse_content_type = "text/event-stream; charset=utf-8"
    invalid_json_message = "There was an error parsing the body as JSON"
    not_found_message = "Not found: {path}"

    # -- wire format -------------------------------------------------------------------------
    def new_behaviour(self) -> Behaviour:
        return Behaviour()

    def record(
        self, path: str, headers: dict[str, str], request: Any
    ) -> RecordedRequest | None:
        """``/v1/messages`` requests are recorded (and scripted); other paths are 404."""
        if path.split("?", 1)[0].rstrip("/") != "/v1/messages":
            return None
        return RecordedRequest("POST", path, headers, request)

    def error_json(self, status: int, message: str) -> dict[str, Any]:
        return error_body(status, message)

    def response_headers(self) -> dict[str, str]:
        return {"request-id": f"req_fake{time.monotonic_ns()}"}

    def respond(
        self, out: ScriptedHandler, behaviour: Behaviour, record: RecordedRequest, request: Any
    ) -> None:
        """A scripted error first; then, as the API: no key -> 401, a request that breaks a
        rule (``validate_request``) -> 400; else the message, streamed when asked."""
        if behaviour.status != 200:
            self.send_scripted_error(out, behaviour)
        elif not record.headers.get("x-api-key") and not record.headers.get("authorization"):
            out.send_json(401, error_body(401, "x-api-key header is required"))
        elif problem := validate_request(request):
            out.send_json(400, error_body(400, problem))
        elif request.get("stream"):
            events = self.events(behaviour, request)
            sse = (fake_http.sse_event(data, event=name) for name, data in events)
            out.send_sse(sse, behaviour.headers)
        else:
            out.send_json(200, self.message_json(behaviour, request), behaviour.headers)

    # -- answers -----------------------------------------------------------------------------
    def usage_json(
        self, behaviour: Behaviour, request: dict[str, Any], text: str
    ) -> dict[str, Any]:
        """The ``usage`` object: the scripted one, else word counts of prompt and answer."""
        if behaviour.usage is not None:
            return dict(behaviour.usage)
        system = request.get("system")
        prompt = fake_http.words(system if isinstance(system, str) else _text_of(system))
        messages = request.get("messages", [])
        prompt += sum(fake_http.words(_text_of(m.get("content"))) for m in messages)
        answer = fake_http.words(text) + fake_http.words(behaviour.thinking or "")
        return {
            "input_tokens": prompt,
            "output_tokens": answer,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }

    def content_json(self, behaviour: Behaviour, text: str) -> list[dict[str, Any]]:
        """The response ``content`` blocks: thinking, redacted thinking, then text."""
        if behaviour.empty_content:
            return []
        blocks: list[dict[str, Any]] = []
        if behaviour.thinking is not None:
            blocks.append(
                {"type": "thinking", "thinking": behaviour.thinking, "signature": "c2lnbmF0dXJl"}
            )
        if behaviour.redacted_thinking:
            blocks.append({"type": "redacted_thinking", "data": "RW5jcnlwdGVkIHRoaW5raW5n"})
        if text or behaviour.stop_reason != "refusal":
            blocks.append({"type": "text", "text": text})
        return blocks

    def _stop_details(self, behaviour: Behaviour) -> dict[str, Any] | None:
        if behaviour.stop_reason != "refusal":
            return None
        return {"type": "refusal", "category": None, "explanation": None}

    def message_json(self, behaviour: Behaviour, request: dict[str, Any]) -> dict[str, Any]:
        """The ``message`` object answering one request."""
        text = self.reply_text(behaviour, request)
        return {
            "id": f"msg_fake{time.monotonic_ns()}",
            "type": "message",
            "role": "assistant",
            "model": request.get("model", "claude-fake"),
            "content": self.content_json(behaviour, text),
            "stop_reason": behaviour.stop_reason,
            "stop_sequence": None,
            "stop_details": self._stop_details(behaviour),
            "usage": self.usage_json(behaviour, request, text),
        }

    def events(
        self, behaviour: Behaviour, request: dict[str, Any]
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """The ``(event name, data)`` pairs of a streamed answer, in wire order."""
        text = self.reply_text(behaviour, request)
        usage = self.usage_json(behaviour, request, text)
        start_usage = {k: v for k, v in usage.items() if k != "output_tokens_details"}
        start_usage["output_tokens"] = 1
        message = self.message_json(behaviour, request)
        message.update(content=[], stop_reason=None, stop_details=None, usage=start_usage)
        yield "message_start", {"type": "message_start", "message": message}
        yield "ping", {"type": "ping"}
        for index, block in enumerate(self.content_json(behaviour, text)):
            kind = block["type"]
            if kind == "thinking":
                start = {"type": "thinking", "thinking": "", "signature": ""}
                deltas = [
                    {"type": "thinking_delta", "thinking": p}
                    for p in fake_http.pieces(block["thinking"])
                ]
                deltas.append({"type": "signature_delta", "signature": block["signature"]})
            elif kind == "text":
                start = {"type": "text", "text": ""}
                deltas = [
                    {"type": "text_delta", "text": p} for p in fake_http.pieces(block["text"])
                ]
            else:  # redacted_thinking arrives whole in its start event
                start, deltas = block, []
            yield "content_block_start", {
                "type": "content_block_start", "index": index, "content_block": start
            }
            for n, delta in enumerate(deltas):
                yield "content_block_delta", {
                    "type": "content_block_delta", "index": index, "delta": delta
                }
                if behaviour.stream_error is not None and kind == "text" and n == 0:
                    yield "error", {"type": "error", "error": behaviour.stream_error}
                    return
            yield "content_block_stop", {"type": "content_block_stop", "index": index}
        delta_usage: dict[str, Any] = {"output_tokens": usage.get("output_tokens", 0)}
        if "output_tokens_details" in usage:
            delta_usage["output_tokens_details"] = usage["output_tokens_details"]
        yield "message_delta", {
            "type": "message_delta",
            "delta": {
                "stop_reason": behaviour.stop_reason,
                "stop_sequence": None,
                "stop_details": self._stop_details(behaviour),
            },
            "usage": delta_usage,
        }
        yield "message_stop", {"type": "message_stop"}


def main(argv: list[str] | None = None) -> None:
    """Serve until killed (for benchmarks and manual runs); prints the base URL."""
    fake_http.serve_until_killed(FakeAnthropic, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    main()
