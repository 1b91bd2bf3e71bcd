"""``moria record-demos`` end to end: the real CLI, a local env server, the real oracles."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.apps.cli import main
from orchestrator.plan.seeds import derive_seed
from orchestrator.plan.spec import RunSpec, load_spec
from orchestrator.store.demos import (
    DEMO_FORMAT,
    clear_cache,
    demo_file,
    demo_seed,
    load_demonstrations,
    read_demos,
)

GOTO = "BabyAI-MixedTrainLocal-v0/goto"
PUZZLE = "env/goto_win"


def _check_file(path: Path, env: str, task: str, source: str) -> None:
    records = read_demos(path)
    assert len(records) == 1
    demo = records[0]
    assert (demo.env, demo.task, demo.source) == (env, task, source)
    assert demo.progression == 1.0
    assert demo.steps and all(step.action and step.observation for step in demo.steps)
    assert sum(step.reward for step in demo.steps) > 0  # the oracle reached the goal
    assert demo.instruction.strip()
    assert demo.versions["api"] == "moria.v1"
    # Demo seeds come from their own namespace, never the seeds `moria eval` uses.
    default_run_seed = RunSpec().eval.seed
    assert demo.seed == demo_seed(env, task, 0)
    assert demo.seed != derive_seed(default_run_seed, env, task, 0)
    assert json.loads(path.read_text().splitlines()[0])["format"] == DEMO_FORMAT


def test_record_babyai_and_babaisai_then_load_for_few_shot(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["record-demos", "--env", "babyai", "--env", "babaisai",
                 "--tasks", f"babyai:{GOTO}", f"babaisai:{PUZZLE}", "--episodes", "1",
                 "--out", str(tmp_path), "--no-progress"])
    assert code == 0
    babyai = demo_file(tmp_path, "babyai", GOTO)
    babaisai = demo_file(tmp_path, "babaisai", PUZZLE)
    _check_file(babyai, "babyai", GOTO, "babyai-bot")
    _check_file(babaisai, "babaisai", PUZZLE, "solver")
    err = capsys.readouterr().err
    assert str(babyai) in err and str(babaisai) in err

    # The few_shot loader finds them, with the evaluation's own seeds excluded.
    clear_cache()
    spec = load_spec(None, ["agent.type=few_shot", f"eval.icl_dataset={tmp_path}"])
    eval_seeds = {derive_seed(spec.eval.seed, "babyai", GOTO, i) for i in range(10)}
    demos = load_demonstrations(spec, "babyai", GOTO, eval_seeds)
    assert [d.seed for d in demos] == [demo_seed("babyai", GOTO, 0)]
    assert demos[0].steps[0].action

    # Rerunning fills only what is missing: nothing to do, the file is unchanged.
    before = babyai.read_bytes()
    assert main(["record-demos", "--env", "babyai", "--tasks", GOTO, "--episodes", "1",
                 "--out", str(tmp_path), "--no-progress"]) == 0
    assert babyai.read_bytes() == before


def test_env_without_oracle_is_a_clear_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["record-demos", "--env", "crafter", "--out", str(tmp_path)]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "'crafter' has no oracle player" in err
    assert "babaisai, babyai, meltingpot, minihack, textworld" in err
    assert not any(tmp_path.iterdir())


def test_unfinished_episodes_are_dropped_and_counted(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # One step is too few for the bot to reach any goal: every candidate is dropped.
    code = main(["record-demos", "--env", "babyai", "--tasks", GOTO, "--episodes", "1",
                 "--max-steps", "1", "--max-attempts", "2", "--out", str(tmp_path),
                 "--no-progress"])
    assert code == 1
    err = " ".join(capsys.readouterr().err.split())
    assert "dropped 2 episode(s)" in err
    assert "progression 0.00" in err
    assert "only 0 of 1 demos" in err
    assert not demo_file(tmp_path, "babyai", GOTO).exists()
