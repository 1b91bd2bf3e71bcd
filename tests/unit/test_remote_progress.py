"""``moria eval --remote``'s progress when stderr is not a terminal: plain ``progress:`` lines
from the run's events, and a heartbeat line while no event comes."""

from __future__ import annotations

import asyncio
import io

import pytest
from rich.console import Console

from moria.orchestrator.v1 import orchestrator_service_pb2 as pb
from orchestrator.apps.remote import _Tracker
from orchestrator.report.progress import progress_bar
from orchestrator.store.run_events import to_struct


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _tracker(clock: Clock, interval_s: float) -> tuple[_Tracker, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    progress = progress_bar(console, False, eta=False)
    return _Tracker(progress, 3, 1, plain=True, interval_s=interval_s, clock=clock), out


def test_plain_lines_follow_the_episode_events() -> None:
    clock = Clock()
    tracker, out = _tracker(clock, 15.0)
    clock.now += 65
    tracker(pb.RunEvent(sequence=4, type="episode_finished", payload=to_struct({
        "env": "babyai", "task": "babyai/BabyAI-GoToObj-v0", "episode_index": 1,
        "end_reason": "terminated", "progression": 1.0, "num_steps": 7,
        "episodes_done": 2, "episodes_total": 3})))
    tracker(pb.RunEvent(sequence=5, type="completed", payload=to_struct({
        "episodes_done": 3, "episodes_total": 3})))
    assert out.getvalue().splitlines() == [
        "progress: following | episodes 1/3 | elapsed 0:00:00",
        "progress: episode babyai/BabyAI-GoToObj-v0 #1: terminated, progression 1.00, 7 steps"
        " | episodes 2/3 | elapsed 0:01:05",
        "progress: completed | episodes 3/3 | elapsed 0:01:05"]
    assert tracker.final is not None and tracker.final.type == "completed"


def test_failed_and_retried_episodes_show_in_the_plain_lines() -> None:
    tracker, out = _tracker(Clock(), 15.0)
    tracker(pb.RunEvent(sequence=2, type="episode_retried", payload=to_struct({
        "env": "babyai", "task": "babyai/goto", "episode_index": 0,
        "error": "env server UNAVAILABLE"})))
    tracker(pb.RunEvent(sequence=3, type="episode_finished", payload=to_struct({
        "env": "babyai", "task": "babyai/goto", "episode_index": 0, "end_reason": "env_error",
        "num_steps": 2, "episodes_done": 1, "episodes_total": 3})))
    lines = out.getvalue().splitlines()
    assert lines[1] == "progress: retry babyai/goto #0 | episodes 1/3 | elapsed 0:00:00"
    assert "UNAVAILABLE" not in out.getvalue()  # plain lines carry no error text
    assert lines[2] == ("progress: episode babyai/goto #0: env_error, 2 steps | episodes 1/3 "
                        "(1 failed) | elapsed 0:00:00")


def test_heartbeat_writes_a_line_per_interval_without_events() -> None:
    clock = Clock()
    tracker, out = _tracker(clock, 15.0)
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock.now += seconds
        if len(waits) == 2:
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(tracker.heartbeat(sleep))
    assert waits == [15.0, 15.0]
    assert out.getvalue().splitlines()[1:] == [
        "progress: running | episodes 1/3 | elapsed 0:00:15"]


def test_no_heartbeat_with_interval_zero_or_on_a_terminal() -> None:
    tracker, out = _tracker(Clock(), 0.0)
    asyncio.run(tracker.heartbeat())  # returns at once
    tracker.lines.enabled = False  # a terminal: the bar, no plain lines
    tracker.lines.line("running", force=True)
    assert out.getvalue().splitlines() == ["progress: following | episodes 1/3 | elapsed 0:00:00"]
