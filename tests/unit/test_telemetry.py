"""Unit tests of orchestrator.store.telemetry: JSON-lines files, line integrity, secret
scrubbing."""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from moria.records import EpisodeRecord, StepRecord
from orchestrator.store.telemetry import TelemetryWriter, dumps, scrub


def read_lines(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def make_step(i: int = 0) -> StepRecord:
    return StepRecord(
        step=i,
        agent_id="agent_0",
        observation="You see a wall.\nMultiple lines",
        raw_completion="go forward",
        action="go forward",
        reward=0.5,
        input_tokens=120,
        output_tokens=4,
        latency_s=0.3,
    )


def make_episode() -> EpisodeRecord:
    return EpisodeRecord(
        run_id="r1",
        env="babyai",
        task="BabyAI-MixedTrainLocal-v0/goto",
        episode_index=0,
        seed=42,
        progression=1.0,
        num_steps=1,
        input_tokens=120,
        client_config={"model_id": "m", "api_key": "sk-live-XYZ", "max_tokens": 64},
        steps=[make_step()],
    )


# -- scrub -----------------------------------------------------------------------------------
def test_scrub_removes_secrets_and_keeps_token_counts() -> None:
    data = {
        "api_key": "sk-123",
        "OPENAI_API_KEY": "sk-456",
        "input_tokens": 10,
        "output_tokens": 0,
        "max_tokens": 8192,
        "token": "abc",
        "auth_token": "xyz",
        "stop_tokens": ["<|END|>"],
        "headers": {"Authorization": "Bearer abc", "Accept": "json"},
        "authorization": {"scheme": "bearer", "value": "abc"},
        "nested": [{"api_key": "k", "model": "gpt"}],
        "model": "gpt-4o",
    }
    clean = scrub(data)
    assert clean == {
        "input_tokens": 10,
        "output_tokens": 0,
        "max_tokens": 8192,
        "stop_tokens": ["<|END|>"],
        "headers": {"Accept": "json"},
        "nested": [{"model": "gpt"}],
        "model": "gpt-4o",
    }
    assert data["api_key"] == "sk-123"  # the input is not mutated


def test_scrub_handles_models_and_non_dicts() -> None:
    assert scrub("plain") == "plain"
    assert scrub((1, {"api_key": "x"})) == [1, {}]
    dumped = scrub(make_episode())
    assert "api_key" not in dumped["client_config"]
    assert dumped["client_config"]["max_tokens"] == 64
    assert dumped["input_tokens"] == 120


def test_dumps_never_emits_secrets() -> None:
    text = dumps({"client": {"api_key": "sk-live-XYZ"}, "n": float("nan")})
    assert "sk-live-XYZ" not in text
    assert json.loads(text) == {"client": {}, "n": None}


# -- writer ----------------------------------------------------------------------------------
def test_writer_files_and_line_headers(tmp_path: Path) -> None:
    before = datetime.now().astimezone()
    with TelemetryWriter(tmp_path / "out", "r1") as tw:
        tw.event("run_started", envs=["babyai"], api_key="sk-should-not-appear")
        tw.event("episode_started", env="babyai", task="t", episode_index=0)
        tw.write_step(make_step(0), env="babyai", task="t", episode_index=0)
        tw.write_step(make_step(1), env="babyai", task="t", episode_index=0)
        tw.write_episode(make_episode())
        tw.event("episode_retried", env="babyai", task="t", episode_index=0, attempt=2)
        tw.event("run_finished", episodes=1)
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == [
        "r1_episodes.jsonl",
        "r1_events.jsonl",
        "r1_steps.jsonl",
    ]

    events = read_lines(out / "r1_events.jsonl")
    assert [e["type"] for e in events] == [
        "run_started",
        "episode_started",
        "episode_retried",
        "run_finished",
    ]
    for line in events:
        assert list(line)[:3] == ["ts", "run_id", "type"]
        assert line["run_id"] == "r1"
        ts = datetime.fromisoformat(line["ts"])
        assert ts.utcoffset() == timedelta(0)
        assert ts >= before - timedelta(seconds=1)
    assert "api_key" not in events[0] and events[0]["envs"] == ["babyai"]
    assert events[2]["attempt"] == 2

    steps = read_lines(out / "r1_steps.jsonl")
    assert [s["type"] for s in steps] == ["step", "step"]
    assert [s["step"] for s in steps] == [0, 1]
    assert steps[0]["env"] == "babyai" and steps[0]["episode_index"] == 0
    assert steps[0]["observation"] == "You see a wall.\nMultiple lines"
    assert steps[0]["input_tokens"] == 120 and steps[0]["latency_s"] == 0.3

    (episode,) = read_lines(out / "r1_episodes.jsonl")
    assert episode["type"] == "episode"
    assert "steps" not in episode
    assert episode["progression"] == 1.0 and episode["seed"] == 42
    assert "api_key" not in episode["client_config"]
    assert episode["client_config"]["max_tokens"] == 64
    for path in out.iterdir():
        assert "sk-live-XYZ" not in path.read_text(encoding="utf-8")
        assert "sk-should-not-appear" not in path.read_text(encoding="utf-8")


def test_writer_flushes_each_line_and_appends_on_reopen(tmp_path: Path) -> None:
    tw = TelemetryWriter(tmp_path, "r2")
    tw.event("run_started")
    assert len(read_lines(tw.events_path)) == 1  # visible before close: flushed per write
    tw.close()
    tw.close()  # idempotent
    with pytest.raises(RuntimeError):
        tw.event("late")
    with TelemetryWriter(tmp_path, "r2") as again:  # resume appends
        again.event("run_started", resumed=True)
    lines = read_lines(tmp_path / "r2_events.jsonl")
    assert len(lines) == 2 and lines[1]["resumed"] is True


def test_writer_rejects_reserved_keys_and_bad_run_id(tmp_path: Path) -> None:
    with TelemetryWriter(tmp_path, "r3") as tw, pytest.raises(ValueError, match="reserved"):
        tw.event("x", run_id="other")
    with pytest.raises(ValueError, match="path separators"):
        TelemetryWriter(tmp_path, "a/b")


def test_concurrent_writers_never_interleave(tmp_path: Path) -> None:
    big = "x" * 20_000
    with TelemetryWriter(tmp_path, "r4") as tw:

        def worker(n: int) -> None:
            for i in range(50):
                tw.event("tick", worker=n, i=i, payload=big)

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

        async def produce(n: int) -> None:
            for i in range(20):
                tw.write_step(make_step(i), env="e", task="t", episode_index=n)
                await asyncio.sleep(0)

        async def main() -> None:
            await asyncio.gather(*(produce(n) for n in range(5)))

        asyncio.run(main())

    events = read_lines(tmp_path / "r4_events.jsonl")
    assert len(events) == 400
    assert all(e["payload"] == big for e in events)
    assert len({(e["worker"], e["i"]) for e in events}) == 400
    steps = read_lines(tmp_path / "r4_steps.jsonl")
    assert len(steps) == 100


def test_a_partial_last_line_is_cut_before_appending(tmp_path: Path) -> None:
    from orchestrator.store.telemetry import drop_partial_line

    path = tmp_path / "r_events.jsonl"
    path.write_text('{"a": 1}\n{"b": 2}\n{"c": ')  # a writer killed mid-line
    assert drop_partial_line(path) == len('{"c": ')
    assert path.read_text() == '{"a": 1}\n{"b": 2}\n'
    assert drop_partial_line(path) == 0  # whole files are left alone
    assert drop_partial_line(tmp_path / "missing.jsonl") == 0
    path.write_text('{"only": "partial"')
    assert drop_partial_line(path) > 0 and path.read_text() == ""
    path.write_text('{"x": 1}\n{"y": ')
    with TelemetryWriter(tmp_path, "r") as writer:  # a resumed run appends whole lines
        writer.event("run_started")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0] == {"x": 1} and lines[1]["type"] == "run_started" and len(lines) == 2


def test_temp_files_of_interrupted_writes_are_removed(tmp_path: Path) -> None:
    from moria.files import atomic_write_text, remove_stale_temp_files

    atomic_write_text(tmp_path / "a" / "ep.json", "{}")
    stale = tmp_path / "a" / ".ep.json.x1y2.tmp"
    stale.write_text("{half")
    assert remove_stale_temp_files(tmp_path) == [stale]
    assert not stale.exists() and (tmp_path / "a" / "ep.json").read_text() == "{}"
