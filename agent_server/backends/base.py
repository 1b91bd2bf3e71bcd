"""The model-backend interface: one async ``complete(messages, params)`` per provider.

A backend turns a provider-neutral chat (``ChatMessage`` list) into one completion. It owns the
provider client, the retry policy (tenacity: exponential backoff with jitter, only on retryable
failures) and the request timeout. Errors that end an episode are raised as ``BackendError``.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant"]


@dataclass
class ChatMessage:
    """One chat message. ``images`` are PNG bytes attached after the text (VLM mode)."""

    role: Role
    content: str
    images: list[bytes] = field(default_factory=list)


@dataclass
class GenerateParams:
    """Per-call generation settings.

    ``temperature`` None means the provider default. ``max_tokens`` bounds output tokens.
    ``choices``: when set and the backend supports it, the output is constrained to exactly one
    of these strings (grammar / guided decoding). ``extra`` is passed through to the provider.
    """

    temperature: float | None = 1.0
    max_tokens: int = 4096
    choices: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class TokenUsage:
    """Token counts of one call (or a sum of calls).

    ``input_tokens`` includes ``cached_input_tokens`` (prompt tokens served from a provider
    cache); ``output_tokens`` includes ``reasoning_tokens`` (thinking is billed as output). Every
    backend reports in this convention, whatever its provider's own fields (Gemini, for example,
    reports thoughts apart from the answer; its backend adds them into ``output_tokens``).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0

    def add(self, other: TokenUsage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cached_input_tokens += other.cached_input_tokens
        self.reasoning_tokens += other.reasoning_tokens


#: Normalised ``Completion.stop_reason`` values every backend maps its provider's reason to.
STOP_END = "stop"  # the model finished its answer
STOP_LENGTH = "length"  # cut off at max_tokens (or the thinking budget)
STOP_BLOCKED = "blocked"  # a safety/content filter withheld the answer (provider detail follows)
STOP_EMPTY = "empty"  # the provider returned no choice/candidate at all
STOP_OTHER = "other"  # any other provider reason (the raw reason follows after a colon)


@dataclass
class Completion:
    """One model answer. ``latency_s`` is wall time of the successful call including retries.

    ``stop_reason`` starts with one of ``STOP_END``, ``STOP_LENGTH``, ``STOP_BLOCKED``,
    ``STOP_EMPTY``, ``STOP_OTHER``, optionally followed by ``":<provider detail>"`` (for example
    ``"blocked:SAFETY"``). A blocked or empty answer is returned with ``text == ""`` and that
    classification, never raised: the strategy then applies the env's default action with
    feedback, and the step record keeps the reason.
    """

    text: str
    reasoning: str = ""
    usage: TokenUsage = field(default_factory=TokenUsage)
    stop_reason: str = ""
    latency_s: float = 0.0
    attempts: int = 1

    @property
    def withheld(self) -> bool:
        """True when the provider blocked or returned no answer (``text`` is then empty)."""
        return self.stop_reason.split(":", 1)[0] in (STOP_BLOCKED, STOP_EMPTY)


class BackendError(RuntimeError):
    """A model call failed for good (4xx, or retries exhausted). ``retryable`` tells whether the
    last failure was of a retryable kind; ``status`` is the HTTP status when there was one;
    ``bad_key`` whether the provider refused the API key."""

    def __init__(self, message: str, *, provider: str, status: int | None = None,
                 retryable: bool = False, bad_key: bool = False):
        super().__init__(message)
        self.provider = provider
        self.status = status
        self.retryable = retryable
        self.bad_key = bad_key


class ClientSetupError(BackendError):
    """The backend cannot send anything as it is set up (e.g. the environment names a proxy
    its HTTP client cannot use): never retried, and a failed preflight (``probe_endpoint``)."""


class Backend(abc.ABC):
    """A model backend. Instances may be shared by concurrent episodes (``complete`` is
    re-entrant); they hold no per-episode state."""

    name: str = ""
    #: Whether the provider's API takes only strictly alternating user/assistant turns. Such a
    #: backend always merges same-role neighbours (``merge_consecutive_roles``) while building
    #: its request; any other backend merges them only when ``client.alternate_roles`` asks
    #: (for chat templates that need alternation). Backends are the only place that merges:
    #: strategies and the history builder hand over the chat unmerged.
    strict_alternation: bool = False

    @abc.abstractmethod
    async def complete(self, messages: list[ChatMessage], params: GenerateParams) -> Completion:
        """Return one completion. Raises ``BackendError``."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release connections / model memory."""

    async def probe(self) -> str | None:
        """One cheap request to the model endpoint before any episode (preflight): a message
        naming the endpoint and the provider's answer when the endpoint cannot be used
        (unreachable, timed out, a bad API key), None when it answered or the backend has no
        endpoint to ask (in-process models). Never raises for an endpoint failure."""
        return None

    def can_create_as_sent(self) -> bool:
        """True when ``create_as_sent`` works: the backend calls an OpenAI-compatible endpoint
        through the OpenAI SDK."""
        return False

    async def create_as_sent(self, kwargs: dict[str, Any]) -> tuple[Any, Completion]:
        """One ``chat.completions.create(**kwargs)`` with the keyword arguments another client
        built (BALROG's ``OpenAIWrapper`` under ``agent.protocol=balrog``), the body built from
        them by the OpenAI SDK. Returns the SDK's response object and its ``Completion``.
        Raises ``BackendError`` (also when the backend has no such call: see
        ``can_create_as_sent``)."""
        raise BackendError(f"{self.name}: no OpenAI SDK call to make", provider=self.name)


def pool_limits(limits: Any, max_concurrency: int) -> Any:
    """A copy of an official SDK's httpx ``Limits`` (its ``DEFAULT_CONNECTION_LIMITS``: 1,000
    connections) whose connection cap is at least ``max_concurrency``, its keep-alive pool and
    expiry kept. ``client.max_concurrency`` (``ConcurrencyLimited``) is the one cap on a
    backend's calls in flight: a connection pool capped under it would hold calls back without
    a word. A number, not "no cap": the SDKs' aiohttp transport reads a missing cap as
    aiohttp's own default of 100."""
    cap = limits.max_connections
    return type(limits)(max_connections=max(cap or 0, max_concurrency),
                        max_keepalive_connections=limits.max_keepalive_connections,
                        keepalive_expiry=limits.keepalive_expiry)


class ConcurrencyLimited(Backend):
    """A backend with at most ``limit`` calls in flight (``client.max_concurrency`` per
    endpoint); further calls wait their turn on an ``asyncio.Semaphore``. ``in_flight`` and
    ``waiting`` count the calls running and queued right now."""

    def __init__(self, inner: Backend, limit: int):
        if limit < 1:
            raise ValueError(f"concurrency limit must be >= 1, got {limit}")
        self.inner = inner
        self.name = inner.name
        self.strict_alternation = inner.strict_alternation
        self.limit = limit
        self.in_flight = 0
        self.waiting = 0
        self._slots = asyncio.Semaphore(limit)

    @contextlib.asynccontextmanager
    async def _slot(self) -> AsyncIterator[None]:
        """Hold one of the ``limit`` slots (``waiting`` while queued, ``in_flight`` after)."""
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1
            self._slots.release()

    async def complete(self, messages: list[ChatMessage], params: GenerateParams) -> Completion:
        """``inner.complete`` once a slot is free. Raises what ``inner`` raises."""
        async with self._slot():
            return await self.inner.complete(messages, params)

    def can_create_as_sent(self) -> bool:
        """As the wrapped backend."""
        return self.inner.can_create_as_sent()

    async def create_as_sent(self, kwargs: dict[str, Any]) -> tuple[Any, Completion]:
        """``inner.create_as_sent`` once a slot is free."""
        async with self._slot():
            return await self.inner.create_as_sent(kwargs)

    async def aclose(self) -> None:
        """Close the wrapped backend."""
        await self.inner.aclose()


def prompt_bytes(messages: list[ChatMessage]) -> int:
    """Size of a chat as ``client.max_prompt_bytes`` counts it: the UTF-8 bytes of every
    message's text plus the bytes of every attached PNG (before any base64 a provider's wire
    format adds)."""
    size = 0
    for message in messages:
        size += _utf8_size(message.content)
        if message.images:
            size += sum(map(len, message.images))
    return size


def wire_prompt_bytes(messages: list[dict[str, Any]]) -> int:
    """``prompt_bytes`` of chat messages in OpenAI's wire form (a string content, or parts: a
    text part counts its UTF-8 bytes, an image part the bytes its base64 data URL decodes to,
    three quarters of its length)."""
    size = 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            size += _utf8_size(content)
            continue
        for part in content or []:
            if part.get("type") == "text":
                size += _utf8_size(str(part.get("text", "")))
            elif part.get("type") == "image_url":
                url = str(part.get("image_url", {}).get("url", ""))
                size += len(url.split(",", 1)[-1]) * 3 // 4
    return size


def _utf8_size(text: str) -> int:
    """``len(text.encode("utf-8"))``, without encoding an ASCII text (its length is its size)."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))


class PromptCapped(Backend):
    """A backend that refuses prompts over ``limit`` bytes (``client.max_prompt_bytes``,
    counted by ``prompt_bytes``) before they reach the wrapped backend, its concurrency slot or
    the provider: ``complete`` raises a non-retryable ``BackendError`` naming the size, the cap
    and what to lower, and the episode ends as ``agent_error``."""

    def __init__(self, inner: Backend, limit: int, *, provider: str):
        if limit < 1:
            raise ValueError(f"prompt cap must be >= 1 byte, got {limit}")
        self.inner = inner
        self.name = inner.name
        self.strict_alternation = inner.strict_alternation
        self.limit = limit
        self.provider = provider

    async def complete(self, messages: list[ChatMessage], params: GenerateParams) -> Completion:
        """``inner.complete`` when the prompt fits. Raises ``BackendError`` (not retryable)
        when it does not, and what ``inner`` raises."""
        self._check(prompt_bytes(messages))
        return await self.inner.complete(messages, params)

    def _check(self, size: int) -> None:
        if size > self.limit:
            raise BackendError(
                f"prompt of {size} bytes exceeds client.max_prompt_bytes={self.limit}; lower "
                "agent.max_text_history / max_image_history or raise the cap",
                provider=self.provider)

    def can_create_as_sent(self) -> bool:
        """As the wrapped backend."""
        return self.inner.can_create_as_sent()

    async def create_as_sent(self, kwargs: dict[str, Any]) -> tuple[Any, Completion]:
        """``inner.create_as_sent`` when the prompt fits (``wire_prompt_bytes``)."""
        self._check(wire_prompt_bytes(list(kwargs.get("messages") or [])))
        return await self.inner.create_as_sent(kwargs)

    async def aclose(self) -> None:
        """Close the wrapped backend."""
        await self.inner.aclose()


def merge_consecutive_roles(messages: list[ChatMessage]) -> list[ChatMessage]:
    """Merge runs of same-role messages (for providers that need strictly alternating roles).

    Called only by the backends, in their request building (see ``Backend.strict_alternation``).
    Contents of a run are joined with a blank line; their images are concatenated in order.
    Returns a new list; the input messages are not modified.
    """
    merged: list[ChatMessage] = []
    for msg in messages:
        if merged and merged[-1].role == msg.role:
            last = merged[-1]
            parts = [p for p in (last.content, msg.content) if p]
            merged[-1] = ChatMessage(last.role, "\n\n".join(parts), [*last.images, *msg.images])
        else:
            merged.append(ChatMessage(msg.role, msg.content, list(msg.images)))
    return merged


def choices_gbnf(choices: list[str]) -> str:
    """A GBNF grammar (llama.cpp) whose language is exactly the given strings.

    Raises ``ValueError`` when ``choices`` is empty.
    """
    if not choices:
        raise ValueError("choices_gbnf needs at least one choice")
    escapes = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    literals = [
        '"' + "".join(escapes.get(ch, ch) for ch in c) + '"' for c in dict.fromkeys(choices)
    ]
    return "root ::= " + " | ".join(literals) + "\n"
