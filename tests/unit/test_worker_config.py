"""``moria eval --config worker.json``: the BALROG worker's launch config maps onto a RunSpec."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.apps import cli
from orchestrator.plan.spec import SpecError, load_spec


def _write(tmp_path: Path, config: dict) -> Path:
    path = tmp_path / "worker.json"
    path.write_text(json.dumps(config))
    return path


def test_every_key_maps_onto_the_run_spec(tmp_path: Path) -> None:
    spec = load_spec(_write(tmp_path, {
        "worker": "balrog", "model": "claude-3-5-sonnet-20241022", "backend": "claude",
        "environment": "MiniHack-River-v0", "num_episodes": 3, "max_steps": 50,
        "history_window": 8, "parallel_workers": 2}))
    assert spec.envs.env_list == ["minihack"]
    assert spec.tasks.minihack_tasks == ["MiniHack-River-v0"]
    assert (spec.client.client_name, spec.client.model_id) == (
        "anthropic", "claude-3-5-sonnet-20241022")
    assert spec.eval.num_episodes["minihack"] == 3
    assert (spec.eval.max_steps_per_episode, spec.eval.num_workers) == (50, 2)
    assert spec.agent.max_text_history == 8
    assert list(spec.episodes()) == [("minihack", "MiniHack-River-v0", i) for i in range(3)]


@pytest.mark.parametrize(("environment", "env", "task"), [
    ("BabyAI-MixedTrainLocal-v0/goto", "babyai", "BabyAI-MixedTrainLocal-v0/goto"),
    ("NetHackChallenge-v0", "nle", "NetHackChallenge-v0"),
    ("crafter", "crafter", "default"),  # BALROG's env name: the family's (one) task
    ("coin_collector", "textworld", "coin_collector"),
    ("env/goto_win", "babaisai", "env/goto_win")])
def test_environment_ids_pick_their_family(tmp_path: Path, environment: str, env: str,
                                           task: str) -> None:
    spec = load_spec(_write(tmp_path, {"worker": "balrog", "environment": environment}))
    assert spec.envs.env_list == [env] and spec.tasks.for_env(env) == [task]


def test_overrides_still_apply_on_top(tmp_path: Path) -> None:
    path = _write(tmp_path, {"worker": "balrog", "environment": "crafter", "max_steps": 9})
    spec = load_spec(path, ["eval.max_steps_per_episode=4", "agent.type=dummy"])
    assert spec.eval.max_steps_per_episode == 4 and spec.agent.type == "dummy"


@pytest.mark.parametrize(("config", "message"), [
    ({"worker": "balrog", "environment": "crafter", "modle": "x"},
     r"unknown key 'modle' in the worker config; allowed keys: worker, model, backend"),
    ({"worker": "mosaic", "environment": "crafter"}, r"worker 'mosaic' is not supported"),
    ({"worker": "balrog"}, r"needs 'environment'"),
    ({"worker": "balrog", "environment": "Pong-v5"}, r"names no env family"),
    ({"worker": "balrog", "environment": "crafter", "backend": "nope"},
     r"client\.client_name"),
])
def test_bad_worker_configs_name_the_problem(tmp_path: Path, config: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        load_spec(_write(tmp_path, config))


def test_cli_reports_an_unknown_key_with_exit_2(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, {"worker": "balrog", "environment": "crafter", "episodes": 2})
    assert cli.main(["eval", "--config", str(path)]) == 2
    assert "unknown key 'episodes'" in capsys.readouterr().err
