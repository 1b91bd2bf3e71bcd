"""orchestrator.core.sinks.ProgressSink and orchestrator.report.progress: a run's progress counts
env steps (against the planned upper bound), tokens and invalid actions; a terminal gets rich
bars, anything else plain ``progress:`` lines at events and at most ``interval_s`` apart.

Time is a fake clock moved by hand: no assert depends on how fast the test runs."""

from __future__ import annotations

import asyncio
import io
import re

import pytest
from rich.console import Console

from moria.records import EpisodeRecord, StepRecord
from orchestrator.core.events import EventStream, RunEvent
from orchestrator.core.sinks import ProgressSink
from orchestrator.report.progress import (
    DEFAULT_PLAIN_INTERVAL_S,
    PLAIN_INTERVAL_ENV,
    StepTally,
    plain_interval,
)

ENV, TASK = "babyai", "BabyAI-MixedTrainLocal-v0/goto"
LINE = re.compile(r"^progress: (?P<what>.+?) \| episodes (?P<done>\d+)/(?P<total>\d+) \| "
                  r"steps (?P<steps>\d+)/(?P<planned>\d+|\?) \| tokens in (?P<tin>\d+) "
                  r"out (?P<tout>\d+) \| invalid actions (?P<invalid>\d+)/(?P<actions>\d+) \| "
                  r"elapsed \d+:\d\d:\d\d$")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def started(planned: int = 1, skipped: int = 0, **extra: object) -> RunEvent:
    return RunEvent("run_started", {"planned": planned, "skipped": skipped, "run_seed": 0,
                                    **extra})


def episode_started(index: int = 0) -> RunEvent:
    return RunEvent("episode_started", {"env": ENV, "task": TASK, "episode_index": index,
                                        "seed": 1, "attempt": 0, "env_server": "unix:/e",
                                        "policy_server": "unix:/p"})


def step(index: int, episode: int = 0, *, valid: bool = True, cap: int | None = None,
         agent: str = "agent_0") -> RunEvent:
    fields: dict[str, object] = {"env": ENV, "task": TASK, "episode_index": episode}
    if cap is not None:
        fields["max_steps"] = cap
    return RunEvent("step", fields, step=StepRecord(
        step=index, agent_id=agent, valid=valid, input_tokens=100, output_tokens=3,
        raw_completion="SECRET-COMPLETION sk-not-a-key", observation="SECRET-OBSERVATION"))


def finished(episode: int = 0, steps: int = 3) -> RunEvent:
    return RunEvent("episode_finished", episode=EpisodeRecord(
        run_id="r1", env=ENV, task=TASK, episode_index=episode, seed=1,
        end_reason="truncated", num_steps=steps, error="SECRET-ERROR"))


def plain_sink(interval_s: float = 30.0) -> tuple[ProgressSink, io.StringIO, FakeClock]:
    out = io.StringIO()
    clock = FakeClock()
    console = Console(file=out, force_terminal=False, width=80)
    return ProgressSink(console, True, interval_s=interval_s, clock=clock), out, clock


def lines(out: io.StringIO) -> list[str]:
    return out.getvalue().splitlines()


# -- the tally -------------------------------------------------------------------------------
def test_tally_counts_env_steps_once_for_simultaneous_agents_and_tightens_the_plan() -> None:
    tally = StepTally()
    tally.begin(2, step_cap=10)
    assert tally.steps_planned == 20
    key0, key1 = (ENV, TASK, 0), (ENV, TASK, 1)
    tally.episode_started(key0)
    for agent_valid in (True, False):  # two agents acting in env step 0
        tally.step(key0, 0, input_tokens=5, output_tokens=1, valid=agent_valid)
    tally.step(key0, 1, input_tokens=5, output_tokens=1)
    assert (tally.steps_done, tally.actions, tally.invalid_actions) == (2, 3, 1)
    assert (tally.input_tokens, tally.output_tokens) == (15, 3)
    tally.episode_finished(key0, 2)  # ended early: the plan shrinks to what it took
    assert tally.steps_planned == 2 + 10
    tally.episode_started(key1)
    tally.step(key1, 0, cap=4)  # the env announced a smaller cap for this one
    assert tally.steps_planned == 2 + 4
    tally.episode_retried(key1)  # its steps are played again
    assert tally.steps_done == 2 and tally.steps_planned == 2 + 10
    tally.episode_started(key1)
    tally.episode_finished(key1, 4)
    assert tally.steps_done == tally.steps_planned == 6
    assert tally.status() == ("episodes 2/2 | steps 6/6 | tokens in 15 out 3 | "
                              "invalid actions 1/4")  # the cut attempt's turn counts


def test_tally_without_a_cap_learns_it_from_the_env() -> None:
    tally = StepTally()
    tally.begin(3)
    assert tally.steps_planned is None and "steps 0/? |" in tally.status()
    tally.episode_started((ENV, TASK, 0))
    tally.step((ENV, TASK, 0), 0, cap=64)
    assert tally.steps_planned == 3 * 64


