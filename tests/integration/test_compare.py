"""``moria compare`` and ``moria leaderboard`` over two real runs (the BabyAI bot and a random
player, on the same seeds), with ``moria.results`` reading them: the paired figures are
recomputed here from the episode files with scipy; runs that measure different things are
refused, naming the difference."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from moria.results import load_run
from orchestrator.apps import cli
from orchestrator.core.runner import run_evaluation
from orchestrator.plan.spec import load_spec
from tests.support.servers import env_server, policy_server

TASKS = "[BabyAI-MixedTrainLocal-v0/goto,BabyAI-MixedTrainLocal-v0/pickup]"
EPISODES = 4


async def _run(out: Path, player: str) -> None:
    async with env_server(("babyai", "minihack")) as env, policy_server() as pol:
        spec = load_spec(None, [
            f"agent.type={player}", "envs.names=babyai-minihack", f"tasks.babyai_tasks={TASKS}",
            "tasks.minihack_tasks=[MiniHack-MazeWalk-9x9-v0]",
            f"eval.num_episodes.babyai={EPISODES}", f"eval.num_episodes.minihack={EPISODES}",
            "eval.max_steps_per_episode=40", "eval.num_workers=4", f"eval.output_dir={out}",
            f"endpoints.env.babyai=[{env.target}]", f"endpoints.env.minihack=[{env.target}]",
            f"endpoints.policy=[{pol.target}]"])
        outcome = await run_evaluation(spec, console=Console(quiet=True), show_progress=False)
        assert outcome.verdict is not None and outcome.verdict.succeeded


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """An oracle run and a random run of the same tasks and seeds."""
    a, b = tmp_path_factory.mktemp("oracle"), tmp_path_factory.mktemp("random")
    asyncio.run(_run(a, "oracle"))
    asyncio.run(_run(b, "random"))
    return a, b


def _progressions(out: Path) -> dict[tuple[str, str, int], float]:
    """{(env, task, seed): progression} read straight from the episode files."""
    found = {}
    for path in out.glob("*/*/*_run_*.json"):
        doc = json.loads(path.read_text())
        found[(doc["env"], doc["task"], doc["seed"])] = doc["progression"]
    return found


def _cli(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(list(argv))
    return code, capsys.readouterr().out


def test_paired_figures_match_scipy_on_the_same_pairs(
        runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    import numpy as np  # scipy imported here: every pytest worker imports every test module
    from scipy import stats

    a, b = runs
    code, out = _cli("compare", str(a), str(b), "--json", capsys=capsys)
    assert code == 0, out
    doc = json.loads(out)
    first, second = _progressions(a), _progressions(b)
    assert first.keys() == second.keys() and len(first) == 3 * EPISODES
    diffs: dict[str, list[float]] = {}
    for key in sorted(first):
        diffs.setdefault(key[0], []).append(100.0 * (second[key] - first[key]))
    figures = {f["name"]: f for f in doc["envs"]}
    assert sorted(figures) == ["babyai", "minihack"]
    for env, values in diffs.items():
        mine = figures[env]
        assert mine["n"] == len(values)
        assert mine["mean_difference"] == pytest.approx(np.mean(values))
        if any(values):
            expected = stats.wilcoxon(values, zero_method="wilcox").pvalue
            assert mine["p_value"] == pytest.approx(expected)
        if len(set(values)) > 1:
            ci = stats.bootstrap((values,), np.mean, n_resamples=10_000,
                                 confidence_level=0.95, method="percentile",
                                 rng=np.random.default_rng(0)).confidence_interval
            assert mine["ci95"] == pytest.approx([ci.low, ci.high])
    overall = doc["overall"]
    pooled = [d for values in diffs.values() for d in values]
    assert overall["n"] == len(pooled)
    assert overall["mean_difference"] == pytest.approx(np.mean([np.mean(v)
                                                                for v in diffs.values()]))
    assert overall["p_value"] == pytest.approx(stats.wilcoxon(pooled).pvalue)
    # the oracle solves what the random player does not
    assert overall["mean_difference"] < 0 and overall["a_better"] > 0

    code, text = _cli("compare", str(a), str(b), capsys=capsys)
    assert code == 0 and "overall" in text and "Wilcoxon signed-rank" in text


def test_runs_that_measure_different_things_are_refused(
        runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = runs
    other = tmp_path / "balrog"
    shutil.copytree(b, other)
    for path in other.glob("*/*/*_run_*.json"):
        doc: dict[str, Any] = json.loads(path.read_text())
        doc["protocol"] = {"name": "balrog"}
        path.write_text(json.dumps(doc))
    meta = json.loads((other / "run.json").read_text())
    meta["spec"]["eval"]["max_steps_per_episode"] = 99
    (other / "run.json").write_text(json.dumps(meta))
    code, out = _cli("compare", str(a), str(other), capsys=capsys)
    assert code == 2
    assert "protocol of the episodes: moria vs balrog" in out
    assert "step cap (eval.max_steps_per_episode): 40 vs 99" in out
    code, out = _cli("compare", str(a), str(other), "--allow-different", capsys=capsys)
    assert code == 0 and "compared despite: protocol of the episodes" in out

    code, out = _cli("compare", str(a), str(tmp_path / "none"), capsys=capsys)
    assert code == 2 and "is not a directory" in out


def test_leaderboard_and_results_api(runs: tuple[Path, Path],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    a, b = runs
    code, out = _cli("leaderboard", str(a), str(b), "--json", capsys=capsys)
    assert code == 0, out
    rows = json.loads(out)
    assert [r["name"] for r in rows] == ["oracle", "random"]  # best first
    assert not any(r["published"] for r in rows)  # moria protocol: no BALROG rows
    oracle = rows[0]
    assert oracle["envs"]["babyai"]["n"] == 2 * EPISODES
    assert oracle["envs"]["babyai"]["progression"] == 100.0

    run = load_run(a)
    episodes = run.episodes_frame()
    assert len(episodes) == 3 * EPISODES and set(episodes["env"]) == {"babyai", "minihack"}
    assert episodes.groupby("env")["progression"].mean()["babyai"] == 1.0
    steps = run.steps_frame()
    assert len(steps) == int(episodes["num_steps"].sum())
    assert {"observation", "raw_completion", "valid", "feedback"} <= set(steps.columns)
