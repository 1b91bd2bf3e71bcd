"""Anthropic Messages API backend (``POST /v1/messages``) through the official ``anthropic`` SDK.

Uses ``anthropic.AsyncAnthropic`` with the SDK's own retries off (``max_retries=0``), so the
shared tenacity policy (``retry.py``) governs. ``client.timeout`` bounds each attempt: the whole
response when not streaming, the wait for each SSE chunk when streaming (``client.stream``).

Request building (``AnthropicBackend.request``):

- every ``system`` message goes to the top-level ``system`` field (several are joined with a blank
  line, in order); images attached to a system message move to the first user turn;
- the other messages always have same-role runs merged (``merge_consecutive_roles``), because the
  API wants strictly alternating turns (``AnthropicBackend.strict_alternation``; the chat arrives
  unmerged, whatever ``client.alternate_roles`` says); a leading assistant turn (or no turn at
  all) gets the user turn ``LEADING_USER_TURN`` put before it; whitespace-only text is never
  sent (a message left with nothing is dropped before merging) and a final assistant turn (a
  prefill) is right-stripped, as the API rejects trailing whitespace there;
- each PNG in ``ChatMessage.images`` becomes a base64 ``image`` block placed *before* the text
  block of its message (Anthropic's documented best order: image first, then the question);
- ``max_tokens`` is ``params.max_tokens``; with thinking on it is ``budget + params.max_tokens``,
  so the answer keeps its full ``params.max_tokens`` after the thinking and the API's rule
  ``max_tokens > budget_tokens`` always holds;
- ``temperature`` is sent when not None, except with thinking on (the API accepts only 1 there;
  it is then left out and a debug line says so);
- ``params.extra`` keys are sent as top-level fields (``top_p``, ``top_k``, ``stop_sequences``,
  ``metadata``, ``service_tier``, ...); OpenAI's ``stop`` becomes ``stop_sequences``; ``seed``
  is dropped silently (Anthropic has none); OpenAI-only keys in ``OPENAI_ONLY_KEYS`` are dropped
  with a warning; any other key is passed through for the API to judge.

Thinking: ``client.thinking_budget`` tokens, or, when it is None, ``client.reasoning_effort``
mapped by ``EFFORT_BUDGET`` (minimal 1024, low 2048, medium 8192, high 24576), gives
``thinking={"type": "enabled", "budget_tokens": N}``. ``thinking_budget=0`` turns thinking off;
budgets below the API minimum (1024) are raised to it.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from typing import Any

import anthropic
from anthropic import DEFAULT_CONNECTION_LIMITS, AsyncAnthropic, DefaultAsyncHttpxClient

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
    pool_limits,
)
from agent_server.backends.retry import (
    Redactor,
    classify_sdk_error,
    classify_status,
    complete_with_retries,
    error_message,
    run_probe,
)
from moria.config import ClientConfig

log = logging.getLogger(__name__)

#: ``client.reasoning_effort`` -> thinking ``budget_tokens`` (used when thinking_budget is None).
EFFORT_BUDGET: dict[str, int] = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}
#: The smallest ``budget_tokens`` the API accepts.
MIN_THINKING_BUDGET = 1024
#: Text of the user turn put before a conversation that would start with the assistant.
LEADING_USER_TURN = "(start)"
#: ``params.extra`` keys dropped silently (Anthropic has no such parameter).
SILENT_DROP_KEYS = frozenset({"seed"})
#: ``params.extra`` keys of OpenAI's API that Anthropic rejects; dropped with a warning.
OPENAI_ONLY_KEYS = frozenset(
    {
        "frequency_penalty", "presence_penalty", "logit_bias", "logprobs", "top_logprobs", "n",
        "response_format", "reasoning_effort", "max_completion_tokens", "stream_options",
        "parallel_tool_calls", "user",
    }
)
#: Fields the backend itself sets; an ``extra`` key of the same name is ignored.
OWN_FIELDS = frozenset({"model", "messages", "system", "max_tokens", "stream"})

#: What a ``redacted_thinking`` block adds to ``Completion.reasoning`` (its data is encrypted).
REDACTED_THINKING = "[redacted thinking]"

#: ``stop_reason`` -> normalised ``Completion.stop_reason``.
STOP_REASONS: dict[str, str] = {
    "end_turn": STOP_END,
    "stop_sequence": STOP_END,
    "max_tokens": STOP_LENGTH,
    "refusal": f"{STOP_BLOCKED}:refusal",
}

#: ``error.type`` of an in-stream ``event: error`` -> the HTTP status the API uses for it.
ERROR_TYPE_STATUS: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


def thinking_budget(client: ClientConfig) -> int | None:
    """Thinking ``budget_tokens`` for ``client``: ``thinking_budget`` (0 -> None, i.e. off;
    below 1024 -> 1024), else ``EFFORT_BUDGET[reasoning_effort]``, else None."""
    if client.thinking_budget is not None:
        if client.thinking_budget == 0:
            return None
        if client.thinking_budget < MIN_THINKING_BUDGET:
            log.info(
                "anthropic: thinking_budget %d is below the API minimum; using %d",
                client.thinking_budget,
                MIN_THINKING_BUDGET,
            )
        return max(client.thinking_budget, MIN_THINKING_BUDGET)
    if client.reasoning_effort is not None:
        return EFFORT_BUDGET[client.reasoning_effort]
    return None


def _image_block(png: bytes) -> dict[str, Any]:
    return {
        "type": "image",
        "source": {
            "type": "base64",
            "media_type": "image/png",
            "data": base64.b64encode(png).decode("ascii"),
        },
    }


def to_anthropic_messages(
    messages: list[ChatMessage],
) -> tuple[str | None, list[dict[str, Any]]]:
    """Split a chat into ``(system, messages)`` in the Messages API wire format.

    ``system`` is the system messages' text joined by a blank line (None when there is none).
    ``messages`` alternate strictly, start with a user turn and contain no whitespace-only
    text; a message without images has a string ``content``, one with images a block list
    (image blocks first, then the text block when there is text). See the module docstring.
    """
    system_parts = [m.content for m in messages if m.role == "system" and m.content.strip()]
    system_images = [png for m in messages if m.role == "system" for png in m.images]
    turns = [
        ChatMessage(m.role, m.content, list(m.images))
        for m in messages
        if m.role != "system" and (m.content.strip() or m.images)
    ]
    turns = merge_consecutive_roles(turns)
    if not turns or turns[0].role != "user":
        turns.insert(0, ChatMessage("user", LEADING_USER_TURN))
    if system_images:
        turns[0].images[:0] = system_images
    if turns[-1].role == "assistant":
        turns[-1].content = turns[-1].content.rstrip()
    out: list[dict[str, Any]] = []
    for msg in turns:
        if not msg.images:
            out.append({"role": msg.role, "content": msg.content})
            continue
        blocks = [_image_block(png) for png in msg.images]
        if msg.content.strip():
            blocks.append({"type": "text", "text": msg.content})
        out.append({"role": msg.role, "content": blocks})
    system = "\n\n".join(system_parts) if system_parts else None
    return system, out


def _count(value: Any) -> int:
    return int(value or 0)


def usage_from(usage: Any) -> TokenUsage:
    """Anthropic ``Usage`` (or None) -> ``TokenUsage``.

    ``input_tokens`` is the whole prompt: ``input_tokens + cache_creation_input_tokens +
    cache_read_input_tokens`` (Anthropic counts the three apart; their sum is comparable with
    OpenAI's ``prompt_tokens``). ``cached_input_tokens`` is ``cache_read_input_tokens``.
    ``reasoning_tokens`` is ``output_tokens_details.thinking_tokens`` when the API reports it,
    else 0 (never estimated from the thinking text).
    """
    if usage is None:
        return TokenUsage()
    details = getattr(usage, "output_tokens_details", None)
    return TokenUsage(
        input_tokens=_count(getattr(usage, "input_tokens", 0))
        + _count(getattr(usage, "cache_creation_input_tokens", 0))
        + _count(getattr(usage, "cache_read_input_tokens", 0)),
        output_tokens=_count(getattr(usage, "output_tokens", 0)),
        cached_input_tokens=_count(getattr(usage, "cache_read_input_tokens", 0)),
        reasoning_tokens=_count(getattr(details, "thinking_tokens", 0)),
    )


def normalise_stop(stop_reason: str | None, n_blocks: int) -> str:
    """Provider ``stop_reason`` -> ``Completion.stop_reason``: ``end_turn``/``stop_sequence`` ->
    "stop", ``max_tokens`` -> "length", ``refusal`` -> "blocked:refusal"; otherwise no content
    blocks -> "empty"; any other reason -> "other:<raw>" (no reason at all: "other:none")."""
    if stop_reason == "refusal":
        return STOP_REASONS["refusal"]
    if n_blocks == 0:
        return STOP_EMPTY
    if stop_reason in STOP_REASONS:
        return STOP_REASONS[stop_reason]
    return f"{STOP_OTHER}:{stop_reason or 'none'}"


def _block_text(block: Any) -> str:
    """The readable text of one response content block (see ``_completion``)."""
    if block.type == "text":
        return str(block.text or "")
    if block.type == "thinking":
        return str(block.thinking or "")
    if block.type == "redacted_thinking":
        return REDACTED_THINKING
    return ""


def _completion(
    blocks: list[tuple[str, str]], usage: TokenUsage, stop_reason: str | None
) -> Completion:
    """A ``Completion`` from ``(block type, text)`` pairs in content order: ``text`` blocks
    concatenated as the answer, ``thinking``/``redacted_thinking`` blocks joined by a blank line
    as the reasoning, other block types (tool use, ...) ignored. A refusal keeps no text."""
    stop = normalise_stop(stop_reason, len(blocks))
    text = "".join(t for kind, t in blocks if kind == "text")
    reasoning = "\n\n".join(
        t for kind, t in blocks if kind in ("thinking", "redacted_thinking") and t
    )
    if stop.startswith(STOP_BLOCKED) and text:
        log.debug("anthropic: refusal; %d characters of partial text dropped", len(text))
        text = ""
    return Completion(text=text, reasoning=reasoning, usage=usage, stop_reason=stop)


class AnthropicBackend(Backend):
    """One ``AsyncAnthropic`` client for the Messages API; safe to share between episodes."""

    strict_alternation = True  # the Messages API takes only alternating user/assistant turns

    def __init__(self, client: ClientConfig, *, api_key: str, key_env: str | None = None):
        """``api_key``: the key, sent as ``x-api-key``; ``key_env``: the env var it came from
        (named in error text). ``client.base_url`` (None: the SDK default) is the API root; a
        trailing ``/v1`` is removed since the SDK adds ``/v1/messages``. Raises
        ``BackendError`` when ``client.model_id`` is missing."""
        self.name = client.client_name
        self._client_cfg = client
        self._key_env = key_env
        self._redact = Redactor(api_key)
        if not client.model_id:
            raise BackendError(
                f"{self.name}: client.model_id is required (the Claude model name)",
                provider=self.name,
            )
        self.model = client.model_id
        base_url = client.base_url.rstrip("/") if client.base_url else None
        if base_url and base_url.endswith("/v1"):
            base_url = base_url[: -len("/v1")]
        self._sdk = AsyncAnthropic(
            api_key=api_key, base_url=base_url, max_retries=0, timeout=client.timeout,
            http_client=DefaultAsyncHttpxClient(
                limits=pool_limits(DEFAULT_CONNECTION_LIMITS, client.max_concurrency)),
        )
        self._warned: set[str] = set()

    @property
    def base_url(self) -> str:
        """The API root the SDK calls."""
        return str(self._sdk.base_url)

    async def aclose(self) -> None:
        """Close the SDK's HTTP connection pool."""
        await self._sdk.close()

    async def probe(self) -> str | None:
        """``GET /v1/models`` (costs no tokens); see ``Backend.probe``."""
        return await run_probe(lambda: self._sdk.models.list(limit=1), self._classify,
                               self.name, self.base_url, self._client_cfg.timeout)

    async def complete(self, messages: list[ChatMessage], params: GenerateParams) -> Completion:
        """One Messages call (non-streaming, or SSE streaming per ``client.stream``).

        Returns the text blocks joined as ``text``; ``thinking`` blocks (and
        ``"[redacted thinking]"`` per ``redacted_thinking`` block) joined by a blank line as
        ``reasoning``; usage (see ``usage_from``); the normalised stop reason (see
        ``normalise_stop``; a refusal has ``text == ""``); latency (s) and attempts. Raises
        ``BackendError``: fail-fast on 4xx (401/403: "bad API key for anthropic ..."),
        ``retryable=True`` once retries of 408/429/5xx/529, timeouts and connection errors are
        spent.
        """
        request = self.request(messages, params)
        return await complete_with_retries(
            lambda: self._attempt(request), self._client_cfg, self.name, classify=self._classify
        )

    def request(self, messages: list[ChatMessage], params: GenerateParams) -> dict[str, Any]:
        """The Messages request body (wire format) for one call; see the module docstring."""
        system, wire = to_anthropic_messages(messages)
        body: dict[str, Any] = {"model": self.model, "messages": wire}
        if system is not None:
            body["system"] = system
        for key, value in params.extra.items():
            if key in SILENT_DROP_KEYS or key in OWN_FIELDS:
                continue
            if key in OPENAI_ONLY_KEYS:
                self._warn_once(key, "%s: %r is not an Anthropic parameter; dropped", key)
                continue
            if key == "stop":
                body.setdefault("stop_sequences", [value] if isinstance(value, str) else value)
                continue
            body[key] = value
        budget = thinking_budget(self._client_cfg)
        if budget is not None and "thinking" not in body:
            body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        thinking = body.get("thinking")  # ours, or one given in ``params.extra``
        thinking_on = isinstance(thinking, dict) and thinking.get("type") != "disabled"
        spent = thinking.get("budget_tokens") if thinking_on and isinstance(thinking, dict) else 0
        body["max_tokens"] = params.max_tokens + (spent if isinstance(spent, int) else 0)
        if params.temperature is not None:
            if thinking_on:
                log.debug("%s: thinking is on; temperature %s not sent", self.name,
                          params.temperature)
            else:
                body["temperature"] = params.temperature
        if params.choices:
            log.debug("%s: no constrained decoding; choices ignored", self.name)
        if self._client_cfg.stream:
            body["stream"] = True
        return body

    def _warn_once(self, key: str, fmt: str, *args: Any) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(fmt, self.name, *args)

    async def _attempt(self, request: dict[str, Any]) -> Completion:
        if request.get("stream"):
            return await self._streamed(request)
        async with asyncio.timeout(self._client_cfg.timeout):
            response = await self._create(request)
        return self._parse(response)

    async def _create(self, request: dict[str, Any]) -> Any:
        """``messages.create`` with the typed arguments it declares and every other field
        (temperature, top_p, top_k, ...) in ``extra_body``, sent unchanged."""
        typed = ("model", "messages", "max_tokens", "system", "thinking", "stream",
                 "stop_sequences", "metadata")
        kwargs = {k: request[k] for k in typed if k in request}
        extra = {k: v for k, v in request.items() if k not in typed}
        return await self._sdk.messages.create(
            **kwargs, extra_body=extra or None, timeout=self._client_cfg.timeout
        )

    async def _streamed(self, request: dict[str, Any]) -> Completion:
        stream = await self._create(request)
        blocks: dict[int, tuple[str, list[str]]] = {}  # index -> (block type, text pieces)
        usage: Any = None
        stop_reason: str | None = None
        try:
            async for event in stream:
                kind = event.type
                if kind == "message_start":
                    usage = event.message.usage
                elif kind == "content_block_start":
                    block = event.content_block
                    blocks[event.index] = (block.type, [_block_text(block)])
                elif kind == "content_block_delta":
                    delta = event.delta
                    piece = (
                        delta.text if delta.type == "text_delta"
                        else delta.thinking if delta.type == "thinking_delta"
                        else ""
                    )
                    if piece and event.index in blocks:
                        blocks[event.index][1].append(piece)
                elif kind == "message_delta":
                    if event.delta.stop_reason is not None:
                        stop_reason = event.delta.stop_reason
                    usage = _merge_usage(usage, event.usage)
        finally:
            await stream.close()
        ordered = [(kind, "".join(parts)) for _, (kind, parts) in sorted(blocks.items())]
        return _completion(ordered, usage_from(usage), stop_reason)

    def _parse(self, response: Any) -> Completion:
        content = list(getattr(response, "content", None) or [])
        return _completion(
            [(block.type, _block_text(block)) for block in content],
            usage_from(getattr(response, "usage", None)),
            getattr(response, "stop_reason", None),
        )

    def _classify(self, exc: Exception) -> Exception:
        """Map an SDK/transport exception to ``TransientError`` or ``BackendError``; an
        ``event: error`` inside a 200 stream counts as the HTTP status of its error type."""
        if isinstance(exc, anthropic.APIStatusError):
            status = exc.status_code
            error_type = _error_type(exc.body)
            if status < 400:  # an ``event: error`` inside a 200 SSE stream
                status = ERROR_TYPE_STATUS.get(error_type or "", 500)
            detail = self._redact(error_message(exc.body, exc.message))
            if error_type:
                detail = f"{error_type}: {detail}"
            return classify_status(
                self.name, status, detail, headers=exc.response.headers, key_env=self._key_env
            )
        return classify_sdk_error(
            exc, anthropic, self.name, redact=self._redact, timeout_s=self._client_cfg.timeout,
            endpoint=self.base_url,
        )


def _merge_usage(usage: Any, delta: Any) -> Any:
    """``message_start`` usage updated by a ``message_delta`` usage (its counts are cumulative;
    fields it leaves None keep their earlier value)."""
    if usage is None:
        return delta
    updates = {
        name: value
        for name in ("input_tokens", "output_tokens", "cache_creation_input_tokens",
                     "cache_read_input_tokens", "output_tokens_details")
        if (value := getattr(delta, name, None)) is not None
    }
    return usage.model_copy(update=updates)


def _error_type(body: object) -> str | None:
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and isinstance(err.get("type"), str):
            return str(err["type"])
    return None

