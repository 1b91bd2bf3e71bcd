"""The shared retry policy and failure classification of all model backends (tenacity).

A backend runs each attempt of a call through ``complete_with_retries`` (or the lower-level
``call_with_retries``). Inside an attempt it raises

- ``TransientError`` for a retryable failure (HTTP 429, 408, 5xx, timeouts, connection errors);
  it may carry the server's ``retry-after`` delay;
- ``BackendError`` for a failure that must not be retried (other 4xx, bad output, ...).

Retryable failures are retried at most ``client.max_retries`` times with exponential backoff and
jitter (``delay``, ``2*delay``, ``4*delay``, ... plus up to ``delay`` of random jitter, each wait
capped at ``MAX_BACKOFF_S``). A ``retry-after`` header replaces the computed wait, bounded by
``MAX_RETRY_AFTER_S``. When the retries are spent, ``BackendError(retryable=True)`` is raised.

The helpers every provider shares live here too: ``classify_status`` (an HTTP error answer ->
``TransientError`` or ``BackendError``, with the same messages for every provider),
``classify_sdk_error`` (the other failures of the Stainless-generated ``openai`` and
``anthropic`` SDKs), ``classify_transport_error`` (the same for a plain HTTP client),
``error_message`` (the provider's own text from an error body) and
``Redactor`` (keeps API keys out of every message).
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import os
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import ModuleType
from typing import TypeVar

import httpx2
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    RetryError,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from agent_server.backends.base import BackendError, ClientSetupError, Completion
from agent_server.backends.limits import CallScope, current_call
from moria.config import ClientConfig
from moria.metrics import note_model_retry

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Upper bound (seconds) for a server-requested ``retry-after`` wait.
MAX_RETRY_AFTER_S = 60.0
#: Upper bound (seconds) for one computed backoff wait.
MAX_BACKOFF_S = 60.0

#: Key-shaped secrets (``sk-...``, ``key-...``, ``rk-...``), wherever they appear in text.
KEY_PATTERN = re.compile(r"\b(sk|key|rk)-[A-Za-z0-9_\-*]{4,}")


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


class Redactor:
    """Hides an API key in text that people may see (error messages, logs).

    Calling it on a text replaces the exact ``secret`` (when it has 4 or more characters) with
    ``***``, then applies each ``(pattern, replacement)`` of ``rules`` in order (default: every
    ``KEY_PATTERN`` match becomes ``***``). Returns the redacted text.
    """

    def __init__(
        self,
        secret: str | None,
        rules: Sequence[tuple[re.Pattern[str], str]] = ((KEY_PATTERN, "***"),),
    ):
        self._secret = secret if secret and len(secret) >= 4 else None
        self._rules = tuple(rules)

    def __call__(self, text: str) -> str:
        if self._secret:
            text = text.replace(self._secret, "***")
        for pattern, replacement in self._rules:
            text = pattern.sub(replacement, text)
        return text


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


def error_message(body: object, fallback: str) -> str:
    """The provider's own error text in a decoded JSON error ``body``: ``error.message`` (or a
    top-level ``message``), or ``error`` itself when it is a string; else ``fallback``."""
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return fallback


def classify_status(
    provider: str,
    status: int,
    detail: str,
    *,
    headers: Mapping[str, str] | None = None,
    key_env: str | None = None,
    status_name: str | None = None,
    retry_after: float | None = None,
    bad_key: bool = False,
) -> TransientError | BackendError:
    """The failure for an HTTP error answer with status ``status`` (0 when unknown).

    ``detail`` is the provider's error text, already redacted; ``status_name`` a status label
    the provider adds (e.g. ``"UNAVAILABLE"``), shown after the number. Returns:

    - a retryable status (``is_retryable_status``): ``TransientError("HTTP <status>[ <name>]:
      <detail>")`` whose ``retry_after`` (seconds) is ``retry_after`` when given, else parsed
      from the response ``headers``;
    - 401/403, or any status when ``bad_key`` (a provider's own bad-key answer):
      ``BackendError("bad API key for <provider> (HTTP <status>; check <key_env>): <detail>")``
      (no "; check" part without ``key_env``);
    - any other status: ``BackendError("<provider>: HTTP <status>[ <name>]: <detail>")``.

    A ``BackendError`` carries ``provider`` and ``status`` (None for status 0).
    """
    label = f"HTTP {status} {status_name}" if status_name else f"HTTP {status}"
    if is_retryable_status(status):
        if retry_after is None:
            retry_after = parse_retry_after(headers)
        return TransientError(f"{label}: {detail}", status=status, retry_after=retry_after)
    if status in (401, 403) or bad_key:
        hint = f"; check {key_env}" if key_env else ""
        return BackendError(
            f"bad API key for {provider} (HTTP {status}{hint}): {detail}",
            provider=provider,
            status=status or None,
            bad_key=True,
        )
    return BackendError(f"{provider}: {label}: {detail}", provider=provider, status=status or None)


def classify_sdk_error(
    exc: Exception,
    sdk: ModuleType,
    provider: str,
    *,
    redact: Callable[[str], str],
    timeout_s: float,
    endpoint: str | None = None,
) -> TransientError | BackendError:
    """A failure other than an HTTP error answer, from a Stainless-generated SDK (``sdk`` is the
    ``openai`` or the ``anthropic`` module: both define the error classes named below) or from
    its ``httpx2`` transport.

    Timeouts -> ``TransientError("timed out after <timeout_s>s")``; connection errors ->
    ``TransientError("connection error: ...")``; an ``APIResponseValidationError`` ->
    ``BackendError("<provider>: invalid response: ...")``; any other ``APIError`` (e.g. an error
    event inside an SSE stream) -> ``TransientError("API error: ...")``; anything else ->
    ``BackendError("<provider>: <exception type>: ...")``. Exception text goes through
    ``redact``. ``endpoint`` (the base URL) is named in timeout and connection errors.
    """
    where = f" ({endpoint})" if endpoint else ""
    failed = _connection_failure(exc)
    if failed is not None:  # before timeouts: see _connection_failure
        return TransientError(f"connection error{where}: {redact(_describe_os_error(failed))}")
    if isinstance(exc, sdk.APITimeoutError | httpx2.TimeoutException):
        return TransientError(f"timed out after {timeout_s:g}s{where}")
    if isinstance(exc, sdk.APIConnectionError | httpx2.TransportError):
        return TransientError(f"connection error{where}: {redact(str(exc))}")
    if isinstance(exc, sdk.APIResponseValidationError):
        return BackendError(f"{provider}: invalid response: {redact(str(exc))}", provider=provider)
    if isinstance(exc, sdk.APIError):
        return TransientError(f"API error: {redact(str(exc))}")
    return BackendError(f"{provider}: {type(exc).__name__}: {redact(str(exc))}", provider=provider)


def classify_transport_error(
    exc: Exception,
    provider: str,
    *,
    redact: Callable[[str], str],
    timeout_s: float,
    endpoint: str | None = None,
    connection_errors: tuple[type[BaseException], ...] = (),
) -> TransientError | BackendError:
    """A failure other than an HTTP error answer from a plain HTTP client (no SDK: the lean
    client, ``lean_http.py``), in the words ``classify_sdk_error`` uses for the SDK's:

    a refused or reset connection among its causes -> ``TransientError("connection error:
    connection refused (...)")``; a ``TimeoutError`` -> ``TransientError("timed out after
    <timeout_s>s")``; one of ``connection_errors`` (the client's own transport errors, e.g.
    ``aiohttp.ClientError``) -> ``TransientError("connection error: ...")``; anything else
    (e.g. a reply that is not JSON) -> ``BackendError("<provider>: <exception type>: ...")``.
    ``TransientError`` and ``BackendError`` pass as they are. Exception text goes through
    ``redact``; ``endpoint`` (the base URL) is named in timeout and connection errors."""
    if isinstance(exc, TransientError | BackendError):
        return exc
    where = f" ({endpoint})" if endpoint else ""
    failed = _connection_failure(exc)
    if failed is not None:
        return TransientError(f"connection error{where}: {redact(_describe_os_error(failed))}")
    if isinstance(exc, TimeoutError):
        return TransientError(f"timed out after {timeout_s:g}s{where}")
    if connection_errors and isinstance(exc, connection_errors):
        return TransientError(f"connection error{where}: {redact(str(exc) or type(exc).__name__)}")
    return BackendError(f"{provider}: {type(exc).__name__}: {redact(str(exc))}", provider=provider)


def _connection_failure(exc: BaseException) -> ConnectionError | None:
    """The OS-level connection failure (refused, reset: ``ConnectionError``) among the causes
    of ``exc``, if any. The SDK's aiohttp transport reports a refused connection as a connect
    *timeout* whose text is "Request timed out." (openai's vendored httpx_aiohttp maps every
    ``ClientConnectionError`` to ``ConnectTimeout``); the cause it chains tells the two apart,
    and is what a message should say."""
    seen = 0
    cause: BaseException | None = exc
    while cause is not None and seen < 8:
        if isinstance(cause, ConnectionError):
            return cause
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    return None


def _describe_os_error(error: ConnectionError) -> str:
    """A connection failure in words: "connection refused" from its errno where the OS has a
    name for it, then its own text (``ConnectionRefusedError: [Errno 111] Connect call failed
    ('127.0.0.1', 9)``)."""
    reason = os.strerror(error.errno).lower() if error.errno else ""
    text = f"{type(error).__name__}: {error}"
    return f"{reason} ({text})" if reason else text


#: The most seconds a preflight probe of a model endpoint waits (less when client.timeout is).
PROBE_TIMEOUT_S = 20.0


def probe_problem(failure: Exception, provider: str, endpoint: str) -> str | None:
    """What a failed preflight probe (``Backend.probe``) of ``endpoint`` tells the user, from
    the backend's classified ``failure``: a message for an unreachable or timed-out endpoint,
    for a client that cannot send as set up (``ClientSetupError``) and for a refused key (HTTP
    401/403, or the provider's own bad-key answer); None for any other answer (a server
    without the probed route still serves completions, and a transient 5xx is left to the
    episodes' retries)."""
    said = str(failure).replace(f" ({endpoint})", "")  # the endpoint is named once
    if isinstance(failure, ClientSetupError) or (isinstance(failure, TransientError)
                                                 and failure.status is None):
        return f"{provider} endpoint {endpoint} cannot be used: {said}"
    if isinstance(failure, BackendError) and failure.bad_key:
        return f"{provider} endpoint {endpoint} refused the key: {said}"
    return None


async def run_probe(request: Callable[[], Awaitable[object]], classify: Callable[[Exception],
                    Exception], provider: str, endpoint: str, timeout_s: float) -> str | None:
    """Send ``request`` (one cheap call, e.g. list models) within ``min(timeout_s,
    PROBE_TIMEOUT_S)`` seconds; ``probe_problem`` of its classified failure, None when it
    answered."""
    limit = min(timeout_s, PROBE_TIMEOUT_S)
    try:
        async with asyncio.timeout(limit):
            await request()
    except TimeoutError:
        return probe_problem(TransientError(f"timed out after {limit:g}s"), provider, endpoint)
    except Exception as exc:  # noqa: BLE001 - every failure is classified, none is raised
        return probe_problem(classify(exc), provider, endpoint)
    return None


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
    once ``client.max_retries`` retries have failed. Each retry is reported to
    ``moria.metrics.note_model_retry`` (counted when a policy server meters the call).

    The first attempt runs outside tenacity: setting up its retry loop cost about a sixth of
    the openai SDK's own CPU per call (``benchmarks/model_client.py``), and most calls succeed
    at once. A first attempt that raises ``TransientError`` hands that failure to the tenacity
    loop as the loop's own first attempt, so waits, logs, retry counts and the exhaustion
    message are those of a loop that made it.

    Within a call's ``agent_server.backends.limits.CallScope`` (a policy server's rate limits),
    every attempt first waits for the endpoint's limit, and a 429 pauses the endpoint.
    """
    scope = current_call.get()
    if scope is not None:
        attempt = _limited(attempt, scope)
    try:
        return await attempt(), 1
    except TransientError as failure:
        first: TransientError | None = failure

    async def replayed() -> T:
        """The first attempt's failure again (no new call), then real attempts."""
        nonlocal first
        if first is not None:
            failure, first = first, None
            raise failure
        return await attempt()

    return await _retry_loop(replayed, client, provider)


def _limited(attempt: Callable[[], Awaitable[T]], scope: CallScope,
             ) -> Callable[[], Awaitable[T]]:
    """``attempt`` passing ``scope``'s rate limit first and reporting a 429 back to it."""

    async def limited() -> T:
        await scope.before_attempt()
        try:
            return await attempt()
        except TransientError as failure:
            scope.after_failure(failure.status, failure.retry_after)
            raise

    return limited


async def _retry_loop(
    attempt: Callable[[], Awaitable[T]], client: ClientConfig, provider: str
) -> tuple[T, int]:
    """``call_with_retries``' tenacity loop over ``attempt``, from its first attempt."""

    def _before_sleep(state: RetryCallState) -> None:
        note_model_retry()  # moria_model_retries_total, when a server meters this call
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


async def complete_with_retries(
    attempt: Callable[[], Awaitable[Completion]],
    client: ClientConfig,
    provider: str,
    *,
    classify: Callable[[Exception], Exception],
    timeouts: tuple[type[BaseException], ...] = (TimeoutError,),
) -> Completion:
    """One completion: ``attempt`` run under the retry policy (``call_with_retries``).

    Each attempt's failure is classified before the policy sees it: ``BackendError`` and
    ``TransientError`` pass as raised; an exception in ``timeouts`` becomes
    ``TransientError("timed out after <client.timeout>s")``; any other exception becomes
    ``classify(exc)`` (a ``TransientError`` to retry or a ``BackendError`` to fail).
    Returns the completion with ``latency_s`` (wall seconds of the whole call, retries
    included) and ``attempts`` set. Raises ``BackendError`` as ``call_with_retries`` does.
    """

    async def classified() -> Completion:
        try:
            return await attempt()
        except (BackendError, TransientError):
            raise
        except timeouts as exc:
            raise TransientError(f"timed out after {client.timeout:g}s") from exc
        except Exception as exc:  # classified: TransientError or BackendError
            raise classify(exc) from exc

    start = time.perf_counter()
    completion, attempts = await call_with_retries(classified, client, provider)
    completion.latency_s = time.perf_counter() - start
    completion.attempts = attempts
    return completion
