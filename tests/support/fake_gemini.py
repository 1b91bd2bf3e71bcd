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
with query, model, lower-cased headers, JSON) in ``requests``.

    with FakeGemini(reply="go forward") as server:
        client = genai.Client(api_key="k", http_options={"base_url": server.base_url})
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

ReplyFn = Callable[[dict[str, Any]], str]

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
class Behaviour:
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

    status: int = 200
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    reply: str | None = None
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


def _words(text: str) -> int:
    return len(text.split())


def _prompt_words(request: dict[str, Any]) -> int:
    total = 0
    contents = list(request.get("contents") or [])
    if isinstance(request.get("systemInstruction"), dict):
        contents.append(request["systemInstruction"])
    for content in contents:
        for part in content.get("parts") or []:
            if isinstance(part, dict):
                total += _words(str(part.get("text", "")))
    return total


def _pieces(text: str) -> list[str]:
    """Split text into stream pieces (word plus following space), keeping every character."""
    return re.findall(r"\S+\s*|\s+", text)


class FakeGemini:
    """The server; start/stop it with ``with`` (or ``start()``/``stop()``)."""

    def __init__(
        self,
        reply: str | ReplyFn = "ok",
        *,
        latency: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        model_version: str = "gemini-fake-001",
    ):
        """``reply``: default reply text or a function of the request JSON; ``latency``: seconds
        slept before every answer; ``port`` 0 picks a free port; ``api_key``: when set, only
        this key is accepted (others get the real bad-key 400)."""
        self.reply = reply
        self.latency = latency
        self.api_key = api_key
        self.model_version = model_version
        self._host = host
        self._lock = threading.Lock()
        self._queue: deque[Behaviour] = deque()
        self._requests: list[RecordedRequest] = []
        self._stopping = threading.Event()
        self._server = ThreadingHTTPServer(
            (host, port), _make_handler(self), bind_and_activate=False
        )
        self._server.daemon_threads = True
        self._server.request_queue_size = 256
        self._server.server_bind()
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> FakeGemini:
        """Listen and serve in a daemon thread. Returns self."""
        self._server.server_activate()
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-gemini", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (sleeping handlers are woken)."""
        self._stopping.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> FakeGemini:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound TCP port."""
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (the SDK appends ``/v1beta/models/...``)."""
        return f"http://{self._host}:{self.port}"

    # -- scripting and records ---------------------------------------------------------------
    def script(self, *behaviours: Behaviour) -> None:
        """Queue behaviours; each coming generate request consumes one, in order."""
        with self._lock:
            self._queue.extend(behaviours)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of all recorded generate requests, in arrival order."""
        with self._lock:
            return list(self._requests)

    def clear(self) -> None:
        """Forget recorded requests and queued behaviours."""
        with self._lock:
            self._requests.clear()
            self._queue.clear()

    def _next(self, record: RecordedRequest) -> Behaviour:
        with self._lock:
            self._requests.append(record)
            return self._queue.popleft() if self._queue else Behaviour()

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)

    # -- answers -----------------------------------------------------------------------------
    def _reply_text(self, behaviour: Behaviour, request: dict[str, Any]) -> str:
        if behaviour.reply is not None:
            return behaviour.reply
        if behaviour.finish_reason in WITHHELD_FINISH:
            return ""
        return self.reply(request) if callable(self.reply) else self.reply

    def _usage(
        self, behaviour: Behaviour, request: dict[str, Any], text: str, thought: str
    ) -> dict[str, Any]:
        if behaviour.usage is not None:
            return behaviour.usage
        prompt = _prompt_words(request)
        usage = {"promptTokenCount": prompt}
        if behaviour.block_reason is None and not behaviour.empty_candidates:
            usage["candidatesTokenCount"] = _words(text)
            if thought:
                usage["thoughtsTokenCount"] = _words(thought)
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
        text = self._reply_text(behaviour, request)
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
        text = self._reply_text(behaviour, request)
        thought = behaviour.thought or ""
        usage = self._usage(behaviour, request, text, thought)
        if behaviour.block_reason is not None or behaviour.empty_candidates:
            yield self.response_json(behaviour, request)
            return
        prompt_only = {"promptTokenCount": usage.get("promptTokenCount", 0)}
        for piece in _pieces(thought):
            part = {"text": piece, "thought": True}
            yield {
                "candidates": [self._candidate([part], None, False)],
                **self._envelope(prompt_only),
            }
        for piece in _pieces(text):
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


def _make_handler(server: FakeGemini) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Silence per-request logging."""

        def do_GET(self) -> None:
            self._json(404, error_body(404, f"no route {urlsplit(self.path).path}"))

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                request = json.loads(raw) if raw else {}
            except json.JSONDecodeError:
                self._json(400, error_body(400, "Invalid JSON payload received."))
                return
            url = urlsplit(self.path)
            route = _ROUTE.match(url.path)
            if route is None or route["method"] not in ("generateContent", "streamGenerateContent"):
                self._json(404, error_body(404, f"no route {url.path}"))
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            record = RecordedRequest(
                "POST", self.path, route["model"], route["method"], headers, request
            )
            behaviour = server._next(record)
            server._sleep(server.latency + behaviour.delay)
            streaming = route["method"] == "streamGenerateContent"
            try:
                if server.api_key is not None and headers.get("x-goog-api-key") != server.api_key:
                    self._json(400, bad_key_body())
                elif behaviour.status != 200:
                    body = behaviour.body or error_body(
                        behaviour.status, f"scripted error {behaviour.status}"
                    )
                    self._json(behaviour.status, body, behaviour.headers)
                elif streaming:
                    self._sse(server.chunks(behaviour, request), behaviour.headers)
                else:
                    self._json(200, server.response_json(behaviour, request), behaviour.headers)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True  # the client gave up (e.g. its timeout)

        def _json(
            self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
        ) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json; charset=UTF-8")
            self.send_header("content-length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _sse(self, chunks: Iterator[dict[str, Any]], headers: dict[str, str]) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            for chunk in chunks:
                data = f"data: {json.dumps(chunk)}\r\n\r\n".encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    return Handler
