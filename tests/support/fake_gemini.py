"""A real local HTTP server speaking the Gemini API's generateContent wire format (tests).

``POST /v1beta/models/{model}:generateContent`` answers with ``GenerateContentResponse`` JSON;
``POST /v1beta/models/{model}:streamGenerateContent?alt=sse`` answers with SSE events, one
``data: {GenerateContentResponse chunk}`` per chunk, as the Gemini API does. The JSON uses the
API's camelCase names (``candidates[].content.parts[]``, ``finishReason``, ``usageMetadata``,
``promptFeedback.blockReason``); errors use Google's ``{"error": {code, message, status}}`` shape.

Scriptable: ``script(Behaviour(...), ...)`` queues one behaviour per coming request (an error
status with its JSON body and headers, a delay to provoke timeouts, a reply with thought text, a
finish reason, a blocked prompt, an empty candidate list, explicit usage, an error event in the
middle of a stream); when the queue is empty the default reply is used. When ``api_key`` is set,
a request whose ``x-goog-api-key`` header differs gets the API's real bad-key answer (HTTP 400,
``INVALID_ARGUMENT`` with reason ``API_KEY_INVALID``). Every request is recorded (method, path
with query, model, lower-cased headers, JSON) in ``requests``. The server machinery is
``fake_http``'s.

    with FakeGemini(reply="go forward") as server:
        client = genai.Client(api_key="k", http_options={"base_url": server.base_url})
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar
from urllib.parse import urlsplit

from tests.support import fake_http
from tests.support.fake_http import ReplyFn, ScriptedHandler

__all__ = [
    "Behaviour",
    "FakeGemini",
    "RecordedRequest",
    "ReplyFn",
    "bad_key_body",
    "error_body",
    "rate_limit_body",
]

#: google.rpc status names of the HTTP statuses the API answers with.
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

#: Finish reasons for which the API withholds the candidate's content.
WITHHELD_FINISH = {
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
}

_ROUTE = re.compile(r"^/(?P<version>v1[a-z0-9]*)/models/(?P<model>[^/:]+):(?P<method>[A-Za-z]+)$")

_HARM_CATEGORIES = (
    "HARM_CATEGORY_HATE_SPEECH",
    "HARM_CATEGORY_DANGEROUS_CONTENT",
    "HARM_CATEGORY_HARASSMENT",
    "HARM_CATEGORY_SEXUALLY_EXPLICIT",
)


def error_body(
    status: int, message: str, details: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """Google's error JSON: ``{"error": {"code", "message", "status"[, "details"]}}``."""
    err: dict[str, Any] = {
        "code": status,
        "message": message,
        "status": STATUS_NAMES.get(status, "UNKNOWN"),
    }
    if details is not None:
        err["details"] = details
    return {"error": err}


def bad_key_body() -> dict[str, Any]:
    """The body of the API's HTTP 400 answer to an invalid API key (reason API_KEY_INVALID)."""
    message = "API key not valid. Please pass a valid API key."
    return error_body(
        400,
        message,
        [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "API_KEY_INVALID",
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            },
            {
                "@type": "type.googleapis.com/google.rpc.LocalizedMessage",
                "locale": "en-US",
                "message": message,
            },
        ],
    )


def rate_limit_body(retry_delay: str | None = None) -> dict[str, Any]:
    """The body of an HTTP 429 quota answer; ``retry_delay`` (e.g. ``"0.2s"``) adds the
    ``google.rpc.RetryInfo`` detail the API uses to say when to come back."""
    details: list[dict[str, Any]] = []
    if retry_delay is not None:
        details.append(
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay}
        )
    return error_body(
        429,
        "You exceeded your current quota, please check your plan and billing details.",
        details,
    )


