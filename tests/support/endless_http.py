"""A hostile model server: a real HTTP/1.1 server on loopback whose answers never end, or end
a byte at a time (tests of the lean HTTP client's bounds, ``agent_server.backends.lean_http``).

``EndlessServer(kind)`` answers each request on its own connection, in a thread, with one of
``KINDS``, writing until the client closes the connection (the ``drip`` kinds: until their
answer is written):

- ``json``: ``200``, ``application/json``, a chunked body that never ends;
- ``declared``: ``200``, ``application/json``, ``Content-Length`` of 1 GiB, the bytes written
  slowly (a client that believes the header need not read any);
- ``error``: ``500``, ``application/json``, a chunked body that never ends;
- ``after_done``: a valid SSE stream (one chunk whose delta is ``"hi"``, then
  ``data: [DONE]``) that goes on with comment lines forever;
- ``line``: an SSE stream whose first ``data:`` line never ends;
- ``comments``: an SSE stream of comment lines (64 KiB each) that never ends;
- ``held``: a valid SSE stream (as ``after_done``) whose body then neither goes on nor ends:
  the connection is held open, silent;
- ``drip``: a valid SSE stream (``DRIP_TEXT`` in three chunks, lines
  ending in ``\\r\\n``, one event's data on two ``data:`` lines) written one byte per chunk,
  each flushed on its own, then the body's end;
- ``drip_error``: ends too: ``400`` with OpenAI's JSON error body (its message
  ``DRIP_ERROR``), written one byte per chunk 2 ms apart, then the body's end.

``requests`` counts the requests read; ``finished`` holds, per connection, the bytes written
before the client closed it (filled once the server's write fails).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Final, Self

KINDS: Final[tuple[str, ...]] = ("json", "declared", "error", "after_done", "line", "comments",
                                  "held", "drip", "drip_error")
#: The answer ``drip`` streams, and the error message ``drip_error`` sends.
DRIP_TEXT: Final[str] = "go forward"
DRIP_ERROR: Final[str] = "The model 'm' does not exist."
_PIECE: Final[bytes] = b"x" * 65536
_DONE_STREAM: Final[bytes] = (b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
                              b"data: [DONE]\n\n")


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n" % len(data) + data + b"\r\n"


_HEADS: Final[dict[str, bytes]] = {
    "json": b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            b"transfer-encoding: chunked\r\n\r\n",
    "declared": b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b"content-length: 1073741824\r\n\r\n",
    "error": b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\n"
             b"transfer-encoding: chunked\r\n\r\n",
    "after_done": b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                  b"transfer-encoding: chunked\r\n\r\n",
    "line": b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n",
    "comments": b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                b"transfer-encoding: chunked\r\n\r\n",
    "held": b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n",
    "drip_error": b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
                  b"transfer-encoding: chunked\r\n\r\n",
    "drip": b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n",
}
_DRIP_STREAM: Final[bytes] = (
    b': a comment\r\n\r\ndata: {"choices":[{"index":0,"delta":{"content":"go "}}]}\r\n\r\n'
    b'data: {"choices":[{"index":0,\r\ndata: "delta":{"content":"for"}}]}\r\n\r\n'
    b'data: {"choices":[{"index":0,"delta":{"content":"ward"}}]}\r\n\r\ndata: [DONE]\r\n\r\n')
#: What the ``drip`` kinds write after their head, a byte at a time.
_DRIPS: Final[dict[str, bytes]] = {
    "drip": _DRIP_STREAM,
    "drip_error": (b'{"error": {"message": "' + DRIP_ERROR.encode()
                   + b'", "type": "invalid_request_error", "code": 400}}'),
}
#: What each kind writes after its head, again and again (``after_done`` writes its stream once
#: first, ``line`` its ``data: `` once first).
_BODIES: Final[dict[str, bytes]] = {
    "json": _chunk(_PIECE), "declared": b"{" * 1024, "error": _chunk(_PIECE),
    "after_done": _chunk(b": still here\n" * 4096), "line": _chunk(_PIECE),
    "comments": _chunk(b": " + _PIECE + b"\n"),
}
_FIRST: Final[dict[str, bytes]] = {"after_done": _chunk(_DONE_STREAM),
                                   "held": _chunk(_DONE_STREAM), "line": _chunk(b"data: ")}


class EndlessServer:
    """The server; ``with EndlessServer("json") as server:`` serves at ``server.base_url``."""

    def __init__(self, kind: str) -> None:
        """``kind``: one of ``KINDS``. Raises ValueError for another."""
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
        self.kind = kind
        self.requests = 0
        self.finished: list[int] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.1)
        self.base_url = f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"
        self._thread = threading.Thread(target=self._accept, name="endless-http", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        sent = 0
        with conn:
            conn.settimeout(30)
            try:
                request = b""
                while b"\r\n\r\n" not in request:  # the head; the body is left unread
                    piece = conn.recv(65536)
                    if not piece:
                        return
                    request += piece
                with self._lock:
                    self.requests += 1
                conn.sendall(_HEADS[self.kind] + _FIRST.get(self.kind, b""))
                if self.kind == "held":
                    conn.recv(1)  # silent until the client closes the connection
                    raise ConnectionResetError
                if self.kind in _DRIPS:
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    for byte in _DRIPS[self.kind]:
                        conn.sendall(_chunk(bytes([byte])))
                        sent += 1
                        if self.kind == "drip_error":
                            time.sleep(0.002)
                    conn.sendall(b"0\r\n\r\n")
                    conn.recv(1)  # until the client closes or sends its next request
                    raise ConnectionResetError
                body = _BODIES[self.kind]
                while not self._stop.is_set():
                    conn.sendall(body)
                    sent += len(body)
                    if self.kind == "declared":
                        time.sleep(0.01)
            except OSError:  # the client closed the connection: what this server waits for
                with self._lock:
                    self.finished.append(sent)
