"""``moria.results``: what it reads from a run directory, and what it skips (with a warning)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from moria.records import EpisodeRecord, StepRecord
from moria.results import ResultsError, load_run, read_episode
from orchestrator.store.episodes import episode_paths, write_episode


def _episode(index: int, progression: float) -> EpisodeRecord:
    steps = [StepRecord(step=i, agent_id="agent_0", observation=f"<b>obs {i}</b>",
                        raw_completion="go forward", action="go forward", valid=i != 1,
                        feedback="not an action" if i == 1 else "")
             for i in range(3)]
    return EpisodeRecord(run_id="r1", env="babyai", task="BabyAI-MixedTrainLocal-v0/goto",
                         episode_index=index, seed=100 + index, progression=progression,
                         num_steps=3, steps=steps,
                         usage_by_model={"local/qwen": {"calls": 3.0}})


def test_a_run_reads_into_records_and_frames(tmp_path: Path) -> None:
    for index, progression in enumerate([1.0, 0.0]):
        write_episode(tmp_path, _episode(index, progression))
    (tmp_path / "run.json").write_text(json.dumps({"run_id": "r1", "spec": {"eval": {}}}))
    run = load_run(tmp_path)
    assert run.run_id == "r1" and run.models == ["local/qwen"] and run.protocol == "moria"
    assert [e.episode_index for e in run.episodes] == [0, 1] and run.warnings == []
    assert run.episode("babyai", "BabyAI-MixedTrainLocal-v0/goto", 1).seed == 101
    with pytest.raises(KeyError):
        run.episode("babyai", "BabyAI-MixedTrainLocal-v0/goto", 7)
    episodes = run.episodes_frame()
    assert list(episodes["progression"]) == [1.0, 0.0]
    assert list(episodes["invalid_actions"]) == [1, 1]
    steps = run.steps_frame()
    assert len(steps) == 6
    assert steps.loc[1, "feedback"] == "not an action" and not steps.loc[1, "valid"]


def test_bad_files_are_skipped_with_a_warning(tmp_path: Path) -> None:
    write_episode(tmp_path, _episode(0, 1.0))
    json_path, _ = episode_paths(tmp_path, "babyai", "BabyAI-MixedTrainLocal-v0/goto", 1)
    json_path.write_text("{not json")
    big, _ = episode_paths(tmp_path, "babyai", "BabyAI-MixedTrainLocal-v0/goto", 2)
    big.write_text(" " * 2048 + "{}")
    with pytest.raises(ValueError, match="more than the 1,024 an episode file may be"):
        read_episode(big, max_bytes=1024)
    listed, _ = episode_paths(tmp_path, "babyai", "BabyAI-MixedTrainLocal-v0/goto", 3)
    listed.write_text("[1, 2]")
    run = load_run(tmp_path)
    assert [e.episode_index for e in run.episodes] == [0]
    assert len(run.warnings) == 3
    assert any("top level is not a JSON object" in w for w in run.warnings)


def test_a_folder_that_is_no_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="is not a directory"):
        load_run(tmp_path / "missing")
    with pytest.raises(ResultsError, match=r"holds no run\.json and no episode files"):
        load_run(tmp_path)
