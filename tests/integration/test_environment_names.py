"""Every env id or task name ``moria tasks`` lists, and BALROG's env names, name an environment
wherever a user writes one: a BALROG worker config's ``environment`` (``moria eval --config
worker.json``) and ``llm-worker --env`` / ``--task``. One resolver owns the rule
(``moria.families.resolve_environment``); these tests read the real ``moria tasks`` output and
run the real ``moria`` and ``llm-worker`` scripts, each with its own local stack.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from moria.families import EnvironmentRef, balrog_references, resolve_environment

BIN = Path(sys.executable).parent
#: Deadline of one command (it starts and stops its own env server).
RUN_TIMEOUT_S = 300


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S, env={**os.environ, "PYTHONUNBUFFERED": "1"})


@pytest.fixture(scope="module")
def listed(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str]]:
    """(env, task) of every row ``moria tasks`` prints (stdout a pipe)."""
    run = _run([str(BIN / "moria"), "tasks"], tmp_path_factory.mktemp("tasks"))
    assert run.returncode == 0, run.stderr
    rows = [(cells[0], cells[1]) for cells in (line.split("\t") for line in
                                                run.stdout.splitlines()[1:])]  # env, task
    assert len(rows) > 300, run.stdout[:2000]
    return rows


def test_every_listed_task_names_itself_bare_and_after_its_family(
        listed: list[tuple[str, str]]) -> None:
    wrong = [(env, task, got) for env, task in listed
             for name in (task, f"{env}/{task}", f"{env}:{task}")
             if (got := resolve_environment(name)) != EnvironmentRef(env, task)]
    assert not wrong, wrong[:10]
    families = {env for env, _ in listed}
    assert {"babyai", "babaisai", "crafter", "minihack", "multigrid", "nle", "pettingzoo",
            "textworld"} <= families


def test_balrog_env_names_name_their_whole_family() -> None:
    names = {ref.env: env for env, ref in balrog_references().items()}
    assert set(names) == {"babyai", "crafter", "textworld", "babaisai", "minihack", "nle"}
    for name, env in names.items():
        assert resolve_environment(name) == EnvironmentRef(env, None)


@pytest.mark.parametrize(("environment", "env", "task"), [
    ("crafter", "crafter", "default"),                   # BALROG's env name
    ("crafter/default", "crafter", "default"),           # <family>/<task>
    ("default", "crafter", "default"),                   # the bare task name
    ("MiniGrid-DoorKey-5x5-v0", "babyai", "MiniGrid-DoorKey-5x5-v0"),  # a MiniGrid id
    ("goto_win", "babaisai", "env/goto_win"),            # a bare BabaIsAI name
])
def test_a_balrog_worker_config_plays_its_environment(tmp_path: Path, environment: str,
                                                      env: str, task: str) -> None:
    config = tmp_path / "worker.json"
    config.write_text(json.dumps({"worker": "balrog", "environment": environment,
                                  "num_episodes": 1, "max_steps": 2}))
    out = tmp_path / "out"
    run = _run([str(BIN / "moria"), "eval", "--config", str(config), "agent.type=dummy",
                f"eval.output_dir={out}", "--no-progress"], tmp_path)
    assert run.returncode == 0, run.stderr
    assert "succeeded: all 1 episode(s) scored" in run.stderr
    folder = task.replace("/", "__")
    episode = json.loads((out / env / folder / f"{folder}_run_00.json").read_text())
    assert (episode["env"], episode["task"]) == (env, task)
    assert episode["end_reason"] in ("terminated", "truncated")


def test_an_unknown_environment_names_the_accepted_forms(tmp_path: Path) -> None:
    config = tmp_path / "worker.json"
    config.write_text(json.dumps({"worker": "balrog", "environment": "Pong-v5"}))
    run = _run([str(BIN / "moria"), "eval", "--config", str(config)], tmp_path)
    assert run.returncode == 2
    assert "'Pong-v5' names no env family or task" in run.stderr
    assert "MiniGrid-..." in run.stderr and "crafter" in run.stderr


@pytest.mark.parametrize(("args", "task"), [
    (["--env", "crafter", "--task", "crafter/default"], "default"),
    (["--env", "crafter", "--task", "crafter"], "default"),
    (["--env", "MiniGrid-DoorKey-5x5-v0"], "MiniGrid-DoorKey-5x5-v0"),
    (["--env", "babaisai", "--task", "goto_win"], "env/goto_win"),
])
def test_llm_worker_plays_the_task_it_is_given(tmp_path: Path, args: list[str],
                                               task: str) -> None:
    run = _run([str(BIN / "llm-worker"), *args, "--agent-type", "dummy", "--max-steps", "2",
                "--run-id", "names", "--telemetry-dir", str(tmp_path / "tel")], tmp_path)
    assert run.returncode == 0, run.stderr
    episode = json.loads((tmp_path / "tel" / "names_episodes.jsonl").read_text())
    assert episode["task"] == task


def test_llm_worker_refuses_another_familys_task_before_any_server(tmp_path: Path) -> None:
    run = _run([str(BIN / "llm-worker"), "--env", "crafter", "--task",
                "babyai/BabyAI-MixedTrainLocal-v0/goto", "--no-jsonl"], tmp_path)
    assert run.returncode == 2
    assert run.stderr.strip() == (
        "llm-worker: error: --task (config key 'task'): task "
        "'babyai/BabyAI-MixedTrainLocal-v0/goto' belongs to env 'babyai', not 'crafter'")
