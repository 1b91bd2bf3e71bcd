"""The official ``openai`` SDK as a sender of ``openai_compat.OpenAICompatBackend``
(``client.http_client=sdk``, the default for the hosted ``openai`` and ``openrouter``).

A module of its own so that importing the backend does not import the SDK: a backend that
sends lean (``lean_http``) never needs it, and the import costs about half a second of CPU in
every Policy server that starts.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from typing import Any

import openai
from openai import AsyncOpenAI, AsyncStream, DefaultAioHttpClient

from agent_server.backends.base import pool_limits
from agent_server.backends.retry import classify_sdk_error, classify_status, error_message


class SDKSender:
    """Sends through the official SDK's own HTTP client (auth, error types); see ``post``."""

    kind = "sdk"

    def __init__(self, *, api_key: str, base_url: str | None, timeout: float, provider: str,
                 redact: Callable[[str], str], key_env: str | None = None,
                 max_concurrency: int) -> None:
        """``base_url``: None means the SDK's default (OpenAI's API); ``max_concurrency``: the
        calls in flight the backend allows (``client.max_concurrency``), which the SDK's
        connection pool holds at least (``pool_limits``)."""
        self.sdk = AsyncOpenAI(
            api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout,
            http_client=DefaultAioHttpClient(
                limits=pool_limits(openai.DEFAULT_CONNECTION_LIMITS, max_concurrency)),
        )
        self.base_url = str(self.sdk.base_url)
        self._timeout_s = timeout
        self._provider = provider
        self._redact = redact
        self._key_env = key_env

    @property
    def api_key(self) -> str:
        """The key sent as the bearer token."""
        return self.sdk.api_key

    async def post(self, body: dict[str, Any]) -> Any:
        """POST /chat/completions with the body as built (``chat.completions.create`` would
        first run the SDK's TypedDict transform over every message, which measured at about
        17 ms per call here and made the agent server CPU-bound under concurrent episodes; the
        body is already in wire format, so it is sent as is). The reply comes back as decoded
        JSON (``cast_to=object``): building the SDK's response models took a quarter of the
        SDK's time per call and the parser reads four fields."""
        return await self.sdk.post("/chat/completions", body=body, cast_to=object)

    async def stream(self, body: dict[str, Any]) -> AsyncGenerator[Any, None]:
        """The streaming POST: the chunks as decoded JSON (``AsyncStream[object]``), as the
        lean client yields them; the SDK's stream is closed when this generator is."""
        chunks = await self.sdk.post("/chat/completions", body=body, cast_to=object,
                                     stream=True, stream_cls=AsyncStream[object])
        try:
            async for chunk in chunks:
                yield chunk
        finally:
            await chunks.close()

    async def models(self) -> Any:
        """``GET /models``."""
        return await self.sdk.models.list()

    def classify(self, exc: Exception) -> Exception:
        """Map an SDK/transport exception to ``TransientError`` or ``BackendError``."""
        if isinstance(exc, openai.APIStatusError):
            detail = self._redact(error_message(exc.body, exc.message))
            return classify_status(
                self._provider, exc.status_code, detail,
                headers=exc.response.headers, key_env=self._key_env,
            )
        return classify_sdk_error(
            exc, openai, self._provider, redact=self._redact, timeout_s=self._timeout_s,
            endpoint=self.base_url,
        )

    async def aclose(self) -> None:
        """Close the SDK's HTTP connection pool."""
        await self.sdk.close()
