"""What the fuzzers share: an event loop in a background thread that hosts the real servers
and their client channel, a driver that plays one request sequence on a raw stream, the checks
every example ends with (status codes and details, health, process memory), and the Hypothesis
strategies for the common message parts (Struct payloads, tensors, text).

Hypothesis runs its examples synchronously; every example hands one coroutine to the loop
(``BackgroundLoop.run``), so the servers, the channel and the control session live across
examples (started once per module).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
from google.protobuf import struct_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import strategies as st

from moria.clients import channel_for
from moria.common.v1 import types_pb2

T = TypeVar("T")

#: Status codes a client-caused stream failure may carry (the proto comments' stream-fatal
#: codes minus UNAVAILABLE, which only a draining server gives, and INTERNAL/UNKNOWN, which
#: mean the server broke). CANCELLED is ours when the example cancels its own call.
MALFORMED_INPUT_CODES = frozenset({
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
})

#: The most a status's details may weigh (UTF-8 bytes): room for any useful message, far below
#: the ~16 KiB of trailing metadata a transport accepts (a status over it reaches the client as
#: a transport error instead of the server's answer).
MAX_DETAILS_BYTES = 4096

#: The gRPC deadline of the control calls made while an example runs (``ControlProbe``): one
#: missed is a stall (the server's event loop held by the example, as 1.5M option keys once
#: held it for 110 s). The latency goal, 250 ms on a quiet machine, is what
#: ``benchmarks/hostile.py`` measures; here the suite shares 2 cores with itself and with
#: ``.ci/run``'s image builds (load 7), and the served loop shares the GIL with Hypothesis
#: drawing the next example, so a deadline only a held loop misses: 5 s (1 s was missed once
#: at load 7 with no example holding the loop).
STALL_DEADLINE_S = 5.0
#: The latency goal of a control call during any hostile request (docs/security.md): the
#: fuzzers count the calls over it (``LatencyTally``) and ``benchmarks/fuzz.py`` reports them;
#: a test never asserts on it (a timed assertion fails with the machine's load, not the code).
CONTROL_GOAL_S = 0.25
#: RSS growth over a fuzz run's baseline that fails it (the issue's bound for refused requests).
RSS_LIMIT = 200 * 2**20


class BackgroundLoop:
    """An asyncio loop running in a daemon thread; ``run(coro)`` blocks until it is done."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="fuzz-loop",
                                        daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        """Run ``coro`` on the loop and return its result (re-raising its exception)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        """Stop the loop and join the thread."""
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


@dataclass
class Outcome:
    """What one fuzzed stream did: the responses read (in order), the final status code
    (None when the stream ended OK or was left mid-way), its details, and whether the example
    cancelled the call itself."""

    responses: list[Any] = field(default_factory=list)
    code: grpc.StatusCode | None = None
    details: str = ""
    cancelled_by_us: bool = False


async def drive(open_call: Callable[[], Any], requests: list[Any], *, cancel: bool,
                final: Callable[[Any], bool]) -> Outcome:
    """Play ``requests`` on a new bidirectional call in lockstep (write one, read its answer),
    then half-close and read what is left, or, with ``cancel``, cancel the call instead (an
    early hang-up). A status that ends the call is recorded in the outcome (never raised).

    Writing stops after a response for which ``final`` is true (the answer after which the
    server ends the stream, e.g. to Close): a write racing with the end of the call is failed
    by the client library itself (INTERNAL "Internal error from Core") whatever the server
    did, so it would test the client, not the server."""
    call = open_call()
    out = Outcome()
    try:
        for request in requests:
            await call.write(request)
            response = await call.read()
            if response is grpc.aio.EOF:
                break
            out.responses.append(response)
            if final(response):
                break
        if cancel:
            call.cancel()
            out.cancelled_by_us = True
            return out
        await call.done_writing()
        while (response := await call.read()) is not grpc.aio.EOF:
            out.responses.append(response)
        out.code = await call.code()
        out.details = await call.details() or ""
    except grpc.aio.AioRpcError as err:
        out.code, out.details = err.code(), err.details() or ""
    except asyncio.InvalidStateError:  # a write after the server ended the call
        out.code = await call.code()
        out.details = await call.details() or ""
    return out


@dataclass
class LatencyTally:
    """Every control call of one fuzz test, over all its examples: how many, the longest
    answer (seconds) and how many took longer than ``CONTROL_GOAL_S``."""

    examples: int = 0
    calls: int = 0
    worst_s: float = 0.0
    over_goal: int = 0

    def add(self, answered_s: float) -> None:
        self.calls += 1
        self.worst_s = max(self.worst_s, answered_s)
        self.over_goal += answered_s > CONTROL_GOAL_S


#: The tally of the fuzz test running now (``tests/fuzz/conftest.py`` starts one per test and
#: writes it to ``MORIA_FUZZ_REPORT`` when that is set).
TALLY = LatencyTally()


class ControlProbe:
    """Calls ``call`` (a cheap control RPC: GetInfo) every ``interval`` seconds while an
    example runs, each under a ``deadline``: ``stalls`` counts the calls that missed it,
    ``worst`` is the longest answer (seconds). Use as ``async with ControlProbe(...) as
    probe:`` around the example, then assert ``probe.stalls == 0``."""

    def __init__(self, call: Callable[[float], Awaitable[Any]],
                 deadline: float = STALL_DEADLINE_S, interval: float = 0.05) -> None:
        self.call = call
        self.deadline = deadline
        self.interval = interval
        self.stalls = 0
        self.calls = 0
        self.worst = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            started = loop.time()
            try:
                await self.call(self.deadline)
            except grpc.aio.AioRpcError as exc:
                if exc.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise
                self.stalls += 1
            self.calls += 1
            self.worst = max(self.worst, loop.time() - started)
            TALLY.add(loop.time() - started)
            await asyncio.sleep(self.interval)

    async def __aenter__(self) -> ControlProbe:
        TALLY.examples += 1
        self._task = asyncio.ensure_future(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        if self._task.done():
            self._task.result()  # a control call that failed otherwise: raised here
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def bucket(self) -> str:
        """The worst answer time, as a Hypothesis event (coarse buckets)."""
        for limit in (0.01, 0.05, 0.25, 1.0):
            if self.worst < limit:
                return f"control call answered in < {limit * 1000:g} ms"
        return "control call answered in >= 1 s"


@dataclass(frozen=True)
class Padded:
    """A request to send with one field made large, described: ``field`` (a dotted path of
    ``request``, e.g. ``open.task``, ``begin.instruction`` or, through a map entry that must be
    there, ``step.actions.agent_0.text``) set to ``size`` characters, or,
    for a Struct field (``open.options``), given ``size`` keys. Strategies draw the
    description and the example builds it (``realized``) just before sending, so Hypothesis
    keeps a few bytes per example instead of megabytes."""

    request: Any
    field: str
    size: int

    def build(self) -> Any:
        out = type(self.request)()
        out.CopyFrom(self.request)
        *parents, name = self.field.split(".")
        holder = out
        for parent in parents:  # a message's field, or a map's entry
            holder = getattr(holder, parent) if hasattr(holder, "DESCRIPTOR") else holder[parent]
        if not hasattr(holder, "DESCRIPTOR"):  # a map of strings: its entry
            holder[name] = "x" * self.size
            return out
        target = getattr(holder, name)
        if isinstance(target, struct_pb2.Struct):
            for i in range(self.size):
                target.fields[f"k{i}"].number_value = i
        else:
            setattr(holder, name, "x" * self.size)
        return out

    def __repr__(self) -> str:
        return f"Padded({self.field} x {self.size:,}, {type(self.request).__name__})"


def realized(requests: list[Any]) -> list[Any]:
    """``requests`` with every ``Padded`` built."""
    return [r.build() if isinstance(r, Padded) else r for r in requests]


async def drive_watched(open_call: Callable[[], Any], requests: list[Any], *, cancel: bool,
                        final: Callable[[Any], bool],
                        control: Callable[[float], Awaitable[Any]]) -> tuple[Outcome, list[str]]:
    """``drive`` with a ``ControlProbe`` of ``control`` (a control call taking its deadline)
    around it, ``Padded`` requests built first. Fails when a control call stalled; returns the
    outcome and the Hypothesis events (how the stream ended, how fast the control calls
    were answered)."""
    built_requests = realized(requests)
    async with ControlProbe(control) as probe:
        outcome = await drive(open_call, built_requests, cancel=cancel, final=final)
    assert probe.stalls == 0, f"{probe.stalls} control call(s) stalled past the deadline"
    ended = "cancelled by us" if outcome.cancelled_by_us else outcome.code
    return outcome, [f"stream end: {ended}", probe.bucket()]


async def wait_for(predicate: Callable[[], Awaitable[bool]], attempts: int = 2000) -> bool:
    """Poll ``predicate`` (yielding 1 ms between tries) until it holds; False if it never
    does within ``attempts`` tries. Used to wait for the server's ``finally`` blocks."""
    for _ in range(attempts):
        if await predicate():
            return True
        await asyncio.sleep(0.001)
    return False


