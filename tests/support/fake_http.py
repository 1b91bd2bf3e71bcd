"""What the scripted provider test servers share (``fake_openai``, ``fake_anthropic``,
``fake_gemini``): a real ``ThreadingHTTPServer`` on loopback, served from a daemon thread.

``ScriptedHTTPServer`` holds the lifecycle (``start``/``stop``, ``with``), the queue of scripted
behaviours (``script``), the recorded requests (``requests``, ``clear``) and the request flow:
read the JSON body, find the route, record the request, take the next behaviour, sleep the
server latency plus the behaviour's delay, answer. ``ScriptedHandler`` writes the answers: JSON
(``send_json``) or server-sent events over chunked transfer encoding (``send_sse``).

A provider's fake subclasses ``ScriptedHTTPServer`` (and its ``Behaviour`` subclasses
``ScriptedBehaviour``) and supplies only its wire format: which paths it serves and what it
records (``record``), its error bodies (``error_json`` and the messages of its 400 and 404
answers), its response headers and the answer itself (``respond``).
"""

from __future__ import annotations

import argparse
import json
import re
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Generic, Self, TypeVar

#: A default reply computed from the request JSON.
ReplyFn = Callable[[dict[str, Any]], str]


@dataclass
class ScriptedBehaviour:
    """The fields every fake's ``Behaviour`` starts with, in this order: an HTTP ``status`` (200:
    answer normally; else answer with the error ``body``, None meaning the provider's default
    error body) and ``headers`` sent with the answer, a ``delay`` (seconds) slept before
    answering on top of the server latency, and a ``reply`` text replacing the default one."""

    status: int = 200
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    reply: str | None = None


BehaviourT = TypeVar("BehaviourT", bound=ScriptedBehaviour)
RecordT = TypeVar("RecordT")


@dataclass
class RecordedRequest:
    """One request as received: method, path, headers (lower-case names) and decoded JSON."""

    method: str
    path: str
    headers: dict[str, str]
    json: dict[str, Any] | None


def words(text: str) -> int:
    """The number of white-space separated words in ``text`` (the fakes' token count)."""
    return len(text.split())


def pieces(text: str) -> list[str]:
    """``text`` cut into word-sized stream deltas (a word plus the white space after it),
    keeping every character, as a streaming model sends it."""
    return re.findall(r"\S+\s*|\s+", text)


def sse_event(data: Any, *, event: str | None = None, end: str = "\n\n") -> str:
    """One server-sent event: an ``event:`` line when ``event`` is given, then ``data:`` with
    ``data`` as JSON, then ``end`` (the blank line that closes the event)."""
    head = f"event: {event}\n" if event is not None else ""
    return f"{head}data: {json.dumps(data)}{end}"


class ScriptedHandler(BaseHTTPRequestHandler):
    """The request handler of a ``ScriptedHTTPServer``: hands GET and POST to its fake and
    writes the fake's answers (HTTP/1.1, keep-alive)."""

    protocol_version = "HTTP/1.1"
    #: TCP_NODELAY: the headers and the body go out in two writes; with Nagle's algorithm the
    #: body waited for the client's delayed ACK of the headers (about 40 ms per answer on
    #: Linux), which a fixed-latency model server must not add.
    disable_nagle_algorithm = True
    fake: ClassVar[ScriptedHTTPServer[Any, Any]]

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request logging."""

    def do_GET(self) -> None:
        self.fake.handle_get(self)

    def do_POST(self) -> None:
        self.fake.handle_post(self)

    def send_json(
        self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
    ) -> None:
        """Answer ``status`` with ``body`` as JSON; ``headers`` are sent after the fake's own."""
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", self.fake.json_content_type)
        self.send_header("content-length", str(len(data)))
        self._send_headers(self.fake.response_headers(), headers)
        self.end_headers()
        self.wfile.write(data)

    def send_sse(self, events: Iterable[str], headers: dict[str, str] | None = None) -> None:
        """Answer 200 with a stream of server-sent events (each an already formatted event, see
        ``sse_event``), one chunk each, flushed as it is written."""
        self.send_response(200)
        self.send_header("content-type", self.fake.sse_content_type)
        self._send_headers(self.fake.sse_headers, self.fake.response_headers())
        self.send_header("transfer-encoding", "chunked")
        self._send_headers(headers)
        self.end_headers()
        for event in events:
            data = event.encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _send_headers(self, *groups: dict[str, str] | None) -> None:
        for group in groups:
            for key, value in (group or {}).items():
                self.send_header(key, value)


