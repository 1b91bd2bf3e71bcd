"""What a model call must pass before it is sent: the run's cost reservation and the
endpoint's rate limits.

**Worst case of a call.** ``token_bound`` is an upper bound of the tokens a provider can bill
for a call, computed from the request alone (no tokenizer):

- prompt: every UTF-8 byte of every message's text counts as a token (the byte-level BPE
  tokenizers of OpenAI, Anthropic, Qwen and Llama never make more tokens than bytes, and
  SentencePiece tokenizers, Gemini's, make at most one per character), plus
  ``MESSAGE_OVERHEAD_TOKENS`` per message for the chat template and ``IMAGE_TOKENS`` per image
  (the most Anthropic bills for one image after its resizing, above gpt-4o's 1,445 at high
  detail; providers that multiply image tokens for a cheaper model, gpt-4o-mini's 33x, are not
  covered by it: docs/budget.md);
- output: the call's ``max_tokens``, plus the thinking allowance where thinking is billed on
  top of it (``thinking_allowance``).

English prompts make about a quarter as many tokens as bytes, so the bound is about four times
the real prompt: a reservation holds more than the call spends, never less.

**Reservations** (``Limited`` with ``EpisodeLimits.ask``, one per episode): before each call the
episode asks its client (the orchestrator, which keeps the run's ledger) to reserve the call's
worst case; a refused call is not sent and raises ``BudgetRefused``.

**Rate limits** (``EndpointRateLimit``, one per endpoint on a policy server, shared by every
episode that calls it): ``client.max_requests_per_minute`` and ``client.max_tokens_per_minute``
are leaky buckets (``moria.limiter``) that every attempt of a call (retries included) passes
before it is sent, charged one request and the call's tokens as providers count them against a
token limit at request time (OpenAI's documented rule): the prompt's estimate, a quarter of its
text bytes (``moria.tokens``) plus the image allowance, and the full ``max_tokens``. A 429
answer pauses every call to the endpoint for its ``retry-after`` (``RATE_LIMIT_PAUSE_S`` when it
gives none), so the whole server slows down instead of each call backing off alone. The scope of
the call running in a task is a context variable (``current_call``), read by the shared retry
loop (``agent_server.backends.retry``) around each attempt.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from agent_server.backends.base import (
    Backend,
    BackendError,
    ChatMessage,
    Completion,
    GenerateParams,
)
from moria.config import ClientConfig
from moria.limiter import minute_bucket
from moria.tokens import estimate_tokens

#: Tokens a chat template may add per message (role markers, separators).
MESSAGE_OVERHEAD_TOKENS = 16
#: Tokens a chat template may add once per call (the reply's opening).
CALL_OVERHEAD_TOKENS = 16
#: Tokens one image may be billed, at most (see the module docstring).
IMAGE_TOKENS = 1_600
#: The thinking allowance of a ``reasoning_effort`` with no ``thinking_budget`` (Anthropic's
#: and Gemini's budgets for "high").
EFFORT_THINKING_TOKENS = 24_576
#: The pause (seconds) after a 429 that gives no retry-after.
RATE_LIMIT_PAUSE_S = 1.0


class BudgetRefused(BackendError):
    """The run's cost cap refused a model call: it was not sent. Not retryable."""


@dataclass(frozen=True)
class TokenBound:
    """Upper bounds of one call's billed tokens (``input_tokens``, ``output_tokens``) and the
    prompt's estimate a provider's rate limiter counts (``input_estimate``)."""

    input_tokens: int
    output_tokens: int
    input_estimate: int = 0

    @property
    def rate_tokens(self) -> int:
        """What the call counts against a tokens-per-minute limit: ``input_estimate +
        output_tokens``."""
        return self.input_estimate + self.output_tokens