@dataclass
class Behaviour(fake_http.ScriptedBehaviour):
    """What the server does for one request.

    ``status`` != 200 answers with ``body`` (default: Google's error JSON for that status) and
    ``headers`` (e.g. ``{"retry-after": "0.05"}``). ``delay`` seconds are slept first (on top of
    the server latency). ``reply`` overrides the default reply text; ``thought`` adds a thought
    part (``"thought": true``) before it; ``finish_reason`` is the candidate's (for a withheld
    reason such as ``SAFETY`` the content is left out unless ``reply`` is given);
    ``block_reason`` answers with ``promptFeedback.blockReason`` and no candidates;
    ``empty_candidates`` answers with no candidates and no block reason; ``usage`` overrides the
    computed ``usageMetadata``; ``stream_error`` (Google error JSON) is sent as an SSE event after
    the content chunks instead of the final chunk (streaming only).
    """

    thought: str | None = None
    finish_reason: str = "STOP"
    block_reason: str | None = None
    empty_candidates: bool = False
    usage: dict[str, Any] | None = None
    stream_error: dict[str, Any] | None = None


@dataclass
class RecordedRequest:
    """One request as received: HTTP method, path (with query), model and API method from the
    path (``generateContent`` / ``streamGenerateContent``), headers (lower-case names), JSON."""

    method: str
    path: str
    model: str
    api_method: str
    headers: dict[str, str]
    json: dict[str, Any] | None


def _prompt_words(request: dict[str, Any]) -> int:
    total = 0
    contents = list(request.get("contents") or [])
    if isinstance(request.get("systemInstruction"), dict):
        contents.append(request["systemInstruction"])
    for content in contents:
        for part in content.get("parts") or []:
            if isinstance(part, dict):
                total += fake_http.words(str(part.get("text", "")))
    return total


