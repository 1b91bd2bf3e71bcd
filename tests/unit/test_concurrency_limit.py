"""Per-endpoint concurrency limit of model calls (agent_server.backends.base.ConcurrencyLimited)."""

from __future__ import annotations

import asyncio

import pytest

from agent_server.backends.base import (
    Backend,
    ChatMessage,
    Completion,
    ConcurrencyLimited,
    GenerateParams,
)


class _Gate(Backend):
    """Holds every call until released; records the most calls seen in flight at once."""

    name = "gate"

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0
        self.release = asyncio.Event()

    async def complete(self, messages: list[ChatMessage], params: GenerateParams) -> Completion:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        await self.release.wait()
        self.in_flight -= 1
        return Completion(text=messages[-1].content)


async def test_at_most_limit_calls_in_flight_and_all_finish() -> None:
    gate = _Gate()
    limited = ConcurrencyLimited(gate, 3)
    calls = [asyncio.create_task(limited.complete([ChatMessage("user", f"m{i}")],
                                                  GenerateParams())) for i in range(10)]
    for _ in range(20):
        await asyncio.sleep(0)
    assert (gate.in_flight, limited.in_flight, limited.waiting) == (3, 3, 7)
    gate.release.set()
    results = await asyncio.gather(*calls)
    assert [r.text for r in results] == [f"m{i}" for i in range(10)]
    assert gate.peak == 3 and limited.in_flight == 0 and limited.waiting == 0


async def test_a_cancelled_waiter_gives_back_nothing_it_did_not_take() -> None:
    gate = _Gate()
    limited = ConcurrencyLimited(gate, 1)
    first = asyncio.create_task(limited.complete([ChatMessage("user", "a")], GenerateParams()))
    second = asyncio.create_task(limited.complete([ChatMessage("user", "b")], GenerateParams()))
    for _ in range(5):
        await asyncio.sleep(0)
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    gate.release.set()
    assert (await first).text == "a"
    assert limited.waiting == 0 and limited.in_flight == 0
    third = await limited.complete([ChatMessage("user", "c")], GenerateParams())
    assert third.text == "c" and gate.peak == 1


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match=">= 1"):
        ConcurrencyLimited(_Gate(), 0)


def test_a_run_with_more_workers_than_model_slots_says_so() -> None:
    """eval.num_workers above what the agent servers take at once (client.max_concurrency per
    server) is printed as a note, never a silent throttle; scripted players call no model."""
    from rich.console import Console

    from orchestrator.core.runner import _note_model_call_cap
    from orchestrator.plan.spec import load_spec

    def note(*overrides: str, replicas: int = 1) -> str:
        console = Console(record=True, width=200)
        _note_model_call_cap(load_spec(None, list(overrides)), replicas, console)
        return console.export_text()

    capped = note("eval.num_workers=100", "client.max_concurrency=64")
    assert "eval.num_workers=100 but at most 64 model calls run at once" in capped
    assert note("eval.num_workers=100", "client.max_concurrency=64", replicas=2) == ""
    assert note("eval.num_workers=64", "client.max_concurrency=64") == ""
    assert note("eval.num_workers=100", "client.max_concurrency=64", "agent.type=random") == ""