def thinking_allowance(client: ClientConfig) -> int:
    """Output tokens a call may spend thinking beyond its ``max_tokens``: the
    ``thinking_budget`` when set, else ``EFFORT_THINKING_TOKENS`` for a ``reasoning_effort``
    (0 when neither is set). Counted for every backend: where thinking sits inside
    ``max_tokens`` (OpenAI) the bound is only looser."""
    if client.thinking_budget is not None:
        return max(client.thinking_budget, 1024) if client.thinking_budget else 0
    return EFFORT_THINKING_TOKENS if client.reasoning_effort is not None else 0


def prompt_tokens(texts: Iterable[str], images: int) -> tuple[int, int]:
    """(upper bound, provider's estimate) of the prompt tokens of a call whose messages have
    ``texts`` and ``images`` images in all (see the module docstring)."""
    size = messages = 0
    for text in texts:
        messages += 1
        size += len(text) if text.isascii() else len(text.encode("utf-8"))
    images_tokens = IMAGE_TOKENS * images
    bound = CALL_OVERHEAD_TOKENS + MESSAGE_OVERHEAD_TOKENS * messages + size + images_tokens
    return bound, estimate_tokens(size) + images_tokens


def token_bound(messages: list[ChatMessage], max_tokens: int, client: ClientConfig,
                ) -> TokenBound:
    """The worst case of a call of ``messages`` with output cap ``max_tokens``."""
    bound, estimate = prompt_tokens((m.content for m in messages),
                                    sum(len(m.images) for m in messages))
    return TokenBound(bound, max_tokens + thinking_allowance(client), estimate)


def wire_token_bound(kwargs: dict[str, Any], client: ClientConfig) -> TokenBound:
    """``token_bound`` of a request in OpenAI's wire form (``messages`` whose content is a
    string or a list of text and image_url parts; ``max_tokens`` or
    ``max_completion_tokens``, else the client's ``generate_kwargs.max_tokens``)."""
    texts: list[str] = []
    images = 0
    for message in kwargs.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        parts = [p for p in content or [] if isinstance(p, dict)]
        texts.append("".join(str(p.get("text", "")) for p in parts if p.get("type") == "text"))
        images += sum(1 for p in parts if p.get("type") == "image_url")
    cap = kwargs.get("max_tokens") or kwargs.get("max_completion_tokens")
    max_tokens = int(cap) if isinstance(cap, int | float) else client.generate_kwargs.max_tokens
    bound, estimate = prompt_tokens(texts, images)
    return TokenBound(bound, max_tokens + thinking_allowance(client), estimate)


class EndpointRateLimit:
    """The rate limits of one endpoint on one policy server (see the module docstring).
    ``requests_per_minute`` / ``tokens_per_minute``: None for no limit. Raises ValueError for a
    limit <= 0."""

    def __init__(self, requests_per_minute: float | None, tokens_per_minute: float | None):
        for name, value in (("requests", requests_per_minute), ("tokens", tokens_per_minute)):
            if value is not None and not value > 0:
                raise ValueError(f"{name} per minute must be > 0, got {value}")
        self.requests = minute_bucket(requests_per_minute) if requests_per_minute else None
        self.tokens = minute_bucket(tokens_per_minute) if tokens_per_minute else None
        #: time.monotonic() before which no call is sent (a 429's retry-after)
        self.paused_until = 0.0
        #: 429 answers seen
        self.throttled_calls = 0

    async def acquire(self, tokens: int) -> float:
        """Wait until a call of ``tokens`` worst-case tokens may be sent; returns the seconds
        waited. A call bigger than the whole per-minute token limit waits for a full bucket."""
        started = time.monotonic()
        while (pause := self.paused_until - time.monotonic()) > 0:
            await asyncio.sleep(pause)
        if self.requests is not None:
            await self.requests.acquire(1)
        if self.tokens is not None:
            await self.tokens.acquire(min(float(tokens), self.tokens.max_rate))
        return time.monotonic() - started

    def throttled(self, retry_after: float | None) -> None:
        """A 429 answer: pause every call to the endpoint for ``retry_after`` seconds (None:
        ``RATE_LIMIT_PAUSE_S``)."""
        self.throttled_calls += 1
        pause = RATE_LIMIT_PAUSE_S if retry_after is None else max(0.0, retry_after)
        self.paused_until = max(self.paused_until, time.monotonic() + pause)


