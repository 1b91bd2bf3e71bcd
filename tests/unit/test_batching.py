"""The async micro-batcher (agent_server.backends.batching) with a plain Python batch function.

Batch composition is made deterministic by a gate: the first batch blocks inside the batch
function on an Event the test controls, the test queues the other requests meanwhile, and only
then releases the gate. No assertion depends on timing.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from agent_server.backends.batching import Batcher, BatcherClosed, BatchError


class Recorder:
    """A batch function that records every batch (and its thread) and answers ``request * 10``.

    The first call blocks until ``release`` is set (``started`` tells that it is inside).
    ``fail_if`` makes a batch raise ``ValueError`` when it contains that request;
    ``short_if`` makes it return one result too few when it contains that request.
    """

    def __init__(self, *, gate: bool = True, fail_if: int | None = None,
                 short_if: int | None = None):
        self.batches: list[list[int]] = []
        self.threads: set[int] = set()
        self.started = threading.Event()
        self.release = threading.Event()
        if not gate:
            self.release.set()
        self.fail_if = fail_if
        self.short_if = short_if

    def __call__(self, batch: list[int]) -> list[int]:
        self.batches.append(list(batch))
        self.threads.add(threading.get_ident())
        if len(self.batches) == 1:
            self.started.set()
            assert self.release.wait(10), "test never released the first batch"
        if self.fail_if is not None and self.fail_if in batch:
            raise ValueError(f"bad request {self.fail_if}")
        results = [r * 10 for r in batch]
        if self.short_if is not None and self.short_if in batch:
            results.pop()
        return results


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    rec = Recorder()
    yield rec
    rec.release.set()  # never leave a worker blocked


async def _queued(batcher: Batcher[int, int], n: int) -> None:
    """Let the event loop run the submitting tasks until ``n`` requests wait in the queue."""
    for _ in range(1000):
        if batcher.queued >= n:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"only {batcher.queued} of {n} requests were queued")


async def _first_batch_blocked(
    batcher: Batcher[int, int], rec: Recorder
) -> asyncio.Task[int]:
    """Submit request 0 and wait until its (single-request) batch is blocked on the gate."""
    first = asyncio.create_task(batcher.submit(0))
    assert await asyncio.to_thread(rec.started.wait, 10)
    return first


async def test_concurrent_submits_are_batched_and_each_caller_gets_its_result(
    recorder: Recorder,
) -> None:
    batcher: Batcher[int, int] = Batcher(recorder, max_batch=8, max_wait_s=0.005)
    first = await _first_batch_blocked(batcher, recorder)
    rest = [asyncio.create_task(batcher.submit(i)) for i in range(1, 32)]
    await _queued(batcher, 31)
    recorder.release.set()

    results = await asyncio.gather(first, *rest)

    assert results == [i * 10 for i in range(32)]
    sizes = [len(b) for b in recorder.batches]
    assert all(1 <= s <= 8 for s in sizes), sizes
    assert max(sizes) > 1, f"nothing was batched: {sizes}"
    # 31 requests were waiting when the gate opened: they go in full batches of 8 (the last 7)
    assert sizes == [1, 8, 8, 8, 7]
    assert sum(sizes) == 32
    stats = batcher.stats
    assert (stats.batches, stats.requests, stats.max_batch_size) == (5, 32, 8)
    assert stats.size_counts == {1: 1, 8: 3, 7: 1}
    assert stats.mean_batch_size == pytest.approx(32 / 5)
    batcher.close()


async def test_submission_order_is_kept_within_and_across_batches(recorder: Recorder) -> None:
    batcher: Batcher[int, int] = Batcher(recorder, max_batch=5, max_wait_s=0.005)
    first = await _first_batch_blocked(batcher, recorder)
    order = [7, 3, 11, 2, 9, 4, 8, 1, 6, 5]
    tasks = [asyncio.create_task(batcher.submit(i)) for i in order]
    await _queued(batcher, len(order))
    recorder.release.set()

    results = await asyncio.gather(*tasks)

    assert results == [i * 10 for i in order]
    assert await first == 0
    assert recorder.batches == [[0], order[:5], order[5:]]
    batcher.close()


async def test_batch_function_runs_in_one_worker_thread(recorder: Recorder) -> None:
    batcher: Batcher[int, int] = Batcher(recorder, max_batch=2, max_wait_s=0.005)
    first = await _first_batch_blocked(batcher, recorder)
    tasks = [asyncio.create_task(batcher.submit(i)) for i in range(1, 7)]
    await _queued(batcher, 6)
    recorder.release.set()
    await asyncio.gather(first, *tasks)

    assert len(recorder.batches) == 4
    assert len(recorder.threads) == 1
    worker = batcher.worker_thread
    assert worker is not None and worker.ident in recorder.threads
    assert threading.get_ident() not in recorder.threads
    batcher.close()
    assert await asyncio.to_thread(batcher.join, 10)


async def test_an_error_fails_its_own_batch_only() -> None:
    rec = Recorder(fail_if=3)
    batcher: Batcher[int, int] = Batcher(rec, max_batch=4, max_wait_s=0.005)
    try:
        first = await _first_batch_blocked(batcher, rec)
        tasks = [asyncio.create_task(batcher.submit(i)) for i in range(1, 9)]
        await _queued(batcher, 8)
        rec.release.set()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        rec.release.set()

    assert await first == 0
    assert rec.batches == [[0], [1, 2, 3, 4], [5, 6, 7, 8]]
    for outcome in outcomes[:4]:  # every caller of the failing batch gets the exception
        assert isinstance(outcome, ValueError)
        assert str(outcome) == "bad request 3"
    assert outcomes[4:] == [50, 60, 70, 80]
    assert batcher.stats.failed_batches == 1
    # the batcher keeps working after a failed batch
    assert await batcher.submit(12) == 120
    batcher.close()


async def test_a_wrong_length_result_is_an_error_for_that_batch() -> None:
    rec = Recorder(short_if=2)
    batcher: Batcher[int, int] = Batcher(rec, max_batch=3, max_wait_s=0.005, name="short")
    try:
        first = await _first_batch_blocked(batcher, rec)
        tasks = [asyncio.create_task(batcher.submit(i)) for i in range(1, 7)]
        await _queued(batcher, 6)
        rec.release.set()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        rec.release.set()

    assert await first == 0
    assert rec.batches == [[0], [1, 2, 3], [4, 5, 6]]
    for outcome in outcomes[:3]:
        assert isinstance(outcome, BatchError)
        assert "returned 2 results for 3 requests" in str(outcome)
        assert str(outcome).startswith("short:")
    assert outcomes[3:] == [40, 50, 60]
    batcher.close()


async def test_a_lone_request_is_dispatched_without_a_full_batch() -> None:
    rec = Recorder(gate=False)
    batcher: Batcher[int, int] = Batcher(rec, max_batch=64, max_wait_s=0.001)
    assert await batcher.submit(4) == 40
    assert await batcher.submit(5) == 50
    assert rec.batches == [[4], [5]]
    batcher.close()


async def test_close_fails_running_and_waiting_callers_and_later_submits(
    recorder: Recorder,
) -> None:
    batcher: Batcher[int, int] = Batcher(recorder, max_batch=4, max_wait_s=0.005, name="engine")
    first = await _first_batch_blocked(batcher, recorder)
    waiting = [asyncio.create_task(batcher.submit(i)) for i in range(1, 6)]
    await _queued(batcher, 5)

    batcher.close()
    outcomes = await asyncio.gather(first, *waiting, return_exceptions=True)

    assert len(outcomes) == 6
    for outcome in outcomes:
        assert isinstance(outcome, BatcherClosed)
        assert "engine: closed" in str(outcome)
    with pytest.raises(BatcherClosed, match="closed; no new requests"):
        await batcher.submit(99)
    assert batcher.closed
    batcher.close()  # idempotent

    recorder.release.set()  # the running batch ends; its results go nowhere; the worker exits
    assert await asyncio.to_thread(batcher.join, 10)
    assert recorder.batches == [[0]]  # the queued requests never reached the batch function


async def test_aclose_waits_for_the_worker() -> None:
    rec = Recorder(gate=False)
    batcher: Batcher[int, int] = Batcher(rec, max_batch=4, max_wait_s=0.001)
    assert await batcher.submit(1) == 10
    await batcher.aclose(timeout=10)
    worker = batcher.worker_thread
    assert worker is not None and not worker.is_alive()


async def test_close_before_any_submit_is_fine() -> None:
    batcher: Batcher[int, int] = Batcher(Recorder(gate=False))
    batcher.close()
    assert batcher.join(0)
    with pytest.raises(BatcherClosed):
        await batcher.submit(1)
    assert batcher.worker_thread is None


async def test_a_cancelled_caller_is_dropped_before_dispatch(recorder: Recorder) -> None:
    batcher: Batcher[int, int] = Batcher(recorder, max_batch=8, max_wait_s=0.005)
    first = await _first_batch_blocked(batcher, recorder)
    keep = asyncio.create_task(batcher.submit(1))
    drop = asyncio.create_task(batcher.submit(2))
    keep_too = asyncio.create_task(batcher.submit(3))
    await _queued(batcher, 3)
    drop.cancel()
    with pytest.raises(asyncio.CancelledError):
        await drop
    recorder.release.set()

    assert await asyncio.gather(first, keep, keep_too) == [0, 10, 30]
    assert recorder.batches == [[0], [1, 3]]
    batcher.close()


def test_callers_on_different_event_loops_share_one_batcher() -> None:
    rec = Recorder(gate=False)
    batcher: Batcher[int, int] = Batcher(rec, max_batch=16, max_wait_s=0.002)
    results: dict[int, list[int]] = {}

    def episode_loop(base: int) -> None:
        async def main() -> list[int]:
            return list(await asyncio.gather(*(batcher.submit(base + i) for i in range(10))))

        results[base] = asyncio.run(main())

    threads = [threading.Thread(target=episode_loop, args=(b,)) for b in (100, 200, 300)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    batcher.close()

    for base in (100, 200, 300):
        assert results[base] == [(base + i) * 10 for i in range(10)]
    assert batcher.stats.requests == 30
    assert sorted(r for b in rec.batches for r in b) == sorted(
        base + i for base in (100, 200, 300) for i in range(10)
    )


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        Batcher(Recorder(gate=False), max_batch=0)
    with pytest.raises(ValueError, match="max_wait_s"):
        Batcher(Recorder(gate=False), max_wait_s=-1.0)
