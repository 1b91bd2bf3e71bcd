"""The shared retry policy of all model backends (tenacity).

A backend runs each attempt of a call through ``call_with_retries``. Inside an attempt it raises

- ``TransientError`` for a retryable failure (HTTP 429, 408, 5xx, timeouts, connection errors);
  it may carry the server's ``retry-after`` delay;
- ``BackendError`` for a failure that must not be retried (other 4xx, bad output, ...).

Retryable failures are retried at most ``client.max_retries`` times with exponential backoff and
jitter (``delay``, ``2*delay``, ``4*delay``, ... plus up to ``delay`` of random jitter, each wait
capped at ``MAX_BACKOFF_S``). A ``retry-after`` header replaces the computed wait, bounded by
``MAX_RETRY_AFTER_S``. When the retries are spent, ``BackendError(retryable=True)`` is raised.
"""

from __future__ import annotations

import email.utils
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    RetryError,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from agent_server.backends.base import BackendError
from moria.config import ClientConfig

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Upper bound (seconds) for a server-requested ``retry-after`` wait.
MAX_RETRY_AFTER_S = 60.0
#: Upper bound (seconds) for one computed backoff wait.
MAX_BACKOFF_S = 60.0


class TransientError(Exception):
    """A retryable failure of one attempt.

    ``status`` is the HTTP status when there was one; ``retry_after`` is the server-requested
    wait in seconds (already parsed), or None.
    """

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ):
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


def is_retryable_status(status: int) -> bool:
    """True for HTTP statuses worth retrying: 408, 429 and every 5xx."""
    return status in (408, 429) or 500 <= status <= 599


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait according to ``retry-after-ms`` / ``retry-after`` response headers.

    ``retry-after`` may be a number of seconds or an HTTP date. Returns None when absent or
    unparseable; negative values become 0. The value is not bounded here.
    """
    if not headers:
        return None
    lower = {k.lower(): v for k, v in headers.items()}
    ms = lower.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = lower.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class _BackoffWait:
    """tenacity wait: the server's ``retry-after`` (bounded) if given, else exponential+jitter."""

    def __init__(self, delay: float):
        # exponential (delay, 2*delay, ...) capped, plus up to ``delay`` of uniform jitter;
        # composed from waits whose signatures are stable across tenacity releases
        self._exp = wait_exponential(multiplier=delay, max=MAX_BACKOFF_S) + wait_random(0, delay)

    def __call__(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if isinstance(exc, TransientError) and exc.retry_after is not None:
            return min(exc.retry_after, MAX_RETRY_AFTER_S)
        return float(self._exp(state))


async def call_with_retries(
    attempt: Callable[[], Awaitable[T]], client: ClientConfig, provider: str
) -> tuple[T, int]:
    """Run ``attempt`` under the retry policy; return ``(result, attempts_made)``.

    Raises ``BackendError`` as raised by an attempt (not retried), or
    ``BackendError(retryable=True)`` "<provider>: retries exhausted after N attempts: <last>"
    once ``client.max_retries`` retries have failed.
    """

    def _before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        log.warning(
            "%s: attempt %d failed (%s); retrying in %.2fs",
            provider,
            state.attempt_number,
            exc,
            wait,
        )

    retrying = AsyncRetrying(
        stop=stop_after_attempt(client.max_retries + 1),
        wait=_BackoffWait(client.delay),
        retry=retry_if_exception_type(TransientError),
        before_sleep=_before_sleep,
        reraise=False,
    )
    try:
        async for state in retrying:
            with state:
                result = await attempt()
            if not state.retry_state.outcome or not state.retry_state.outcome.failed:
                return result, state.retry_state.attempt_number
    except RetryError as err:
        last = err.last_attempt.exception()
        status = last.status if isinstance(last, TransientError) else None
        raise BackendError(
            f"{provider}: retries exhausted after {err.last_attempt.attempt_number} attempts: "
            f"{last}",
            provider=provider,
            status=status,
            retryable=True,
        ) from last
    raise AssertionError("unreachable: tenacity ended without result or RetryError")
