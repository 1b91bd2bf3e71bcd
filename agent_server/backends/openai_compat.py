"""OpenAI-compatible chat-completions backend (OpenAI, OpenRouter, vLLM server, llama.cpp server).

One backend, two ways of sending (``client.http_client``, resolved by
``moria.backends.http_client_for``): the request body (``_request``: messages, sampling, the
choice constraints guided_choice/grammar, the reasoning options), the retry policy and the
parsing of replies and stream chunks (``_parse``, ``_streamed``) are this class's, whichever
sender carries them:

- ``openai_sdk.SDKSender`` (``sdk``; ``auto`` for the hosted ``openai`` and ``openrouter``):
  the official ``openai`` SDK (``AsyncOpenAI``) with the SDK's own retries off, so the shared
  tenacity policy (``retry.py``) governs, and the SDK's aiohttp transport
  (``DefaultAioHttpClient``, the ``openai[aiohttp]`` extra), which the SDK recommends for
  concurrency: with 50 episodes in flight it cut the Policy server's CPU from 24.5 to 16.9 s in
  one pair of workload-A runs against the default transport, whose connection pool checks every
  idle connection on each request.
- ``lean_http.LeanSender`` (``lean``; ``auto`` for ``vllm`` and ``llamacpp`` servers): one
  aiohttp session, no SDK in the request path (less CPU per call:
  ``benchmarks/results/model_client_transports.json``), with the same
  retries, timeouts, error classification, key redaction, usage and streaming
  (``lean_http``'s docstring).

``create_as_sent`` (BALROG's ``OpenAIWrapper`` under ``agent.protocol=balrog``) always goes
through the SDK, whichever sender ``complete`` uses: it needs the SDK to build the body from
another client's keyword arguments and to return the SDK's response object; a lean backend
makes its SDK client on the first such call.

``client.timeout`` bounds each attempt: the whole response when not streaming, the wait for
each chunk when streaming (``client.stream``).

Roles: the chat arrives unmerged; the chat-completions API takes any order of roles
(``strict_alternation`` False), so same-role neighbours are merged (``merge_consecutive_roles``)
only when ``client.alternate_roles`` asks, for served models whose chat template needs strictly
alternating turns.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, Any, Protocol

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
    choices_gbnf,
    merge_consecutive_roles,
)
from agent_server.backends.lean_http import LeanSender
from agent_server.backends.retry import (
    Redactor,
    complete_with_retries,
    run_probe,
)
from moria.backends import HttpClient, http_client_for
from moria.config import ClientConfig

if TYPE_CHECKING:
    from agent_server.backends.openai_sdk import SDKSender

log = logging.getLogger(__name__)

#: How each server constrains output to a list of choices (request body additions).
CHOICE_CONSTRAINTS: dict[str, Callable[[list[str]], dict[str, Any]]] = {
    "vllm": lambda choices: {"guided_choice": list(choices)},
    "llamacpp": lambda choices: {"grammar": choices_gbnf(choices)},
}

#: Model used when ``client.model_id`` is None (servers that serve one model ignore the name).
DEFAULT_MODEL: dict[str, str] = {"llamacpp": "local-model"}


def _openai_reasoning(client: ClientConfig) -> dict[str, Any]:
    """OpenAI reasoning models: ``reasoning_effort``; they count output in
    ``max_completion_tokens`` (the request's ``max_tokens`` is moved there)."""
    if client.reasoning_effort is None:
        return {}
    return {"reasoning_effort": client.reasoning_effort}


def _openrouter_reasoning(client: ClientConfig) -> dict[str, Any]:
    """OpenRouter's unified ``reasoning`` object: a token budget, else an effort level."""
    if client.thinking_budget is not None:
        return {"reasoning": {"max_tokens": client.thinking_budget}}
    if client.reasoning_effort is not None:
        effort = "low" if client.reasoning_effort == "minimal" else client.reasoning_effort
        return {"reasoning": {"effort": effort}}
    return {}


def _vllm_reasoning(client: ClientConfig) -> dict[str, Any]:
    """vLLM/llama.cpp servers: reasoning output comes back in ``reasoning_content`` when the
    server runs a reasoning parser; an effort is forwarded for models whose template reads it."""
    if client.reasoning_effort is None:
        return {}
    return {"reasoning_effort": client.reasoning_effort}


#: How each provider asks a reasoning model to think (request body additions).
REASONING_PARAMS: dict[str, Callable[[ClientConfig], dict[str, Any]]] = {
    "openai": _openai_reasoning,
    "openrouter": _openrouter_reasoning,
    "vllm": _vllm_reasoning,
    "llamacpp": _vllm_reasoning,
}

#: Provider finish reasons -> normalised ``Completion.stop_reason`` (base.STOP_*).
FINISH_REASONS: dict[str, str] = {
    "stop": STOP_END,
    "eos": STOP_END,
    "length": STOP_LENGTH,
    "max_tokens": STOP_LENGTH,
    "content_filter": f"{STOP_BLOCKED}:content_filter",
}


def normalise_finish(reason: str | None) -> str:
    """An OpenAI-style ``finish_reason`` as a ``Completion.stop_reason`` ("" when absent)."""
    if not reason:
        return ""
    return FINISH_REASONS.get(reason, f"{STOP_OTHER}:{reason}")


def to_openai_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Convert chat messages to the wire format; images become ``image_url`` PNG data URLs.

    A message without images has a string ``content``; one with images has a list of parts
    (the text part first, when non-empty, then one ``image_url`` part per image).
    """
    out: list[dict[str, Any]] = []
    for msg in messages:
        if not msg.images:
            out.append({"role": msg.role, "content": msg.content})
            continue
        parts: list[dict[str, Any]] = []
        if msg.content:
            parts.append({"type": "text", "text": msg.content})
        for png in msg.images:
            url = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
            parts.append({"type": "image_url", "image_url": {"url": url}})
        out.append({"role": msg.role, "content": parts})
    return out


def _field(obj: Any, name: str) -> Any:
    """Field ``name`` of a reply part, whether it is decoded JSON (a dict: the non-streaming
    reply) or an SDK model (a streamed chunk, whose undeclared fields sit in ``model_extra``);
    None when absent or when ``obj`` is neither."""
    if isinstance(obj, dict):
        return obj.get(name)
    value = getattr(obj, name, None)
    if value is None:
        extra = getattr(obj, "model_extra", None)
        value = extra.get(name) if isinstance(extra, dict) else None
    return value


def _extra_str(obj: Any, *names: str) -> str:
    """The first non-empty string among ``obj``'s (possibly undeclared) fields ``names``."""
    for name in names:
        value = _field(obj, name)
        if isinstance(value, str) and value:
            return value
    return ""


def _count(obj: Any, name: str) -> int:
    """A token count field of ``obj`` (0 when absent or not a number)."""
    value = _field(obj, name)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def usage_from(usage: Any) -> TokenUsage:
    """OpenAI-style usage (decoded JSON, an SDK ``CompletionUsage`` or None) -> ``TokenUsage``
    (missing details count as 0)."""
    if usage is None:
        return TokenUsage()
    return TokenUsage(
        input_tokens=_count(usage, "prompt_tokens"),
        output_tokens=_count(usage, "completion_tokens"),
        cached_input_tokens=_count(_field(usage, "prompt_tokens_details"), "cached_tokens"),
        reasoning_tokens=_count(_field(usage, "completion_tokens_details"), "reasoning_tokens"),
    )


class Sender(Protocol):
    """How a chat-completions request travels (``SDKSender`` or ``lean_http.LeanSender``)."""

    kind: str
    base_url: str

    async def post(self, body: dict[str, Any]) -> Any:
        """POST /chat/completions: the decoded JSON reply (text when it is not JSON)."""

    def stream(self, body: dict[str, Any]) -> AsyncGenerator[Any, None]:
        """POST /chat/completions, streaming: the decoded chunks (dicts)."""

    async def models(self) -> Any:
        """GET /models (the preflight probe)."""

    def classify(self, exc: Exception) -> Exception:
        """A failure of a call as ``TransientError`` or ``BackendError``."""

    async def aclose(self) -> None:
        """Release the connections."""


class OpenAICompatBackend(Backend):
    """One OpenAI-compatible endpoint, reached through one sender (``transport``: ``sdk`` or
    ``lean``, from ``client.http_client``); safe to share."""

    def __init__(
        self,
        client: ClientConfig,
        *,
        api_key: str,
        key_env: str | None = None,
        base_url: str | None = None,
    ):
        """``api_key``: the key (a placeholder such as "EMPTY" for keyless servers);
        ``key_env``: the env var it came from (named in error text); ``base_url``: None means
        the SDK default (``client.base_url`` when not given). The sender is
        ``http_client_for(client)``'s. Raises ``BackendError`` when no model can be chosen,
        and when ``client.http_client`` cannot serve (``lean`` without a base URL)."""
        self.name = client.client_name
        self._client_cfg = client
        self._key_env = key_env
        self._api_key = api_key
        self._redact = Redactor(api_key)
        model = client.model_id or DEFAULT_MODEL.get(client.client_name)
        if not model:
            raise BackendError(f"{self.name}: client.model_id is required", provider=self.name)
        self.model = model
        self._base_url = base_url or client.base_url
        try:
            self.transport: HttpClient = http_client_for(
                client.client_name, client.http_client, client.base_url or base_url)
        except ValueError as exc:
            raise BackendError(str(exc), provider=self.name) from None
        self._sdk_sender: SDKSender | None = None
        self._sender: Sender
        if self.transport == "lean":
            if not self._base_url:
                raise BackendError(f"{self.name}: client.http_client='lean' needs "
                                   "client.base_url", provider=self.name)
            self._sender = LeanSender(
                api_key=api_key, base_url=self._base_url, timeout=client.timeout,
                provider=self.name, redact=self._redact, key_env=key_env)
        else:
            self._sender = self._sdk_sender = self._make_sdk_sender()

    def _make_sdk_sender(self) -> SDKSender:
        """The SDK's sender; ``openai_sdk`` (which imports the SDK, about half a second of
        CPU) is imported here, so a backend that sends lean never loads the SDK."""
        from agent_server.backends.openai_sdk import SDKSender

        return SDKSender(api_key=self._api_key, base_url=self._base_url,
                         timeout=self._client_cfg.timeout, provider=self.name,
                         redact=self._redact, key_env=self._key_env,
                         max_concurrency=self._client_cfg.max_concurrency)

    @property
    def base_url(self) -> str:
        """The endpoint the calls go to (ends with a slash)."""
        return self._sender.base_url

    @property
    def api_key(self) -> str:
        """The key sent as the bearer token ("EMPTY" for keyless servers)."""
        return self._api_key

    async def aclose(self) -> None:
        """Close the sender's connections (and the SDK client ``create_as_sent`` made)."""
        await self._sender.aclose()
        if self._sdk_sender is not None and self._sdk_sender is not self._sender:
            await self._sdk_sender.aclose()

    async def probe(self) -> str | None:
        """``GET /models`` (costs no tokens); see ``Backend.probe``."""
        return await run_probe(self._sender.models, self._classify, self.name,
                               self.base_url, self._client_cfg.timeout)

    async def complete(self, messages: list[ChatMessage], params: GenerateParams) -> Completion:
        """One chat completion (non-streaming or SSE streaming per ``client.stream``).

        Returns text, reasoning (``reasoning_content``/``reasoning`` fields), usage, the
        normalised stop reason (``"empty"`` when the reply had no choice, ``"blocked:..."`` for a
        content filter), latency and attempts. An empty reply is returned as ``""``, not raised.
        Raises ``BackendError``: fail-fast on 4xx (401/403: "bad API key for <provider>"),
        ``retryable=True`` once retries are spent.
        """
        request = self._request(messages, params)
        return await complete_with_retries(
            lambda: self._attempt(request), self._client_cfg, self.name, classify=self._classify
        )

    def can_create_as_sent(self) -> bool:
        """True: ``create_as_sent`` goes through the OpenAI SDK with either sender."""
        return True

    async def create_as_sent(self, kwargs: dict[str, Any]) -> tuple[Any, Completion]:
        """One ``chat.completions.create(**kwargs)`` through the SDK, with the keyword arguments
        as another client built them (BALROG's ``OpenAIWrapper``, ``agent.protocol=balrog``):
        the SDK builds the body from them as it does for that client. Retried like
        ``complete`` (429/5xx, timeouts). Returns the SDK's response object and its
        ``Completion``. Raises ``BackendError`` as ``complete`` does. Always through the SDK
        (with ``transport`` lean, an SDK client is made on the first call)."""
        if self._sdk_sender is None:
            self._sdk_sender = self._make_sdk_sender()
        sdk = self._sdk_sender
        sent: list[Any] = []

        async def attempt() -> Completion:
            async with asyncio.timeout(self._client_cfg.timeout):
                response = await sdk.sdk.chat.completions.create(**kwargs)
            sent.append(response)
            return self._parse(response.model_dump())

        completion = await complete_with_retries(attempt, self._client_cfg, self.name,
                                                 classify=sdk.classify)
        return sent[-1], completion

    def _request(self, messages: list[ChatMessage], params: GenerateParams) -> dict[str, Any]:
        """The chat-completions request body (extra provider keys merged in, as the SDK's
        ``extra_body`` would; same-role messages merged when ``client.alternate_roles``)."""
        if self._client_cfg.alternate_roles:
            messages = merge_consecutive_roles(messages)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(messages),
            "max_tokens": params.max_tokens,
        }
        if params.temperature is not None:
            body["temperature"] = params.temperature
        reasoning = REASONING_PARAMS.get(self.name, lambda _c: {})(self._client_cfg)
        if reasoning and self.name == "openai":
            body["max_completion_tokens"] = body.pop("max_tokens")
        body.update(reasoning)
        body.update(params.extra)
        if params.choices:
            constrain = CHOICE_CONSTRAINTS.get(self.name)
            if constrain is not None:
                body.update(constrain(params.choices))
            else:
                log.debug("%s: no constrained decoding; choices ignored", self.name)
        if self._client_cfg.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    async def _attempt(self, request: dict[str, Any]) -> Completion:
        if request.get("stream"):
            return await self._streamed(request)
        async with asyncio.timeout(self._client_cfg.timeout):
            response = await self._sender.post(request)
        return self._parse(response)

    async def _streamed(self, request: dict[str, Any]) -> Completion:
        """A streamed reply's chunks (decoded JSON, from either sender) -> ``Completion``:
        the deltas of choice 0 accumulated, the last usage and finish reason kept."""
        text: list[str] = []
        reasoning: list[str] = []
        usage = TokenUsage()
        finish = ""
        saw_choice = False
        async with contextlib.aclosing(self._sender.stream(request)) as chunks:
            async for chunk in chunks:
                chunk_usage = _field(chunk, "usage")
                if chunk_usage is not None:
                    usage = usage_from(chunk_usage)
                for choice in _field(chunk, "choices") or []:
                    if (_field(choice, "index") or 0) != 0:
                        continue
                    saw_choice = True
                    delta = _field(choice, "delta")
                    if delta is not None:
                        content = _field(delta, "content")
                        text.append(content if isinstance(content, str) else "")
                        reasoning.append(_extra_str(delta, "reasoning_content", "reasoning"))
                    reason = _field(choice, "finish_reason")
                    if isinstance(reason, str) and reason:
                        finish = reason
        return Completion(
            text="".join(text),
            reasoning="".join(reasoning),
            usage=usage,
            stop_reason=normalise_finish(finish) if saw_choice else STOP_EMPTY,
        )

    def _parse(self, response: Any) -> Completion:
        """A non-streaming reply (decoded JSON) -> ``Completion``. Raises ``BackendError`` when
        the body is not a JSON object (a server that is not chat-completions compatible)."""
        if not isinstance(response, dict):
            raise BackendError(
                f"{self.name}: {self.base_url}chat/completions replied with a "
                f"{type(response).__name__}, not a JSON object", provider=self.name)
        usage = usage_from(response.get("usage"))
        choices = response.get("choices")
        if not isinstance(choices, list) or not choices:
            log.warning("%s: the reply had no choices", self.name)
            return Completion(text="", usage=usage, stop_reason=STOP_EMPTY)
        choice = choices[0]
        message = _field(choice, "message")
        content = _field(message, "content")
        finish = _field(choice, "finish_reason")
        return Completion(
            text=content if isinstance(content, str) else "",
            reasoning=_extra_str(message, "reasoning_content", "reasoning"),
            usage=usage,
            stop_reason=normalise_finish(finish if isinstance(finish, str) else None),
        )

    def _classify(self, exc: Exception) -> Exception:
        """Map a failure of the sender (SDK or lean) to ``TransientError`` or ``BackendError``."""
        return self._sender.classify(exc)
