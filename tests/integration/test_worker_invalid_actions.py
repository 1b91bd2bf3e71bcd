"""``llm-worker`` / ``vlm-worker``: ``--constrain-actions`` (JSON key ``constrain_actions``)
reaches the model backend, and the run's summary says how many of the worker's moves the env
judged invalid, through the real console scripts (each starts its own local stack).

The model is ``tests.support.fake_openai`` (a real HTTP server on loopback speaking OpenAI's
wire format, as a vLLM server does); the slow test runs the real tiny local model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_openai import FakeOpenAI
from worker.config import load_settings

BIN = Path(sys.executable).parent
RUN_TIMEOUT_S = 300
BABYAI_ACTIONS = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]


def _run(script: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / script), "--telemetry-dir", str(tmp_path / "tel"), *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _vllm_player(server: FakeOpenAI) -> list[str]:
    return ["--env", "babyai", "--task", "BabyAI-MixedTrainLocal-v0/goto", "--client", "vllm",
            "--base-url", server.base_url, "--model", "fake-model", "--max-steps", "3"]


def test_flag_and_json_key_set_client_constrain_actions(tmp_path: Path) -> None:
    assert not load_settings([])[0].client_config().constrain_actions
    assert load_settings(["--constrain-actions"])[0].client_config().constrain_actions
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"constrain_actions": True}))
    settings, _ = load_settings(["--config", str(path)], prog="vlm-worker", vlm=True)
    assert settings.client_config().constrain_actions
    settings, _ = load_settings(["--config", str(path), "--no-constrain-actions"])
    assert not settings.client_config().constrain_actions  # the flag wins over the file


def test_every_invalid_answer_is_counted_and_the_summary_says_so(tmp_path: Path) -> None:
    with FakeOpenAI(reply="I would like to dance") as server:
        run = _run("llm-worker", tmp_path, *_vllm_player(server), "--run-id", "bad")
        assert len(server.requests) == 3
        assert all("guided_choice" not in r.json for r in server.requests if r.json)
    assert run.returncode == 0, run.stderr  # invalid answers are played, not failures
    lines = run.stderr.strip().splitlines()
    assert lines[-2].endswith("3 steps, truncated, 3 model calls, 3 of 3 actions invalid")
    assert lines[-1] == (
        "done: all 1 episode(s) scored; mean reward 0.000 over 1 scored episode(s); invalid "
        "actions 3 of 3 (100%): the env played its default action instead "
        "(--constrain-actions limits the model's answers to the action names)")
    episode = _lines(tmp_path / "tel" / "bad_episodes.jsonl")[0]
    assert (episode["actions"], episode["invalid_actions"]) == (3, 3)
    steps = _lines(tmp_path / "tel" / "bad_steps.jsonl")
    assert [s["info"]["valid"] for s in steps] == [False] * 3
    completed = _lines(tmp_path / "tel" / "bad_events.jsonl")[-1]
    assert completed["event"] == "run_completed"
    assert (completed["actions"], completed["invalid_actions"]) == (3, 3)


def test_constrain_actions_reaches_the_backend_and_valid_moves_count_zero(
        tmp_path: Path) -> None:
    with FakeOpenAI(reply="go forward") as server:
        run = _run("llm-worker", tmp_path, *_vllm_player(server), "--run-id", "ok",
                   "--constrain-actions")
        bodies = [r.json for r in server.requests if r.json]
    assert run.returncode == 0, run.stderr
    # vLLM's guided_choice: the model may answer only one of the action names
    assert len(bodies) == 3 and all(b["guided_choice"] == BABYAI_ACTIONS for b in bodies)
    assert run.stderr.strip().splitlines()[-1] == (
        "done: all 1 episode(s) scored; mean reward 0.000 over 1 scored episode(s); invalid "
        "actions 0 of 3 (0%)")
    started = _lines(tmp_path / "tel" / "ok_events.jsonl")[0]
    assert started["event"] == "run_started" and started["constrain_actions"] is True


@pytest.mark.slow
def test_the_tiny_local_model_plays_valid_moves_only_when_constrained(tmp_path: Path) -> None:
    """The embedded llama.cpp model (SmolLM2-135M): the summary counts its invalid answers as
    the steps telemetry does, and under --constrain-actions (a grammar) it has none."""
    # SmolLM2 at temperature 0 may go on writing the next observations of the transcript
    # instead of answering (about 30 tokens/s here): --max-tokens bounds each answer, so the
    # run takes seconds, not minutes; the invalid-action count is what this test checks
    common = ["--env", "babyai", "--model", "smollm2-135m-instruct", "--max-steps", "3",
              "--temperature", "0", "--max-tokens", "64"]
    free = _run("llm-worker", tmp_path, *common, "--run-id", "free")
    assert free.returncode == 0, free.stderr
    invalid = sum(not s["info"]["valid"]
                  for s in _lines(tmp_path / "tel" / "free_steps.jsonl"))
    assert f"invalid actions {invalid} of 3 (" in free.stderr.strip().splitlines()[-1]
    constrained = _run("llm-worker", tmp_path, *common, "--run-id", "constrained",
                       "--constrain-actions")
    assert constrained.returncode == 0, constrained.stderr
    assert constrained.stderr.strip().splitlines()[-1].endswith("invalid actions 0 of 3 (0%)")