def server_errors(metrics: Any, service: str) -> dict[str, float]:
    """``moria_rpc_errors_total`` of ``service`` on a servicer's ``Metrics``, by code name:
    the statuses the server itself ended calls with (unhandled exceptions count UNKNOWN)."""
    out: dict[str, float] = {}
    for family in metrics.registry.collect():
        for sample in family.samples:
            if (sample.name == "moria_rpc_errors_total"
                    and sample.labels.get("service") == service):
                out[sample.labels["code"]] = out.get(sample.labels["code"], 0.0) + sample.value
    return out


async def assert_unharmed(outcome: Outcome, *, target: str, metrics: Any, service: str,
                          errors_before: dict[str, float],
                          active: Callable[[], Awaitable[int]], what: str) -> None:
    """The checks every example ends with: a failed stream carries a malformed-input code,
    capacity returns to the control stream alone (``active() == 1``, polled: the server's
    ``finally`` blocks may still run), the server counted no new UNKNOWN/INTERNAL, and health
    says SERVING. ``what`` names the capacity unit in the message ("sessions", "streams")."""
    if outcome.code is not None and outcome.code != grpc.StatusCode.OK:
        assert outcome.code in MALFORMED_INPUT_CODES, (outcome.code, outcome.details)

    async def at_baseline() -> bool:
        return await active() == 1

    assert await wait_for(at_baseline), f"{what} leaked: {await active()} active"
    after = server_errors(metrics, service)
    for code in ("UNKNOWN", "INTERNAL"):
        assert after.get(code, 0) == errors_before.get(code, 0), (code, outcome.details)
    await assert_serving(channel_for(target))


