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

import aiohttp
from aiohttp.helpers import BasicAuth, get_env_proxy_for_url
from yarl import URL

from agent_server.backends.retry import (
    TransientError,
    classify_status,
    classify_transport_error,
    error_message,
)

#: The most connections the session opens at once (the SDK's own limit).
MAX_CONNECTIONS = 1000
#: What the SDK says for an error event in a stream that carries no message.
STREAM_ERROR = "An error occurred during streaming"


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
        changed or the session was closed)."""
        loop = asyncio.get_running_loop()
        session = self._session
        if session is None or session.closed or self._loop is not loop:
            proxy, proxy_auth = env_proxy(self._completions)
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=MAX_CONNECTIONS),
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

    async def post(self, body: dict[str, Any]) -> Any:
        """``POST /chat/completions`` of ``body``: the decoded JSON reply (text when the reply
        is not JSON)."""
        try:
            async with self._reply(body) as reply:
                raw = await reply.read()
                if not reply.content_type.endswith("json"):
                    return raw.decode(reply.charset or "utf-8", errors="replace")
                return json.loads(raw)
        except aiohttp.ClientError as exc:
            raise self.classify(exc) from exc

    async def stream(self, body: dict[str, Any]) -> AsyncGenerator[Any, None]:
        """``POST /chat/completions`` of a streaming ``body``: each SSE event's decoded JSON
        (a chunk), up to ``data: [DONE]``. Closing the generator closes the reply."""
        try:
            async with self._reply(body) as reply:
                async for data in _sse_data(reply.content):
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
                return await reply.read()
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
            text = (await reply.read()).decode(reply.charset or "utf-8", errors="replace").strip()
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
    none."""
    try:
        return get_env_proxy_for_url(URL(url))
    except LookupError:
        return None, None


async def _sse_data(content: aiohttp.StreamReader) -> AsyncGenerator[str, None]:
    """The ``data`` of each server-sent event in ``content`` (lines ending in ``\\n`` or
    ``\\r\\n``; an event's ``data:`` lines joined by newlines; comments and other fields
    skipped), until ``[DONE]``; the rest of the body is read, so the connection can be
    reused."""
    pending = b""
    lines: list[str] = []
    done = False
    async for piece in content.iter_any():
        if done:
            continue
        pending += piece
        while not done:
            end = pending.find(b"\n")
            if end < 0:
                break
            line = pending[:end].rstrip(b"\r").decode("utf-8", errors="replace")
            pending = pending[end + 1:]
            if line:
                if line.startswith("data:"):
                    value = line[5:]
                    lines.append(value[1:] if value.startswith(" ") else value)
                continue
            if not lines:
                continue
            data, lines = "\n".join(lines), []
            if data.startswith("[DONE]"):
                done = True
            else:
                yield data
    if not done:
        tail = pending.rstrip(b"\r").decode("utf-8", errors="replace")
        if tail.startswith("data:"):
            value = tail[5:]
            lines.append(value[1:] if value.startswith(" ") else value)
        if lines and not "\n".join(lines).startswith("[DONE]"):
            yield "\n".join(lines)