@dataclass
class CallScope:
    """The limits of the model call running in a task: its endpoint's rate limit (None: no
    limit), the tokens it counts against it (``TokenBound.rate_tokens``), and the seconds its
    attempts waited on the limit."""

    limit: EndpointRateLimit | None
    tokens: int
    waited_s: float = 0.0

    async def before_attempt(self) -> None:
        """Wait for the rate limit (no-op without one)."""
        if self.limit is not None:
            self.waited_s += await self.limit.acquire(self.tokens)

    def after_failure(self, status: int | None, retry_after: float | None) -> None:
        """Feed a failed attempt back: a 429 pauses the endpoint."""
        if self.limit is not None and status == 429:
            self.limit.throttled(retry_after)
            # the pause is waited out by the next attempt's ``before_attempt``


current_call: contextvars.ContextVar[CallScope | None] = contextvars.ContextVar(
    "moria_current_call", default=None)


@contextmanager
def call_scope(scope: CallScope) -> Iterator[CallScope]:
    """Make ``scope`` the current call's scope in this task while the block runs."""
    token = current_call.set(scope)
    try:
        yield scope
    finally:
        current_call.reset(token)


#: ``ask(model, bound)`` -> (granted, reason): the episode's client deciding a reservation.
Ask = Callable[[str, TokenBound], Awaitable[tuple[bool, str]]]


@dataclass
class EpisodeLimits:
    """The limits of one episode's calls: the endpoint's rate limit (None: none), the
    reservation callback (None: no cost cap), and what the calls waited (``waited_s``, summed
    until ``take_waited``)."""

    client: ClientConfig
    model: str
    rate_limit: EndpointRateLimit | None = None
    ask: Ask | None = None
    waited_s: float = field(default=0.0)

    def take_waited(self) -> float:
        """Seconds waited on rate limits since the last call; resets it."""
        waited, self.waited_s = self.waited_s, 0.0
        return waited


class Limited(Backend):
    """One episode's view of a shared backend: each call is reserved (when ``limits.ask``
    is set) and then runs in a ``CallScope`` of its endpoint's rate limit. Raises
    ``BudgetRefused`` for a refused reservation, and what ``inner`` raises."""

    def __init__(self, inner: Backend, limits: EpisodeLimits):
        self.inner = inner
        self.name = inner.name
        self.strict_alternation = inner.strict_alternation
        self.limits = limits

    async def complete(self, messages: list[ChatMessage], params: GenerateParams) -> Completion:
        """``inner.complete`` within the limits."""
        bound = token_bound(messages, params.max_tokens, self.limits.client)
        return await self._call(bound, lambda: self.inner.complete(messages, params))

    def can_create_as_sent(self) -> bool:
        """As the wrapped backend."""
        return self.inner.can_create_as_sent()

    async def create_as_sent(self, kwargs: dict[str, Any]) -> tuple[Any, Completion]:
        """``inner.create_as_sent`` within the limits."""
        bound = wire_token_bound(kwargs, self.limits.client)
        return await self._call(bound, lambda: self.inner.create_as_sent(kwargs))

    async def _call(self, bound: TokenBound, send: Callable[[], Awaitable[Any]]) -> Any:
        limits = self.limits
        if limits.ask is not None:
            granted, reason = await limits.ask(limits.model, bound)
            if not granted:
                raise BudgetRefused(reason or "the run's cost cap refused the call",
                                    provider=limits.client.client_name)
        scope = CallScope(limits.rate_limit, bound.rate_tokens)
        try:
            with call_scope(scope):
                return await send()
        finally:
            limits.waited_s += scope.waited_s

    async def aclose(self) -> None:
        """Nothing to close: the shared backend outlives the episode."""
