"""The event loop every Moria process runs on.

Servers, the orchestrator's commands and the worker run their top-level coroutine through
``run``: uvloop (libuv) when it is installed, as it is with Moria on Linux and macOS, else the
standard asyncio loop. On workload A (50 BabyAI episodes against a 100 ms model) uvloop cut the
CPU of the orchestrator, the Env server and the Policy server by 18%, 27% and 18% against
asyncio's selector loop, in one pair of runs on a busy machine (``benchmarks/workload_a.py``).
``MORIA_EVENT_LOOP=asyncio`` picks the standard
loop (to rule uvloop out when chasing a bug); ``uvloop`` or unset picks uvloop where installed.

Use it for a process's one top-level loop only. Loops started on other threads beside a running
gRPC loop (the orchestrator service's runs) keep ``asyncio.run``: grpc aio has one poller per
process, and under uvloop it handed a finished loop's events to that closed loop, dropping the
live loop's own.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

#: Names ``MORIA_EVENT_LOOP`` accepts.
LOOPS = ("uvloop", "asyncio")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """The event-loop constructor ``run`` uses: uvloop's, or None for asyncio's default.
    Raises ValueError for a ``MORIA_EVENT_LOOP`` other than ``LOOPS``."""
    choice = os.environ.get("MORIA_EVENT_LOOP", "uvloop").strip().lower() or "uvloop"
    if choice not in LOOPS:
        raise ValueError(f"MORIA_EVENT_LOOP={choice!r}: expected one of {', '.join(LOOPS)}")
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:  # Windows, or a trimmed install: the standard loop
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` to completion on a new event loop (as ``asyncio.run`` does: the loop is
    closed and async generators shut down afterwards) and return its result; whatever ``main``
    raises propagates. Raises ValueError for a bad ``MORIA_EVENT_LOOP`` before starting."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
