"""The BALROG suite from the command line: the six envs in one run, the domain-harness form,
``moria report`` (table, report.json, progress.png) and the oracle check of the env side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from orchestrator.suites.balrog import SUITE_ENVS, TASKS
from tests.e2e.test_cli import moria

BABAISAI_TASKS = TASKS["babaisai"]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A private data cache shared by this module's runs (games are built into it once)."""
    return {"MORIA_CACHE_DIR": str(tmp_path_factory.mktemp("cache"))}


def test_harness_runs_all_six_envs_and_report_draws_progress(
    tmp_path: Path, cache: dict[str, str]
) -> None:
    # dummy agent (seeded random legal actions), 1 episode per env, 5 steps each; TextWorld
    # builds its first game (treasure_hunter #0) into the private cache first
    run = moria("harness", "--domain", "balrog", "--run_id", "smoke", "--num_samples", "1",
                "--outputs", str(tmp_path), "agent.type=dummy", "eval.max_steps_per_episode=5",
                "--no-progress", env=cache)
    assert run.returncode == 0, run.stderr[-3000:]
    out = tmp_path / "smoke"
    report = json.loads((out / "report.json").read_text())
    assert list(report["environments"]) == list(SUITE_ENVS)
    assert all(e["episodes_played"] == 1 for e in report["environments"].values())
    summary = json.loads((out / "summary.json").read_text())
    assert summary["episodes_total"] == 6
    assert "prepared 1 textworld item(s)" in run.stderr
    assert (Path(cache["MORIA_CACHE_DIR"]) / "textworld" / "treasure_hunter").is_dir()
    assert Image.open(out / "progress.png").size[0] >= 800

    # the report of one domain, from the harness spelling
    again = moria("report", "--domain", "balrog_babaisai", "--dname", str(out))
    assert again.returncode == 0, again.stderr
    assert "babaisai" in again.stdout
    report = json.loads((out / "report.json").read_text())
    assert list(report["environments"]) == ["babaisai"]
    assert summary["run_id"] == json.loads((out / "summary.json").read_text())["run_id"]

    bad = moria("harness", "--domain", "balrog_chess", "--run_id", "x")
    assert bad.returncode == 2 and "allowed: balrog, balrog_babyai" in bad.stderr


def test_oracle_solves_every_babaisai_puzzle_and_textworld_game_it_plays(
    tmp_path: Path, cache: dict[str, str]
) -> None:
    run = moria("eval", "envs.names=babyai-textworld-babaisai", "agent.type=oracle",
                "eval.num_episodes.babyai=2", "eval.num_episodes.babaisai=1",
                "eval.num_episodes.textworld=2",
                "tasks.textworld_tasks=[coin_collector,the_cooking_game]",
                f"eval.output_dir={tmp_path}", "eval.num_workers=4", "--no-progress", env=cache)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    envs = summary["environments"]
    assert envs["babaisai"]["progression_percentage"] == 100.0
    assert len(envs["babaisai"]["tasks"]) == len(BABAISAI_TASKS) == 40
    assert envs["textworld"]["progression_percentage"] == 100.0
    assert envs["textworld"]["episodes_played"] == 4
    assert envs["babyai"]["progression_percentage"] >= 90.0


def test_an_option_an_env_rejects_stops_the_run_before_any_episode(tmp_path: Path) -> None:
    oracle = moria("eval", "envs.names=crafter", "agent.type=oracle",
                   "eval.num_episodes.crafter=1", f"eval.output_dir={tmp_path / 'a'}",
                   "--no-progress")
    assert oracle.returncode == 2
    assert "env 'crafter' rejects the run's options" in oracle.stderr
    assert "oracle" in oracle.stderr
    assert not list((tmp_path / "a").rglob("*_run_*.json"))

    typo = moria("eval", "envs.names=crafter", "agent.type=dummy", "eval.num_episodes.crafter=1",
                 "envs.crafter_kwargs.text_fromat=current", f"eval.output_dir={tmp_path / 'b'}",
                 "--no-progress")
    assert typo.returncode == 2
    assert "envs.crafter_kwargs': unknown key 'text_fromat'" in typo.stderr
    assert "text_format" in typo.stderr.split("allowed:")[1]
    assert not list((tmp_path / "b").rglob("*_run_*.json"))