class ScriptedHTTPServer(Generic[BehaviourT, RecordT]):
    """A scripted fake provider server; start/stop it with ``with`` (or ``start()``/``stop()``).

    Subclasses define ``new_behaviour`` (the behaviour used when nothing is scripted),
    ``record``, ``respond`` and ``error_json``, and may change ``thread_name``, the content
    types, ``sse_headers``, ``response_headers``, the 400/404 messages and bodies and
    ``handle_get`` (default: HTTP 501, as ``BaseHTTPRequestHandler`` answers).
    """

    thread_name: ClassVar[str] = "fake-http"
    json_content_type: ClassVar[str] = "application/json"
    sse_content_type: ClassVar[str] = "text/event-stream"
    #: Headers of every SSE answer, after its content type.
    sse_headers: ClassVar[dict[str, str]] = {"cache-control": "no-cache"}
    #: Message of the 400 answer to a request body that is not JSON.
    invalid_json_message: ClassVar[str] = "body is not JSON"
    #: Message of the 404 answer to a path the server does not serve (``{path}``: that path).
    not_found_message: ClassVar[str] = "no route {path}"

    def __init__(
        self,
        reply: str | ReplyFn = "ok",
        *,
        latency: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
    ):
        """``reply``: default reply text or a function of the request JSON; ``latency``: seconds
        slept before every answer; ``port`` 0 picks a free port. The socket is bound here."""
        self.reply = reply
        self.latency = latency
        self._host = host
        self._lock = threading.Lock()
        self._queue: deque[BehaviourT] = deque()
        self._requests: list[RecordT] = []
        self._stopping = threading.Event()
        handler = type("Handler", (ScriptedHandler,), {"fake": self})
        self._server = ThreadingHTTPServer((host, port), handler, bind_and_activate=False)
        self._server.daemon_threads = True
        # listen backlog: many concurrent clients (a full one makes the kernel drop handshakes,
        # which a busy machine turns into reset connections); the kernel caps it at somaxconn
        self._server.request_queue_size = 4096
        self._server.server_bind()
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> Self:
        """Listen and serve in a daemon thread. Returns self."""
        self._server.server_activate()
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name=self.thread_name, daemon=True
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

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound TCP port."""
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``: the server root."""
        return f"http://{self._host}:{self.port}"

    # -- scripting and records ---------------------------------------------------------------
    def script(self, *behaviours: BehaviourT) -> None:
        """Queue behaviours; each coming request to a served path consumes one, in order."""
        with self._lock:
            self._queue.extend(behaviours)

    @property
    def requests(self) -> list[RecordT]:
        """A copy of all recorded requests to served paths, in arrival order."""
        with self._lock:
            return list(self._requests)

    def clear(self) -> None:
        """Forget recorded requests and queued behaviours."""
        with self._lock:
            self._requests.clear()
            self._queue.clear()

    def _next(self, record: RecordT) -> BehaviourT:
        with self._lock:
            self._requests.append(record)
            return self._queue.popleft() if self._queue else self.new_behaviour()

    def _sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._stopping.wait(seconds)

    def reply_text(self, behaviour: BehaviourT, request: dict[str, Any]) -> str:
        """The answer text: the behaviour's ``reply``, else the server's default reply."""
        if behaviour.reply is not None:
            return behaviour.reply
        return self.reply(request) if callable(self.reply) else self.reply

    # -- the request flow --------------------------------------------------------------------
    def handle_get(self, out: ScriptedHandler) -> None:
        """Answer a GET request (default: 501, no GET route)."""
        out.send_error(501, f"Unsupported method ({out.command!r})")

    def handle_post(self, out: ScriptedHandler) -> None:
        """Answer a POST request: a body that is not JSON gets 400 (``invalid_json_body``), a
        path ``record`` does not serve 404 (``not_found_body``); otherwise the request is
        recorded, the next behaviour taken, latency and delay slept, and ``respond`` answers
        (a client that hung up meanwhile is let go)."""
        length = int(out.headers.get("content-length") or 0)
        raw = out.rfile.read(length) if length else b""
        try:
            request = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            out.send_json(400, self.invalid_json_body())
            return
        headers = {k.lower(): v for k, v in out.headers.items()}
        record = self.record(out.path, headers, request)
        if record is None:
            out.send_json(404, self.not_found_body(out.path))
            return
        behaviour = self._next(record)
        self._sleep(self.latency + behaviour.delay)
        try:
            self.respond(out, behaviour, record, request)
        except (BrokenPipeError, ConnectionResetError):
            out.close_connection = True  # the client gave up (e.g. its timeout)

    def send_scripted_error(self, out: ScriptedHandler, behaviour: BehaviourT) -> None:
        """Answer with the behaviour's error status: its ``body`` (default: ``error_json`` with
        "scripted error <status>") and its ``headers``."""
        status = behaviour.status
        body = behaviour.body or self.error_json(status, f"scripted error {status}")
        out.send_json(status, body, behaviour.headers)

    # -- the wire format (subclasses) --------------------------------------------------------
    def new_behaviour(self) -> BehaviourT:
        """The behaviour of a request when nothing is scripted."""
        raise NotImplementedError

    def record(self, path: str, headers: dict[str, str], request: Any) -> RecordT | None:
        """The record of a POST to ``path`` (with lower-cased ``headers`` and the decoded JSON
        body), or None when the server has no such route."""
        raise NotImplementedError

    def respond(
        self, out: ScriptedHandler, behaviour: BehaviourT, record: RecordT, request: Any
    ) -> None:
        """Answer one recorded request as ``behaviour`` says."""
        raise NotImplementedError

    def error_json(self, status: int, message: str) -> dict[str, Any]:
        """The provider's error body for ``status`` with ``message``."""
        raise NotImplementedError

    def route_error_json(self, status: int, message: str) -> dict[str, Any]:
        """The error body of the 400/404 answers given before a request is recorded (default:
        ``error_json``)."""
        return self.error_json(status, message)

    def invalid_json_body(self) -> dict[str, Any]:
        """The error body for a request body that is not JSON (HTTP 400)."""
        return self.route_error_json(400, self.invalid_json_message)

    def not_found_body(self, path: str) -> dict[str, Any]:
        """The error body for a path the server does not serve (HTTP 404)."""
        return self.route_error_json(404, self.not_found_message.format(path=path))

    def response_headers(self) -> dict[str, str]:
        """Headers the provider adds to every answer (default: none)."""
        return {}


def serve_until_killed(
    factory: Callable[..., ScriptedHTTPServer[Any, Any]],
    description: str,
    argv: list[str] | None = None,
) -> None:
    """Command line of a fake (for benchmarks and manual runs): ``--host``, ``--port``,
    ``--latency`` (seconds per request), ``--reply`` (fixed reply text). Starts
    ``factory(reply, latency=..., host=..., port=...)``, prints its base URL and serves until
    killed."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds per request")
    parser.add_argument("--reply", default="ok", help="fixed reply text")
    args = parser.parse_args(argv)
    server = factory(args.reply, latency=args.latency, host=args.host, port=args.port)
    server.start()
    print(server.base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
