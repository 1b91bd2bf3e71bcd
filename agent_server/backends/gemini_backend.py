"""Google Gemini backend (the Gemini API's ``generateContent``) through the ``google-genai`` SDK.

Requests go through ``genai.Client(...).aio.models.generate_content`` (or
``generate_content_stream`` when ``client.stream``), to ``client.base_url`` when set. The SDK's
own retries are off (``HttpRetryOptions(attempts=1)``) and so is its automatic stream
continuation, so the shared tenacity policy (``retry.py``) alone decides what is retried.
``client.timeout`` bounds each attempt: the whole response when not streaming, the wait for each
chunk when streaming (``asyncio.timeout`` plus the SDK's per-request timeout).

Mapping to the wire format:

- system messages -> ``systemInstruction`` (joined with a blank line, wherever they appear);
  user -> role ``user``, assistant -> role ``model``; runs of the same role are always merged
  (the API wants alternating turns: ``GeminiBackend.strict_alternation``); each PNG image -> an
  ``inlineData`` part after the text part.
- ``GenerateParams``: ``temperature`` (omitted when None), ``max_tokens`` ->
  ``maxOutputTokens`` (which on thinking models also bounds the thinking tokens); from
  ``extra``: ``seed``, ``top_p``, ``top_k``, ``stop_sequences`` (or ``stop``),
  ``presence_penalty``, ``frequency_penalty``; other keys are ignored (debug log). ``choices``
  is not used (no constrained decoding here).
- Thinking: ``client.thinking_budget`` tokens, else ``client.reasoning_effort`` mapped by
  ``EFFORT_BUDGET`` -> ``thinkingConfig {thinkingBudget, includeThoughts}``; neither set: no
  thinking config (the model's default).
- Answer: parts marked ``thought`` -> ``Completion.reasoning``, other text parts ->
  ``Completion.text``. Usage: ``promptTokenCount`` -> input, ``candidatesTokenCount +
  thoughtsTokenCount`` -> output (so output includes the thinking, as OpenAI's and Anthropic's
  counts do), ``cachedContentTokenCount`` -> cached input, ``thoughtsTokenCount`` -> reasoning.
- Stop reason: ``STOP`` -> ``"stop"``, ``MAX_TOKENS`` -> ``"length"``, a safety-type finish
  (``BLOCKED_FINISH``) -> ``"blocked:<reason>"`` with empty text, a prompt block
  (``promptFeedback.blockReason``) -> ``"blocked:<reason>"``, no candidate at all ->
  ``"empty"``, anything else -> ``"other:<reason>"``.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import math
import re
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpx
import httpx2
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from agent_server.backends.base import (
    STOP_BLOCKED,
    STOP_EMPTY,
    STOP_END,
    STOP_LENGTH,
    STOP_OTHER,
    Backend,
    BackendError,
    ChatMessage,
    Completion,
    GenerateParams,
    TokenUsage,
    merge_consecutive_roles,
)
from agent_server.backends.retry import (
    KEY_PATTERN,
    Redactor,
    TransientError,
    classify_status,
    complete_with_retries,
    parse_retry_after,
    run_probe,
)
from moria.config import ClientConfig

log = logging.getLogger(__name__)

#: ``client.reasoning_effort`` -> thinking budget (tokens) when ``thinking_budget`` is not set.
#: "minimal" is 512, the smallest budget every Gemini 2.5 model accepts (Pro cannot think less
#: than 128, Flash-Lite less than 512); set ``thinking_budget: 0`` to turn thinking off on
#: models that allow it.
EFFORT_BUDGET: dict[str, int] = {"minimal": 512, "low": 1024, "medium": 8192, "high": 24576}

#: Candidate finish reasons that mean a filter withheld the answer (-> ``"blocked:<reason>"``).
BLOCKED_FINISH = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "MODEL_ARMOR",
    }
)

#: ``GenerateParams.extra`` keys passed to ``GenerateContentConfig`` (extra key -> config field).
EXTRA_FIELDS: dict[str, str] = {
    "seed": "seed",
    "top_p": "top_p",
    "top_k": "top_k",
    "stop_sequences": "stop_sequences",
    "stop": "stop_sequences",
    "presence_penalty": "presence_penalty",
    "frequency_penalty": "frequency_penalty",
}

_API_VERSION = "v1beta"
# Google API keys ("AIza" + 35 characters) and OpenAI-style secrets, wherever they appear.
_KEY_PATTERN = re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}|" + KEY_PATTERN.pattern)
_KEY_QUERY = re.compile(r"([?&]key=)[^&\s'\"]+")
#: What ``Redactor`` hides after the key itself: ``key=`` URL parameters, then key shapes.
_REDACT_RULES = ((_KEY_QUERY, r"\1***"), (_KEY_PATTERN, "***"))
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def _optional_exceptions(module: str, *names: str) -> tuple[type[BaseException], ...]:
    """Exception classes of an optional transport package (empty when it is not installed)."""
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return ()
    return tuple(getattr(mod, name) for name in names if hasattr(mod, name))


_TIMEOUT_ERRORS: tuple[type[BaseException], ...] = (
    httpx.TimeoutException,
    httpx2.TimeoutException,
    *_optional_exceptions("aiohttp", "ServerTimeoutError"),
)
#: asyncio's deadline and the transports' own timeouts.
_ANY_TIMEOUT: tuple[type[BaseException], ...] = (TimeoutError, *_TIMEOUT_ERRORS)
_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    httpx.TransportError,
    httpx2.TransportError,
    *_optional_exceptions("aiohttp", "ClientConnectionError", "ClientPayloadError"),
)


def thinking_budget_for(client: ClientConfig) -> int | None:
    """Thinking tokens for ``client``: ``thinking_budget`` if set, else the ``EFFORT_BUDGET`` of
    ``reasoning_effort``, else None (no thinking config sent)."""
    if client.thinking_budget is not None:
        return client.thinking_budget
    if client.reasoning_effort is not None:
        return EFFORT_BUDGET[client.reasoning_effort]
    return None


def to_gemini_contents(
    messages: list[ChatMessage],
) -> tuple[list[types.Content], str | None]:
    """``(contents, system_instruction)`` for ``messages``.

    System messages are joined (blank line) into the system instruction (None when there are
    none). The rest become ``Content`` turns with roles ``user``/``model``, consecutive
    same-role turns merged; each turn has a text part (when its text is non-empty) followed by
    one ``inline_data`` part (``image/png``) per image. Turns with neither are dropped.
    """
    system = [m.content for m in messages if m.role == "system" and m.content]
    turns = merge_consecutive_roles([m for m in messages if m.role != "system"])
    contents: list[types.Content] = []
    for msg in turns:
        parts: list[types.Part] = []
        if msg.content:
            parts.append(types.Part(text=msg.content))
        for png in msg.images:
            parts.append(types.Part(inline_data=types.Blob(mime_type="image/png", data=png)))
        if parts:
            role = "model" if msg.role == "assistant" else "user"
            contents.append(types.Content(role=role, parts=parts))
    return contents, ("\n\n".join(system) if system else None)


def usage_from(meta: Any) -> TokenUsage:
    """``usageMetadata`` (or None) -> ``TokenUsage``; output counts include thought tokens."""
    if meta is None:
        return TokenUsage()
    thoughts = int(getattr(meta, "thoughts_token_count", 0) or 0)
    return TokenUsage(
        input_tokens=int(getattr(meta, "prompt_token_count", 0) or 0),
        output_tokens=int(getattr(meta, "candidates_token_count", 0) or 0) + thoughts,
        cached_input_tokens=int(getattr(meta, "cached_content_token_count", 0) or 0),
        reasoning_tokens=thoughts,
    )


def _enum_name(value: Any) -> str:
    """The wire name of an SDK enum (or a raw string the SDK did not know)."""
    return str(getattr(value, "value", value))


class GeminiBackend(Backend):
    """One ``genai.Client`` (Gemini Developer API, API key) for one model; safe to share."""

    strict_alternation = True  # generateContent wants alternating user/model turns

    def __init__(self, client: ClientConfig, *, api_key: str, key_env: str | None = None):
        """``api_key``: the Gemini API key (sent as the ``x-goog-api-key`` header, never shown);
        ``key_env``: the environment variable it came from (named in error text).
        ``client.base_url`` None means the SDK default endpoint. Raises ``BackendError`` when
        ``client.model_id`` is not set."""
        self.name = client.client_name
        self._client_cfg = client
        self._key_env = key_env
        self._redact = Redactor(api_key, _REDACT_RULES)
        if not client.model_id:
            raise BackendError(f"{self.name}: client.model_id is required", provider=self.name)
        self.model = client.model_id
        http_options = types.HttpOptions(
            base_url=client.base_url or None,
            api_version=_API_VERSION,
            timeout=max(1, math.ceil(client.timeout * 1000)),
            retry_options=types.HttpRetryOptions(attempts=1),
        )
        self._sdk = genai.Client(api_key=api_key, vertexai=False, http_options=http_options)
        self._thinking = thinking_budget_for(client)

    async def aclose(self) -> None:
        """Close the SDK's HTTP connection pools."""
        await self._sdk.aio.aclose()
        self._sdk.close()

    async def probe(self) -> str | None:
        """``GET models/<model>`` (costs no tokens); see ``Backend.probe``."""
        endpoint = self._client_cfg.base_url or "https://generativelanguage.googleapis.com"
        return await run_probe(lambda: self._sdk.aio.models.get(model=self.model),
                               self._classify, self.name, endpoint, self._client_cfg.timeout)

    async def complete(self, messages: list[ChatMessage], params: GenerateParams) -> Completion:
        """One ``generateContent`` call (SSE ``streamGenerateContent`` when ``client.stream``).

        Returns text, reasoning (thought parts), usage, the normalised stop reason (see the
        module docstring: a blocked or empty answer is returned with ``text == ""``, never
        raised), latency and attempts. Raises ``BackendError``: fail-fast on 4xx (401/403 and
        400 ``API_KEY_INVALID``: "bad API key for gemini"), ``retryable=True`` once the retries
        for 408/429/5xx, timeouts and connection errors are spent.
        """
        contents, system = to_gemini_contents(messages)
        config = self._config(params, system)
        return await complete_with_retries(
            lambda: self._attempt(contents, config),
            self._client_cfg,
            self.name,
            classify=self._classify,
            timeouts=_ANY_TIMEOUT,
        )

    def _config(self, params: GenerateParams, system: str | None) -> types.GenerateContentConfig:
        fields: dict[str, Any] = {
            "max_output_tokens": params.max_tokens,
            "automatic_continuation": False,
        }
        if system is not None:
            fields["system_instruction"] = system
        if params.temperature is not None:
            fields["temperature"] = params.temperature
        for key, value in params.extra.items():
            target = EXTRA_FIELDS.get(key)
            if target is None:
                log.debug("%s: generation parameter %r is not supported; ignored", self.name, key)
                continue
            if target == "stop_sequences" and isinstance(value, str):
                value = [value]
            fields[target] = value
        if params.choices:
            log.debug("%s: no constrained decoding; choices ignored", self.name)
        if self._thinking is not None:
            fields["thinking_config"] = types.ThinkingConfig(
                thinking_budget=self._thinking, include_thoughts=self._thinking > 0
            )
        return types.GenerateContentConfig(**fields)

    async def _attempt(
        self, contents: list[types.Content], config: types.GenerateContentConfig
    ) -> Completion:
        if self._client_cfg.stream:
            return self._parse(await self._streamed(contents, config))
        async with asyncio.timeout(self._client_cfg.timeout):
            response = await self._sdk.aio.models.generate_content(
                model=self.model, contents=contents, config=config
            )
        return self._parse([response])

    async def _streamed(
        self, contents: list[types.Content], config: types.GenerateContentConfig
    ) -> list[types.GenerateContentResponse]:
        """All chunks of one streamed answer; each wait (the request, every chunk) is bounded
        by ``client.timeout``."""
        timeout = self._client_cfg.timeout
        async with asyncio.timeout(timeout):
            stream: AsyncIterator[
                types.GenerateContentResponse
            ] = await self._sdk.aio.models.generate_content_stream(
                model=self.model, contents=contents, config=config
            )
        chunks: list[types.GenerateContentResponse] = []
        try:
            while True:
                try:
                    async with asyncio.timeout(timeout):
                        chunk = await anext(stream)
                except StopAsyncIteration:
                    break
                chunks.append(chunk)
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        return chunks

    def _parse(self, responses: Iterable[types.GenerateContentResponse]) -> Completion:
        """One ``Completion`` from a response (or all chunks of a streamed one, in order)."""
        text: list[str] = []
        reasoning: list[str] = []
        meta: Any = None
        finish: str | None = None
        block: str | None = None
        saw_candidate = False
        for response in responses:
            if response.usage_metadata is not None:
                meta = response.usage_metadata  # running totals: the last one is complete
            feedback = response.prompt_feedback
            if feedback is not None and feedback.block_reason is not None:
                block = _enum_name(feedback.block_reason)
            for candidate in response.candidates or []:
                if (candidate.index or 0) != 0:
                    continue
                saw_candidate = True
                if candidate.finish_reason is not None:
                    finish = _enum_name(candidate.finish_reason)
                content = candidate.content
                for part in (content.parts if content is not None else None) or []:
                    if part.text is not None:
                        (reasoning if part.thought else text).append(part.text)
        usage = usage_from(meta)
        if block is not None:
            return self._withheld(f"{STOP_BLOCKED}:{block}", usage)
        if not saw_candidate:
            return self._withheld(STOP_EMPTY, usage)
        if finish in BLOCKED_FINISH:
            return self._withheld(f"{STOP_BLOCKED}:{finish}", usage)
        if finish == "STOP":
            stop = STOP_END
        elif finish == "MAX_TOKENS":
            stop = STOP_LENGTH
        else:
            stop = f"{STOP_OTHER}:{finish or 'FINISH_REASON_UNSPECIFIED'}"
        return Completion(
            text="".join(text), reasoning="".join(reasoning), usage=usage, stop_reason=stop
        )

    def _withheld(self, stop_reason: str, usage: TokenUsage) -> Completion:
        log.warning("%s: model %s returned no answer (%s)", self.name, self.model, stop_reason)
        return Completion(text="", usage=usage, stop_reason=stop_reason)

    def _classify(self, exc: Exception) -> Exception:
        """Map an SDK/transport exception to ``TransientError`` or ``BackendError``."""
        if isinstance(exc, genai_errors.APIError):
            status = int(exc.code) if isinstance(exc.code, int) else 0
            return classify_status(
                self.name,
                status,
                self._redact(str(exc.message or "no message")),
                key_env=self._key_env,
                status_name=exc.status,
                retry_after=_retry_after(exc),
                bad_key=_is_bad_key(exc),  # the API answers a bad key with HTTP 400
            )
        if isinstance(exc, _TIMEOUT_ERRORS):
            return TransientError(f"timed out after {self._client_cfg.timeout:g}s")
        if isinstance(exc, _CONNECTION_ERRORS):
            where = f" ({self._client_cfg.base_url})" if self._client_cfg.base_url else ""
            return TransientError(
                f"connection error{where}: {type(exc).__name__}: {self._redact(str(exc))}"
            )
        if isinstance(exc, genai_errors.UnknownApiResponseError):
            return TransientError(f"malformed response: {self._redact(str(exc))[:200]}")
        return BackendError(
            f"{self.name}: {type(exc).__name__}: {self._redact(str(exc))}", provider=self.name
        )


def _error_details(exc: genai_errors.APIError) -> list[dict[str, Any]]:
    """The ``error.details`` entries of a Google error body (empty when absent)."""
    body = exc.details
    if isinstance(body, dict):
        err = body.get("error", body)
        details = err.get("details") if isinstance(err, dict) else None
        if isinstance(details, list):
            return [d for d in details if isinstance(d, dict)]
    return []


def _is_bad_key(exc: genai_errors.APIError) -> bool:
    """True for the API's answer to an invalid key: HTTP 400 with ``ErrorInfo.reason``
    ``API_KEY_INVALID``."""
    return any(d.get("reason") == "API_KEY_INVALID" for d in _error_details(exc))


def _retry_after(exc: genai_errors.APIError) -> float | None:
    """Seconds the server asked to wait: the ``retry-after`` header, else the
    ``google.rpc.RetryInfo.retryDelay`` detail (``"12s"``, ``"0.5s"``); None when neither."""
    headers = getattr(exc.response, "headers", None)
    try:
        from_header = parse_retry_after(dict(headers.items())) if headers is not None else None
    except (AttributeError, TypeError):
        from_header = None
    if from_header is not None:
        return from_header
    for detail in _error_details(exc):
        if str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            match = _DURATION.match(str(detail.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None
