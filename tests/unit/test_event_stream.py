"""orchestrator.core.events: one stream, subscribers called in order, async sinks awaited,
unknown kinds refused; orchestrator.core.sinks turn events into telemetry lines and files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moria.records import EpisodeRecord, StepRecord
from orchestrator.core.events import EVENT_KINDS, EventStream, RunEvent
from orchestrator.core.sinks import EpisodeFilesSink, TelemetrySink
from orchestrator.store.episodes import episode_paths
from orchestrator.store.telemetry import TelemetryWriter

TASK = "BabyAI-MixedTrainLocal-v0/goto"


def episode(index: int) -> EpisodeRecord:
    return EpisodeRecord(run_id="r", env="babyai", task=TASK, episode_index=index, seed=7,
                         end_reason="terminated", progression=1.0, num_steps=1,
                         steps=[StepRecord(step=0, agent_id="agent_0", action="go forward")])


async def test_sinks_see_every_event_in_order_and_async_sinks_finish_first() -> None:
    seen: list[tuple[str, str]] = []

    async def slow(event: RunEvent) -> None:
        seen.append(("slow", event.kind))

    def fast(event: RunEvent) -> None:
        seen.append(("fast", event.kind))

    stream = EventStream([slow])
    stream.subscribe(fast)
    await stream.emit("run_started", planned=2, skipped=0, run_seed=0)
    emitted = await stream.emit("episode_finished", episode=episode(0))
    assert seen == [("slow", "run_started"), ("fast", "run_started"),
                    ("slow", "episode_finished"), ("fast", "episode_finished")]
    assert emitted.episode is not None and emitted.episode.episode_index == 0


async def test_an_unknown_kind_is_refused_with_the_allowed_ones() -> None:
    with pytest.raises(ValueError) as refused:
        await EventStream().emit("episode_done")  # type: ignore[arg-type]
    assert "episode_done" in str(refused.value)
    assert all(kind in str(refused.value) for kind in EVENT_KINDS)


async def test_a_failing_sink_stops_the_emit() -> None:
    later: list[str] = []

    def broken(event: RunEvent) -> None:
        raise OSError("disk full")

    stream = EventStream([broken, lambda e: later.append(e.kind)])
    with pytest.raises(OSError, match="disk full"):
        await stream.emit("run_started", planned=1, skipped=0, run_seed=0)
    assert later == []


async def test_files_then_telemetry_from_one_stream(tmp_path: Path) -> None:
    with TelemetryWriter(tmp_path, "r") as writer:
        stream = EventStream([EpisodeFilesSink(tmp_path), TelemetrySink(writer)])
        await stream.emit("run_started", planned=1, skipped=0, run_seed=3)
        await stream.emit("step", step=StepRecord(step=0, agent_id="agent_0", action="left"),
                          env="babyai", task=TASK, episode_index=0)
        await stream.emit("episode_finished", episode=episode(0))
        await stream.emit("run_finished", ran=1, skipped=0, average_progress=100.0,
                          outcome=None)
    json_path, csv_path = episode_paths(tmp_path, "babyai", TASK, 0)
    assert json.loads(json_path.read_text())["episode_index"] == 0 and csv_path.is_file()
    events = [json.loads(line) for line in (tmp_path / "r_events.jsonl").read_text().splitlines()]
    assert [e["type"] for e in events] == ["run_started", "run_finished"]
    assert events[0]["run_seed"] == 3
    steps = [json.loads(line) for line in (tmp_path / "r_steps.jsonl").read_text().splitlines()]
    assert [(s["type"], s["action"], s["episode_index"]) for s in steps] == [("step", "left", 0)]
    episodes = (tmp_path / "r_episodes.jsonl").read_text().splitlines()
    assert [json.loads(line)["episode_index"] for line in episodes] == [0]