def test_plain_interval_from_argument_environment_or_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PLAIN_INTERVAL_ENV, raising=False)
    assert plain_interval() == DEFAULT_PLAIN_INTERVAL_S
    monkeypatch.setenv(PLAIN_INTERVAL_ENV, "2.5")
    assert plain_interval() == 2.5
    assert plain_interval(0) == 0.0
    monkeypatch.setenv(PLAIN_INTERVAL_ENV, "soon")
    assert plain_interval() == DEFAULT_PLAIN_INTERVAL_S


# -- plain lines -----------------------------------------------------------------------------
def test_plain_lines_at_start_each_episode_end_and_only_after_the_interval() -> None:
    sink, out, clock = plain_sink(interval_s=30.0)
    with sink:
        sink(started(planned=2, max_steps=5))
        sink(episode_started(0))
        sink(step(0))
        clock.now += 10
        sink(step(1))  # 10 s after the last line: no line
        clock.now += 25
        sink(step(2, valid=False))  # 35 s: a line
        sink(finished(0, steps=3))
        sink(RunEvent("run_finished", {"ran": 1, "skipped": 0}))
    got = [LINE.match(line) for line in lines(out)]
    assert all(got), lines(out)
    parsed = [m.groupdict() for m in got if m]
    assert [p["what"] for p in parsed] == [
        "started", "running", "episode babyai/goto #0: truncated, progression 0.00, 3 steps",
        "finished"]
    assert [(p["steps"], p["planned"]) for p in parsed] == [
        ("0", "10"), ("3", "10"), ("3", "8"), ("3", "8")]
    assert parsed[1]["invalid"] == "1" and parsed[1]["actions"] == "3"
    assert parsed[1]["tin"] == "300" and parsed[1]["tout"] == "9"
    assert "━" not in out.getvalue()  # no bar drawn into a log


def test_plain_lines_every_step_with_interval_zero_and_no_secrets() -> None:
    sink, out, _ = plain_sink(interval_s=0)
    with sink:
        sink(started(planned=1))
        sink(episode_started(0))
        for index in range(4):
            sink(step(index, cap=64))
        sink(finished(0, steps=4))
    running = [m.groupdict() for line in lines(out) if (m := LINE.match(line))
               and m["what"] == "running"]
    assert [r["steps"] for r in running] == ["1", "2", "3", "4"]
    assert [r["planned"] for r in running] == ["64"] * 4
    assert "SECRET" not in out.getvalue() and "sk-" not in out.getvalue()


def test_no_progress_writes_nothing() -> None:
    out = io.StringIO()
    for terminal in (False, True):
        sink = ProgressSink(Console(file=out, force_terminal=terminal), False, interval_s=0)
        with sink:
            sink(started())
            sink(episode_started(0))
            sink(step(0))
            sink(finished(0, steps=1))
    assert out.getvalue() == ""


async def test_the_heartbeat_writes_while_no_event_comes() -> None:
    out = io.StringIO()
    clock = FakeClock()

    async def fake_sleep(seconds: float) -> None:  # time passes only when the beat waits
        clock.now += seconds
        await asyncio.sleep(0)

    sink = ProgressSink(Console(file=out, force_terminal=False), True, interval_s=30.0,
                        clock=clock, sleep=fake_sleep)
    with sink:
        await EventStream([sink]).emit("run_started", planned=1, skipped=0, run_seed=0)
        assert sink._heartbeat is not None
        for _ in range(3):  # no event comes: a slow model call
            await asyncio.sleep(0)
    assert sink._heartbeat is None
    beats = [line for line in lines(out) if line.startswith("progress: running |")]
    assert beats and beats[0].endswith("elapsed 0:00:30"), lines(out)


# -- the terminal bar ------------------------------------------------------------------------
def test_terminal_bar_counts_steps_tokens_and_invalid_actions() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160, record=True)
    sink = ProgressSink(console, True, interval_s=0, clock=FakeClock())
    with sink:
        sink(started(planned=1))
        sink(episode_started(0))
        sink(step(0, cap=64))
        sink(step(1, cap=64, valid=False))
        bars = {task.description: task for task in sink.progress.tasks}
        assert bars["steps"].completed == 2 and bars["steps"].total == 64
        assert bars["episodes"].completed == 0 and bars["episodes"].total == 1
        assert bars["steps"].fields["info"] == "invalid 1/2, tokens 200 in / 6 out"
        sink(step(2, cap=64))
        sink(finished(0, steps=3))
        assert bars["steps"].completed == 3 and bars["steps"].total == 3
    text = console.export_text()
    assert "progress:" not in text  # a terminal gets the bars, not the plain lines
    assert re.search(r"steps .*3/3 .*invalid 1/3, tokens 300 in / 9 out", text), text
    assert re.search(r"episodes .*1/1 .*last: babyai/goto #0: truncated, progression 0.00",
                     text), text
