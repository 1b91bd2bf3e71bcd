"""An async micro-batcher in front of a synchronous batch function (Moria's own scheduling).

Many episodes call a model at once. Engines such as vLLM's run a whole batch in one call far
faster than the same requests one by one, so ``Batcher`` collects concurrent requests and hands
them to ``generate_batch(list[Req]) -> list[Res]`` together:

- ``await batcher.submit(req)`` queues one request and waits for its own result;
- one dedicated worker thread takes the first waiting request, then keeps collecting until
  ``max_batch`` requests are in hand or ``max_wait_s`` has passed since that first request was
  submitted, and calls ``generate_batch`` once for them (in submission order);
- while a batch runs, new requests queue for the next one;
- an exception raised by ``generate_batch`` fails every request of that batch (each caller gets
  it) and no other; a result list of the wrong length is a ``BatchError`` for that batch;
- a request whose caller was cancelled before dispatch is dropped from the batch;
- ``close()`` fails every waiting caller with ``BatcherClosed``; later submits fail at once.

The worker thread is not tied to an event loop: callers on different loops (or threads running
their own loops) may share one batcher; each result is delivered on its caller's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

Req = TypeVar("Req")
Res = TypeVar("Res")

#: Default upper bound on requests per batch.
DEFAULT_MAX_BATCH = 64
#: Default time (seconds) to keep collecting after the first request of a batch arrived.
DEFAULT_MAX_WAIT_S = 0.005


class BatcherClosed(RuntimeError):
    """The batcher was closed before (or while) this request was served."""


class BatchError(RuntimeError):
    """``generate_batch`` broke its contract (for example returned a list of the wrong length)."""


@dataclass
class BatchStats:
    """Counters of one batcher: ``batches`` dispatched, ``requests`` dispatched in them,
    ``max_batch_size`` seen, ``failed_batches`` whose function raised, and ``size_counts``
    (batch size -> number of batches of that size)."""

    batches: int = 0
    requests: int = 0
    max_batch_size: int = 0
    failed_batches: int = 0
    size_counts: Counter[int] = field(default_factory=Counter)

    @property
    def mean_batch_size(self) -> float:
        """Requests per dispatched batch (0.0 before the first batch)."""
        return self.requests / self.batches if self.batches else 0.0


@dataclass
class _Pending(Generic[Req, Res]):
    request: Req
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Res]
    submitted: float


_STOP = object()


def _resolve(pending: _Pending[Req, Res], result: Res | None, error: BaseException | None) -> None:
    """Set the caller's future from its own loop (no-op if already done or the loop is gone)."""

    def _set() -> None:
        fut = pending.future
        if fut.done():
            return
        if error is not None:
            fut.set_exception(error)
        else:
            fut.set_result(result)  # type: ignore[arg-type]

    # a closed caller loop raises RuntimeError: nobody is waiting any more
    with contextlib.suppress(RuntimeError):
        pending.loop.call_soon_threadsafe(_set)


