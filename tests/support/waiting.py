"""Deadline-bounded polling for tests that wait on another process, thread or task.

Every wait names what it waits for and has a deadline: when the deadline passes the test fails
with ``AssertionError("timed out after 30 s waiting for <what>")`` (plus the last value seen,
when the predicate returned something falsy other than ``False``/``None``), never hangs and
never goes on as if the state had been reached.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, overload

T = TypeVar("T")

#: Default deadline: generous, because the suite runs on 2 shared cores next to other jobs.
DEFAULT_TIMEOUT_S = 60.0


def _timed_out(what: str, timeout: float, last: object) -> AssertionError:
    detail = "" if last is None or last is False else f" (last value: {last!r})"
    return AssertionError(f"timed out after {timeout:g} s waiting for {what}{detail}")


def wait_until(predicate: Callable[[], T | None], what: str, *,
               timeout: float = DEFAULT_TIMEOUT_S, interval: float = 0.05) -> T:
    """Call ``predicate`` every ``interval`` seconds until it returns a truthy value, and return
    that value. Raises AssertionError naming ``what`` when ``timeout`` seconds pass first.

    An exception raised by ``predicate`` propagates at once (a predicate that wants to fail
    fast, e.g. because the process it waits on has exited, raises)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, value)
        time.sleep(interval)


@overload
async def async_wait_until(predicate: Callable[[], Awaitable[T | None]], what: str, *,
                           timeout: float = ..., interval: float = ...) -> T: ...


@overload
async def async_wait_until(predicate: Callable[[], T | None], what: str, *,
                           timeout: float = ..., interval: float = ...) -> T: ...


async def async_wait_until(predicate: Callable[[], Any], what: str, *,
                           timeout: float = DEFAULT_TIMEOUT_S, interval: float = 0.05) -> Any:
    """``wait_until`` for coroutines: ``predicate`` may be a plain or an async callable; the
    pause between calls is an ``asyncio.sleep``, so the event loop keeps running. Raises
    AssertionError naming ``what`` when ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, value)
        await asyncio.sleep(interval)