class FakeGemini(fake_http.ScriptedHTTPServer[Behaviour, RecordedRequest]):
    """The server; start/stop it with ``with`` (or ``start()``/``stop()``)."""

    thread_name = "fake-gemini"
    json_content_type = "application/json; charset=UTF-8"
    sse_headers: ClassVar[dict[str, str]] = {}
    invalid_json_message = "Invalid JSON payload received."

    def __init__(
        self, reply: str | ReplyFn = "ok", *, latency: float = 0.0, host: str = "127.0.0.1",
        port: int = 0, api_key: str | None = None, model_version: str = "gemini-fake-001",
    ):
        """``reply``: default reply text or a function of the request JSON; ``latency``: seconds
        slept before every answer; ``port`` 0 picks a free port; ``api_key``: when set, only
        this key is accepted (others get the real bad-key 400). ``base_url`` is
        ``http://127.0.0.1:<port>`` (the SDK appends ``/v1beta/models/...``)."""
        super().__init__(reply, latency=latency, host=host, port=port)
        self.api_key = api_key
        self.model_version = model_version

    # -- wire format -------------------------------------------------------------------------
    def new_behaviour(self) -> Behaviour:
        return Behaviour()

    def record(
        self, path: str, headers: dict[str, str], request: Any
    ) -> RecordedRequest | None:
        """``generateContent`` and ``streamGenerateContent`` requests are recorded (and
        scripted); other paths are 404."""
        route = _ROUTE.match(urlsplit(path).path)
        if route is None or route["method"] not in ("generateContent", "streamGenerateContent"):
            return None
        return RecordedRequest("POST", path, route["model"], route["method"], headers, request)

    def error_json(self, status: int, message: str) -> dict[str, Any]:
        return error_body(status, message)

    def not_found_body(self, path: str) -> dict[str, Any]:
        """The 404 body names the path without its query."""
        return super().not_found_body(urlsplit(path).path)

    def handle_get(self, out: ScriptedHandler) -> None:
        """No GET route: 404."""
        out.send_json(404, self.not_found_body(out.path))

    def respond(
        self, out: ScriptedHandler, behaviour: Behaviour, record: RecordedRequest, request: Any
    ) -> None:
        """A wrong key (when ``api_key`` is set) -> the bad-key 400 first; then a scripted
        error; else the answer, as SSE for ``streamGenerateContent``."""
        if self.api_key is not None and record.headers.get("x-goog-api-key") != self.api_key:
            out.send_json(400, bad_key_body())
        elif behaviour.status != 200:
            self.send_scripted_error(out, behaviour)
        elif record.api_method == "streamGenerateContent":
            chunks = self.chunks(behaviour, request)
            sse = (fake_http.sse_event(c, end="\r\n\r\n") for c in chunks)
            out.send_sse(sse, behaviour.headers)
        else:
            out.send_json(200, self.response_json(behaviour, request), behaviour.headers)

    # -- answers -----------------------------------------------------------------------------
    def reply_text(self, behaviour: Behaviour, request: dict[str, Any]) -> str:
        """The answer text: the behaviour's ``reply``; else none for a withheld finish reason;
        else the server's default reply."""
        if behaviour.reply is None and behaviour.finish_reason in WITHHELD_FINISH:
            return ""
        return super().reply_text(behaviour, request)

    def _usage(
        self, behaviour: Behaviour, request: dict[str, Any], text: str, thought: str
    ) -> dict[str, Any]:
        if behaviour.usage is not None:
            return behaviour.usage
        prompt = _prompt_words(request)
        usage = {"promptTokenCount": prompt}
        if behaviour.block_reason is None and not behaviour.empty_candidates:
            usage["candidatesTokenCount"] = fake_http.words(text)
            if thought:
                usage["thoughtsTokenCount"] = fake_http.words(thought)
        usage["totalTokenCount"] = sum(usage.values())
        return usage

    def _envelope(self, usage: dict[str, Any]) -> dict[str, Any]:
        return {
            "usageMetadata": usage,
            "modelVersion": self.model_version,
            "responseId": f"resp-{time.monotonic_ns()}",
        }

    @staticmethod
    def _ratings(blocked: str | None = None) -> list[dict[str, Any]]:
        ratings: list[dict[str, Any]] = []
        for category in _HARM_CATEGORIES:
            rating: dict[str, Any] = {"category": category, "probability": "NEGLIGIBLE"}
            if blocked is not None and category == "HARM_CATEGORY_DANGEROUS_CONTENT":
                rating = {"category": category, "probability": "HIGH", "blocked": True}
            ratings.append(rating)
        return ratings

    def _candidate(
        self, parts: list[dict[str, Any]], finish: str | None, blocked: bool
    ) -> dict[str, Any]:
        candidate: dict[str, Any] = {"index": 0}
        if parts:
            candidate["content"] = {"role": "model", "parts": parts}
        if finish is not None:
            candidate["finishReason"] = finish
        if blocked:
            candidate["safetyRatings"] = self._ratings(finish)
        return candidate

    def response_json(self, behaviour: Behaviour, request: dict[str, Any]) -> dict[str, Any]:
        """The ``GenerateContentResponse`` object for one non-streamed request."""
        text = self.reply_text(behaviour, request)
        thought = behaviour.thought or ""
        usage = self._usage(behaviour, request, text, thought)
        if behaviour.block_reason is not None:
            return {
                "promptFeedback": {
                    "blockReason": behaviour.block_reason,
                    "safetyRatings": self._ratings(behaviour.block_reason),
                },
                **self._envelope(usage),
            }
        if behaviour.empty_candidates:
            return self._envelope(usage)
        parts: list[dict[str, Any]] = []
        if thought:
            parts.append({"text": thought, "thought": True})
        if text:
            parts.append({"text": text})
        blocked = behaviour.finish_reason in WITHHELD_FINISH
        return {
            "candidates": [self._candidate(parts, behaviour.finish_reason, blocked)],
            **self._envelope(usage),
        }

    def chunks(self, behaviour: Behaviour, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The ``GenerateContentResponse`` chunks of a streamed answer: thought pieces, text
        pieces, then a last chunk with the finish reason (or ``stream_error``'s error object).
        Every chunk carries the usage so far, as the API does."""
        text = self.reply_text(behaviour, request)
        thought = behaviour.thought or ""
        usage = self._usage(behaviour, request, text, thought)
        if behaviour.block_reason is not None or behaviour.empty_candidates:
            yield self.response_json(behaviour, request)
            return
        prompt_only = {"promptTokenCount": usage.get("promptTokenCount", 0)}
        for piece in fake_http.pieces(thought):
            part = {"text": piece, "thought": True}
            yield {
                "candidates": [self._candidate([part], None, False)],
                **self._envelope(prompt_only),
            }
        for piece in fake_http.pieces(text):
            yield {
                "candidates": [self._candidate([{"text": piece}], None, False)],
                **self._envelope(prompt_only),
            }
        if behaviour.stream_error is not None:
            yield behaviour.stream_error
            return
        blocked = behaviour.finish_reason in WITHHELD_FINISH
        yield {
            "candidates": [self._candidate([], behaviour.finish_reason, blocked)],
            **self._envelope(usage),
        }