def assert_status(code: grpc.StatusCode, details: str, allowed: frozenset[grpc.StatusCode], *,
                  what: str, max_details: int = MAX_DETAILS_BYTES) -> None:
    """A call's final status is OK or in ``allowed``, and its details stay under
    ``max_details`` UTF-8 bytes (a message quoting client input must be bounded). ``what``
    names the call in the failure message."""
    assert code == grpc.StatusCode.OK or code in allowed, (
        f"{what} ended {code.name}: {details[:500]!r}")
    size = len(details.encode("utf-8", "surrogatepass"))
    assert size < max_details, (
        f"{what} ended {code.name} with {size:,} bytes of details (limit {max_details:,}): "
        f"{details[:300]!r}...")


async def assert_serving(channel: grpc.aio.Channel, timeout: float = 5.0) -> None:
    """The server behind ``channel`` says SERVING on ``grpc.health.v1``."""
    health = health_pb2_grpc.HealthStub(channel)
    status = await health.Check(health_pb2.HealthCheckRequest(), timeout=timeout)
    assert status.status == health_pb2.HealthCheckResponse.SERVING, status


def rss_bytes() -> int:
    """This process's resident set size now (``VmRSS`` of /proc/self/status; psutil where
    /proc is missing)."""
    try:
        with open(f"/proc/{os.getpid()}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import psutil

    return int(psutil.Process().memory_info().rss)


def release_free_memory() -> None:
    """Collect garbage cycles, then hand the C allocator's free pages back to the system
    (glibc ``malloc_trim``; skipped elsewhere), so the RSS counts live memory rather than what
    the allocator keeps cached after a large transient request."""
    import ctypes
    import ctypes.util
    import gc

    gc.collect()
    with contextlib.suppress(OSError, AttributeError, TypeError):
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)


