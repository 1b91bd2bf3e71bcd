"""The lean HTTP client of the OpenAI-compatible backend: chat completions over one ``aiohttp``
session, for self-hosted servers (vLLM, llama.cpp's server, any ``client.base_url``).

The official ``openai`` SDK's request path costs several times the CPU per call of a plain
aiohttp POST of the same body (``python -m benchmarks.model_client``; the backend through each
client: ``benchmarks/results/model_client_transports.json``). Against a hosted API a
call costs cents and takes seconds, so the SDK stays there; against a self-hosted server the
client's CPU is a large share of a step, so ``client.http_client`` (``auto`` for ``vllm`` and
``llamacpp``) sends with this client instead. It is only the sending: the request body, the
choice constraints, the reasoning options and the reply's parsing are
``openai_compat.OpenAICompatBackend``'s, the same for both clients.

What it keeps of the SDK's path, so that a failure reads the same whichever client sent:

- auth: ``Authorization: Bearer <key>``; JSON body; the URL is ``<base_url>/chat/completions``;
- an error answer (any status outside 2xx): ``retry.classify_status`` with the status, the
  ``retry-after``/``retry-after-ms`` headers and the provider's text from the JSON error body,
  found as the SDK finds it (``error.message``, else ``Error code: <status>``), the API key
  redacted: 408/429/5xx are retried (honouring ``retry-after``), 401/403 are "bad API key";
- timeouts: ``client.timeout`` bounds connecting and each read (the whole reply when not
  streaming, with the backend's own bound; each chunk when streaming), reported as "timed out
  after <t>s (<base_url>)"; a refused connection as "connection error (<base_url>): connection
  refused (...)"; other transport errors as "connection error" (``retry.classify_transport_
  error``), all retried;
- a 2xx reply whose content type is not JSON comes back as text (the backend refuses it as not
  a JSON object, as with the SDK); a JSON reply comes back decoded;
- streaming: the SSE events (``data:`` lines, up to ``data: [DONE]``) decoded one by one; an
  event whose JSON has an ``error`` is "API error: <message>" (retried), as the SDK raises it.

What it reads of a reply is bounded, so that a broken or hostile server (an endless body, an
endless line, a stream that goes on or hangs after ``[DONE]``) costs the Policy server neither
its memory nor a call that never ends: at most ``MAX_REPLY_BYTES`` of a reply
(``MAX_STREAM_BYTES`` of a stream, ``MAX_EVENT_BYTES`` of one of its lines) and
``MAX_ERROR_BYTES`` of an error answer's body (its message is read from that much); past
``[DONE]`` at most ``MAX_AFTER_DONE_BYTES`` more, for at most ``AFTER_DONE_WAIT_S``. A reply or
stream over its bound is a ``BackendError`` (not retried: the same request gets the same
answer) naming the bound; the connection is then closed, not reused.

One ``aiohttp.ClientSession`` per backend, made on the first call (in the event loop that
makes it) and closed by ``aclose``; connections are kept alive and reused. A proxy named by the
environment (``HTTP_PROXY``/``HTTPS_PROXY``, not for hosts in ``NO_PROXY``) is used, found by
aiohttp's own lookup (``aiohttp.helpers.get_env_proxy_for_url``, what ``trust_env`` runs) once,
when the session is made: ``trust_env`` itself repeats that lookup, and a ``.netrc`` read, in a
worker thread on every request, a sixth of the Policy server's CPU per step against a
self-hosted server (``benchmarks.workload_a`` under py-spy).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any
from urllib.request import getproxies, proxy_bypass

import aiohttp
from aiohttp.helpers import BasicAuth, get_env_proxy_for_url
from yarl import URL

from agent_server.backends.base import BackendError, ClientSetupError
from agent_server.backends.retry import (
    TransientError,
    classify_status,
    classify_transport_error,
    error_message,
)

#: What the SDK says for an error event in a stream that carries no message.
STREAM_ERROR = "An error occurred during streaming"
#: The most bytes of a non-streamed reply body read (a chat completion is kilobytes; one with
#: every token's logprobs a few megabytes).
MAX_REPLY_BYTES = 32 * 1024 * 1024
#: The most bytes of a streamed reply read (an estimate of the longest honest stream: 128k
#: tokens at a couple of hundred bytes per chunk is about 32 MB).
MAX_STREAM_BYTES = 256 * 1024 * 1024
#: The most bytes one line of a stream may hold (a chunk's ``data:`` line).
MAX_EVENT_BYTES = 4 * 1024 * 1024
#: The most bytes of an error answer's body read for its message.
MAX_ERROR_BYTES = 64 * 1024
#: The most bytes read after ``data: [DONE]`` (so that the connection can be reused); a stream
#: that goes on longer is left unread and its connection closed.
MAX_AFTER_DONE_BYTES = 64 * 1024
#: The longest the end of a body is waited for after ``data: [DONE]`` (a server sends it at
#: once; one that holds the connection open instead costs this, not a timed-out call).
AFTER_DONE_WAIT_S = 1.0


class LeanSender:
    """Sends chat completions (and the probe's ``GET /models``) to one OpenAI-compatible
    endpoint over aiohttp; see the module docstring. Raises the classified failures of
    ``retry`` (``TransientError``, ``BackendError``) for every HTTP and transport failure."""

    kind = "lean"

    def __init__(self, *, api_key: str, base_url: str, timeout: float, provider: str,
                 redact: Callable[[str], str], key_env: str | None = None) -> None:
        """``base_url``: the endpoint, e.g. ``http://127.0.0.1:8000/v1``; ``timeout``: seconds
        for connecting and for each read; ``redact``: hides the key in every message."""
        self.base_url = base_url.rstrip("/") + "/"
        self._completions = self.base_url + "chat/completions"
        self._models = self.base_url + "models"
        self._api_key = api_key
        self._timeout_s = timeout
        self._provider = provider
        self._redact = redact
        self._key_env = key_env
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def api_key(self) -> str:
        """The key sent as the bearer token."""
        return self._api_key

    def _client(self) -> aiohttp.ClientSession:
        """The session, made on first use in the running event loop (again if that loop has
        changed or the session was closed). Raises ``ClientSetupError`` (not retried) when the
        environment names a proxy this client cannot use (``env_proxy``)."""
        loop = asyncio.get_running_loop()
        session = self._session
        if session is None or session.closed or self._loop is not loop:
            try:
                proxy, proxy_auth = env_proxy(self._completions)
            except ValueError as exc:
                raise ClientSetupError(f"{self._provider}: {exc}",
                                       provider=self._provider) from None
            session = aiohttp.ClientSession(
                # no cap on connections: client.max_concurrency (ConcurrencyLimited) is the
                # one cap on calls in flight, and a pool capped under it would hold calls back
                connector=aiohttp.TCPConnector(limit=0),
                timeout=aiohttp.ClientTimeout(total=None, connect=self._timeout_s,
                                              sock_read=self._timeout_s),
                headers={"Authorization": f"Bearer {self._api_key}",
                         "Accept": "application/json", "User-Agent": "moria-lean-http"},
                proxy=proxy, proxy_auth=proxy_auth,
            )
            self._session, self._loop = session, loop
        return session

    async def aclose(self) -> None:
        """Close the session (its connections); the next call makes a new one."""
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    @contextlib.asynccontextmanager
    async def _reply(self, body: dict[str, Any]) -> AsyncIterator[aiohttp.ClientResponse]:
        """The reply to ``POST /chat/completions`` of ``body``, once its status is 2xx (else
        the classified failure of ``_status_failure`` is raised); closed on leaving."""
        async with self._client().post(
                self._completions, data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"}) as reply:
            if not 200 <= reply.status < 300:
                raise await self._status_failure(reply)
            yield reply

    def _oversize(self, what: str, limit: int, url: str | None = None) -> BackendError:
        """The failure of a reply from ``url`` (default: the completions URL) over one of this
        module's bounds (not retried)."""
        return BackendError(
            f"{self._provider}: {url or self._completions} sent {what} over {_size(limit)}, "
            "the most the lean client reads; no chat-completions server answers with so much "
            "(is client.base_url a chat-completions endpoint?)", provider=self._provider)

    async def _body(self, reply: aiohttp.ClientResponse, url: str | None = None) -> bytes:
        """The reply's body, refused (``BackendError`` naming ``url``, default the completions
        URL) past ``MAX_REPLY_BYTES``: at once when its ``Content-Length`` says so, else when
        that many bytes have come."""
        if (reply.content_length or 0) > MAX_REPLY_BYTES:
            raise self._oversize("a reply", MAX_REPLY_BYTES, url)
        raw = await _read_upto(reply.content, MAX_REPLY_BYTES + 1)
        if len(raw) > MAX_REPLY_BYTES:
            raise self._oversize("a reply", MAX_REPLY_BYTES, url)
        return raw

    async def post(self, body: dict[str, Any]) -> Any:
        """``POST /chat/completions`` of ``body``: the decoded JSON reply (text when the reply
        is not JSON). Raises ``BackendError`` for a reply over ``MAX_REPLY_BYTES``."""
        try:
            async with self._reply(body) as reply:
                raw = await self._body(reply)
                if not reply.content_type.endswith("json"):
                    return raw.decode(reply.charset or "utf-8", errors="replace")
                return json.loads(raw)
        except aiohttp.ClientError as exc:
            raise self.classify(exc) from exc

    async def stream(self, body: dict[str, Any]) -> AsyncGenerator[Any, None]:
        """``POST /chat/completions`` of a streaming ``body``: each SSE event's decoded JSON
        (a chunk), up to ``data: [DONE]``. Closing the generator closes the reply. Raises
        ``BackendError`` for a stream over ``MAX_STREAM_BYTES`` or a line over
        ``MAX_EVENT_BYTES``."""
        try:
            async with self._reply(body) as reply:
                async for data in _sse_data(reply.content, self._oversize):
                    chunk = json.loads(data)
                    if isinstance(chunk, dict) and chunk.get("error"):
                        raise self._stream_error(chunk["error"])
                    yield chunk
        except aiohttp.ClientError as exc:
            raise self.classify(exc) from exc

    async def models(self) -> Any:
        """``GET /models`` (the preflight probe: costs no tokens): the decoded reply."""
        try:
            async with self._client().get(self._models) as reply:
                if not 200 <= reply.status < 300:
                    raise await self._status_failure(reply)
                return await self._body(reply, self._models)
        except aiohttp.ClientError as exc:
            raise self.classify(exc) from exc

    def classify(self, exc: Exception) -> Exception:
        """Any failure of a call as ``TransientError`` or ``BackendError``
        (``retry.classify_transport_error``; classified failures pass as they are)."""
        return classify_transport_error(
            exc, self._provider, redact=self._redact, timeout_s=self._timeout_s,
            endpoint=self.base_url, connection_errors=(aiohttp.ClientError,))

    async def _status_failure(self, reply: aiohttp.ClientResponse) -> Exception:
        """The classified failure of an error answer. The provider's text is found as the SDK
        finds it: the JSON body's ``error`` (or the body itself), its ``message``; else
        ``Error code: <status>`` (with the message, when there is one)."""
        try:
            text = (await _read_upto(reply.content, MAX_ERROR_BYTES)).decode(
                reply.charset or "utf-8", errors="replace").strip()
        except aiohttp.ClientError:
            text = ""
        body: Any = text
        fallback = f"Error code: {reply.status}"
        try:
            body = json.loads(text)
        except ValueError:
            pass
        else:
            error = body.get("error", body) if isinstance(body, dict) else None
            message = error.get("message") if isinstance(error, dict) else None
            if isinstance(message, str) and message:
                fallback += f" - {message}"
        data = body.get("error", body) if isinstance(body, dict) else body
        detail = self._redact(error_message(data, fallback))
        return classify_status(self._provider, reply.status, detail, headers=reply.headers,
                               key_env=self._key_env)

    def _stream_error(self, error: Any) -> TransientError:
        """An error event inside a stream, as the SDK reports it (an ``APIError``, retried)."""
        message = error.get("message") if isinstance(error, dict) else None
        if not isinstance(message, str) or not message:
            message = STREAM_ERROR
        return TransientError(f"API error: {self._redact(message)}")


def env_proxy(url: str) -> tuple[URL | None, BasicAuth | None]:
    """The proxy the environment names for ``url`` and its credentials, as aiohttp's
    ``trust_env`` finds them (``HTTP_PROXY``/``HTTPS_PROXY`` by scheme, none for a host in
    ``NO_PROXY``, credentials from the proxy URL or ``.netrc``); ``(None, None)`` when there is
    none. Raises ValueError, naming the variable and never the credentials, when a proxy
    variable is not a URL or names a proxy aiohttp cannot speak to (one that is not
    ``http://`` with a host: aiohttp would send to it as to an HTTP proxy, or to no host)."""
    target = URL(url)
    variable = f"{target.scheme.upper()}_PROXY"
    advice = (f"set {variable} to an http://host:port proxy, name the host in NO_PROXY, or "
              "send with client.http_client=sdk")
    try:
        proxy, auth = get_env_proxy_for_url(target)
    except LookupError:
        listed = getproxies().get(target.scheme)
        if listed is None or (target.host is not None and proxy_bypass(target.host)):
            return None, None
        # aiohttp drops an https:// proxy (with a log line) and would go direct instead
        proxy, auth = URL(listed), None
    except ValueError as exc:  # a proxy variable that yarl cannot parse
        raise ValueError(f"a proxy variable of the environment (HTTP_PROXY, HTTPS_PROXY, ...) "
                         f"is not a URL ({exc}); {advice}") from None
    if proxy.scheme != "http" or not proxy.host:
        named = (f"a proxy of scheme '{proxy.scheme}'" if proxy.scheme and proxy.host
                 else "a value that is not a proxy URL")
        raise ValueError(f"{variable} names {named} for {target.scheme} URLs; the lean client "
                         f"(aiohttp) sends through http:// proxies only: {advice}")
    return proxy, auth


async def _sse_data(content: aiohttp.StreamReader,
                    oversize: Callable[[str, int], Exception]) -> AsyncGenerator[str, None]:
    """The ``data`` of each server-sent event in ``content`` (lines ending in ``\\n`` or
    ``\\r\\n``; an event's ``data:`` lines joined by newlines; comments and other fields
    skipped), until ``[DONE]``; then up to ``MAX_AFTER_DONE_BYTES`` more are read, for at
    most ``AFTER_DONE_WAIT_S``, so that the connection of a server that ends its body there
    can be reused. ``oversize(what, limit)`` is raised for a stream over ``MAX_STREAM_BYTES``
    or a line over ``MAX_EVENT_BYTES``."""
    pending = bytearray()
    lines: list[str] = []
    received = 0
    async for piece in content.iter_any():
        received += len(piece)
        if received > MAX_STREAM_BYTES:
            raise oversize("a stream", MAX_STREAM_BYTES)
        pending += piece
        start = 0
        search = len(pending) - len(piece)  # what came before holds no line end
        while (end := pending.find(b"\n", search)) >= 0:
            line = bytes(pending[start:end]).rstrip(b"\r").decode("utf-8", errors="replace")
            start = search = end + 1
            if line:
                if (value := _data_field(line)) is not None:
                    lines.append(value)
                continue
            if not lines:
                continue
            data, lines = "\n".join(lines), []
            if data.startswith("[DONE]"):
                await _drain(content, MAX_AFTER_DONE_BYTES, AFTER_DONE_WAIT_S)
                return
            yield data
        del pending[:start]
        if len(pending) > MAX_EVENT_BYTES:
            raise oversize("a line", MAX_EVENT_BYTES)
    tail = _data_field(bytes(pending).rstrip(b"\r").decode("utf-8", errors="replace"))
    if tail is not None:
        lines.append(tail)
    if lines and not "\n".join(lines).startswith("[DONE]"):
        yield "\n".join(lines)


def _data_field(line: str) -> str | None:
    """The value of an SSE ``data:`` line (one leading space dropped); None for another line."""
    if not line.startswith("data:"):
        return None
    value = line[5:]
    return value[1:] if value.startswith(" ") else value


async def _read_upto(content: aiohttp.StreamReader, limit: int) -> bytes:
    """``content`` up to its end or ``limit`` bytes, whichever comes first (the rest, if any,
    is left unread)."""
    pieces: list[bytes] = []
    size = 0
    while size < limit:
        piece = await content.read(limit - size)
        if not piece:
            break
        pieces.append(piece)
        size += len(piece)
    return b"".join(pieces)


def _size(limit: int) -> str:
    """``limit`` bytes in words: ``32 MiB``, ``64 KiB``."""
    mib, kib = divmod(limit, 1024 * 1024)
    return f"{mib:,} MiB" if mib and not kib else f"{limit // 1024:,} KiB"


async def _drain(content: aiohttp.StreamReader, limit: int, wait_s: float) -> None:
    """Read and drop what is left of ``content``, at most ``limit`` bytes for at most
    ``wait_s`` seconds: a body read to its end lets its connection be reused; one with more
    left, or not ended in time, is closed when the reply is."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(wait_s):
            await _read_upto(content, limit)