class Batcher(Generic[Req, Res]):
    """Collects concurrent ``submit`` calls into batches for ``generate_batch``.

    ``generate_batch`` receives a non-empty list of requests in submission order and must
    return one result per request, in the same order. It always runs in the batcher's single
    worker thread (started on the first submit), so it may keep thread-bound state such as a
    model created on its first call. ``max_batch`` >= 1; ``max_wait_s`` >= 0 seconds.
    """

    def __init__(
        self,
        generate_batch: Callable[[list[Req]], list[Res]],
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_wait_s: float = DEFAULT_MAX_WAIT_S,
        name: str = "batcher",
    ):
        """Raises ``ValueError`` for ``max_batch`` < 1 or a negative ``max_wait_s``."""
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if max_wait_s < 0:
            raise ValueError(f"max_wait_s must be >= 0, got {max_wait_s}")
        self._fn = generate_batch
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self.name = name
        self.stats = BatchStats()
        self._queue: queue.Queue[object] = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._running: list[_Pending[Req, Res]] = []  # the batch being generated now

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called."""
        return self._closed

    @property
    def queued(self) -> int:
        """Requests waiting for a batch (not counting the batch being generated)."""
        return self._queue.qsize()

    @property
    def worker_thread(self) -> threading.Thread | None:
        """The worker thread (None before the first submit)."""
        return self._thread

    async def submit(self, request: Req) -> Res:
        """Queue ``request`` and return its result once its batch is done.

        Raises whatever ``generate_batch`` raised for this request's batch, ``BatchError`` on a
        wrong-length result, and ``BatcherClosed`` when the batcher is or gets closed first.
        Cancelling the awaiting task drops the request if its batch has not started yet.
        """
        loop = asyncio.get_running_loop()
        pending: _Pending[Req, Res] = _Pending(
            request, loop, loop.create_future(), time.monotonic()
        )
        with self._lock:
            if self._closed:
                raise BatcherClosed(f"{self.name}: closed; no new requests are taken")
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name=f"{self.name}-worker", daemon=True
                )
                self._thread.start()
            self._queue.put(pending)
        return await pending.future

    def close(self) -> None:
        """Stop taking requests and fail every waiting caller with ``BatcherClosed``.

        Callers of a batch that is being generated right now are failed too; that call runs to
        its end in the worker thread, which then exits. Idempotent; never blocks.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            running = list(self._running)
            waiting: list[_Pending[Req, Res]] = []
            while True:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if isinstance(item, _Pending):
                    waiting.append(item)
            self._queue.put(_STOP)
        error = BatcherClosed(f"{self.name}: closed before the request was served")
        for pending in running + waiting:
            _resolve(pending, None, error)

    def join(self, timeout: float | None = None) -> bool:
        """Wait (blocking) for the worker thread to end after ``close()``; True when it ended."""
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    async def aclose(self, timeout: float | None = None) -> None:
        """``close()``, then wait off the event loop for the worker to finish its current batch
        (at most ``timeout`` seconds; None waits as long as it takes)."""
        self.close()
        await asyncio.to_thread(self.join, timeout)

    # ---- worker thread ----

    def _collect(self) -> list[_Pending[Req, Res]] | None:
        """The next batch (submission order), or None when the batcher is stopping."""
        first = self._queue.get()
        if first is _STOP:
            return None
        assert isinstance(first, _Pending)
        batch: list[_Pending[Req, Res]] = [first]
        deadline = first.submitted + self.max_wait_s
        while len(batch) < self.max_batch:
            remaining = deadline - time.monotonic()
            try:
                item = (
                    self._queue.get(timeout=remaining) if remaining > 0
                    else self._queue.get_nowait()
                )
            except queue.Empty:
                break
            if item is _STOP:
                self._queue.put(_STOP)  # end after this batch
                break
            assert isinstance(item, _Pending)
            batch.append(item)
        return batch

    def _work(self) -> None:
        while True:
            batch = self._collect()
            if batch is None:
                return
            live = [p for p in batch if not p.future.cancelled()]
            if not live:
                continue
            with self._lock:
                if self._closed:  # close() raced with the collection: fail, don't run
                    error = BatcherClosed(f"{self.name}: closed before the request was served")
                    for pending in live:
                        _resolve(pending, None, error)
                    continue
                self._running = live
            self._run(live)
            with self._lock:
                self._running = []

    def _run(self, batch: list[_Pending[Req, Res]]) -> None:
        size = len(batch)
        stats = self.stats
        stats.batches += 1
        stats.requests += size
        stats.max_batch_size = max(stats.max_batch_size, size)
        stats.size_counts[size] += 1
        try:
            results = self._fn([p.request for p in batch])
            if not isinstance(results, list) or len(results) != size:
                got = len(results) if hasattr(results, "__len__") else type(results).__name__
                raise BatchError(
                    f"{self.name}: generate_batch returned {got} results for {size} requests"
                )
        except BaseException as exc:  # every caller of this batch gets the exception
            stats.failed_batches += 1
            log.debug("%s: batch of %d failed: %r", self.name, size, exc)
            for pending in batch:
                _resolve(pending, None, exc)
            if not isinstance(exc, Exception):  # KeyboardInterrupt / SystemExit: stop working
                raise
            return
        for pending, result in zip(batch, results, strict=True):
            _resolve(pending, result, None)