class RssBound:
    """Process memory that must stay bounded over a whole fuzz run: ``check()`` fails once the
    RSS has grown ``limit`` bytes or more over the baseline taken at construction (take it
    after warm-up: imports, first calls, caches), counted after ``release_free_memory``."""

    #: How long ``check`` waits for memory over the limit to be freed before failing.
    SETTLE_S = 5.0

    def __init__(self, limit: int) -> None:
        self.limit = limit
        release_free_memory()
        self.baseline = rss_bytes()
        #: the largest growth seen, and the largest one measured after release_free_memory
        self.peak = self.peak_released = 0

    def check(self, what: str = "", *, release: bool = False) -> int:
        """The growth over the baseline now (bytes); fails at ``limit`` or more, measured
        again after ``release_free_memory`` before failing (at once with ``release``), for up
        to ``SETTLE_S`` seconds: gRPC's own threads free the buffers of calls just ended a
        moment after the calls end, so a transient large request is not counted as kept."""
        growth = rss_bytes() - self.baseline
        if growth >= self.limit or release:
            self.peak = max(self.peak, growth)
            settle_until = time.monotonic() + self.SETTLE_S
            while True:
                release_free_memory()
                growth = rss_bytes() - self.baseline
                if growth < self.limit or time.monotonic() >= settle_until:
                    break
                time.sleep(0.1)
            self.peak_released = max(self.peak_released, growth)
        self.peak = max(self.peak, growth)
        assert growth < self.limit, (
            f"RSS grew {growth / 2**20:,.0f} MiB over the baseline of "
            f"{self.baseline / 2**20:,.0f} MiB (limit {self.limit / 2**20:,.0f} MiB){what}")
        return growth


# ---- strategies ---------------------------------------------------------------------------

#: Unicode text, surrogates excluded (protobuf strings must be valid UTF-8).
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
#: Ints across the whole int64 range, with the edges well represented.
INT64 = st.one_of(st.integers(-(2**63), 2**63 - 1),
                  st.sampled_from([0, -1, 1, 2**31, -(2**63), 2**63 - 1]))
UINT64 = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([0, 1, 2**63, 2**64 - 1]))

_JSON_LEAF = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False, width=64),
                       st.integers(-(2**53), 2**53), TEXT)
JSON_VALUE = st.recursive(
    _JSON_LEAF,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(TEXT, inner, max_size=3)),
    max_leaves=8)


def struct_of(keys: st.SearchStrategy[str] = TEXT) -> st.SearchStrategy[struct_pb2.Struct]:
    """A Struct with random keys (``keys``) and random JSON values, nested."""

    def build(data: dict[str, Any]) -> struct_pb2.Struct:
        out = struct_pb2.Struct()
        out.update(data)
        return out

    return st.dictionaries(keys, JSON_VALUE, max_size=4).map(build)


@st.composite
def tensors(draw: st.DrawFn) -> types_pb2.Tensor:
    """A Tensor that is sometimes well formed, often not: unknown or unset dtype, negative or
    huge dimensions, byte counts off by a little or a lot."""
    dtype = draw(st.one_of(st.integers(0, 12), st.integers(13, 2**31 - 1)))
    shape = draw(st.lists(st.one_of(st.integers(0, 4), st.integers(-3, -1),
                                    st.integers(2**20, 2**40)), max_size=3))
    itemsize = {1: 1, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 4, 8: 8, 9: 8, 10: 2, 11: 4,
                12: 8}.get(dtype, 1)
    size = 1
    for dim in shape:
        size *= max(dim, 0)
    exact = size * itemsize if size * itemsize <= 256 else 0
    length = draw(st.one_of(st.just(exact), st.integers(0, 64)))
    return types_pb2.Tensor(dtype=dtype,  # type: ignore[arg-type]  # unknown values too
                            shape=shape, data=draw(st.binary(min_size=length, max_size=length)))
