"""``moria export --format inspect`` on a real run (the BabyAI bot with its frames, and MiniHack
where one task has no expert, so one episode fails): Inspect AI's own reader gives back the
episode count and the scores of ``summary.json``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from rich.console import Console

from orchestrator.apps import cli
from orchestrator.core.runner import run_evaluation
from orchestrator.plan.spec import load_spec
from tests.support.servers import env_server, policy_server

pytestmark = pytest.mark.slow


async def _run(out: Path) -> None:
    async with env_server(("babyai", "minihack")) as env, policy_server() as pol:
        spec = load_spec(None, [
            "agent.type=oracle", "envs.names=babyai-minihack",
            "tasks.babyai_tasks=[BabyAI-MixedTrainLocal-v0/goto]",
            "tasks.minihack_tasks=[MiniHack-MazeWalk-9x9-v0,MiniHack-CorridorBattle-Dark-v0]",
            "eval.num_episodes.babyai=3", "eval.num_episodes.minihack=2",
            "eval.max_steps_per_episode=30", "eval.save_images=true", "eval.num_workers=2",
            f"eval.output_dir={out}", f"endpoints.env.babyai=[{env.target}]",
            f"endpoints.env.minihack=[{env.target}]", f"endpoints.policy=[{pol.target}]"])
        await run_evaluation(spec, console=Console(quiet=True), show_progress=False)


def test_inspect_reads_back_the_runs_episodes_and_scores(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # imported here: inspect_ai is heavy, and every pytest worker imports every test module
    from inspect_ai.analysis import samples_df
    from inspect_ai.log import read_eval_log

    run, out = tmp_path / "run", tmp_path / "inspect"
    asyncio.run(_run(run))
    summary = json.loads((run / "summary.json").read_text())
    assert summary["end_reasons"]["env_error"] == 2  # CorridorBattle has no expert

    assert cli.main(["export", "--format", "inspect", str(run), str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"inspect view --log-dir {out}" in printed
    frame = samples_df(str(out))
    assert len(frame) == summary["episodes_total"] == 7
    for env, figures in summary["environments"].items():
        mine = frame[frame["metadata_env"] == env]
        assert len(mine) == figures["episodes_total"]
        scored = mine["score_progression"].dropna()
        assert len(scored) == figures["episodes_played"]
        assert 100 * scored.mean() == pytest.approx(figures["progression_percentage"])
        log = read_eval_log(str(next(out.glob(f"*_{env}.eval"))))
        assert log.status == "success" and len(log.samples or []) == len(mine)
        metric = log.results.scores[0].metrics["mean"].value  # type: ignore[union-attr]
        assert 100 * metric == pytest.approx(figures["progression_percentage"])
    failed = frame[frame["metadata_end_reason"] == "env_error"]
    assert len(failed) == 2 and failed["score_progression"].isna().all()
    assert failed["error"].str.contains("no expert").all()

    babyai = read_eval_log(str(next(out.glob("*_babyai.eval"))))
    sample = (babyai.samples or [])[0]
    first = sample.messages[0]
    assert first.role == "user" and any(getattr(c, "type", "") == "image"
                                        for c in first.content)  # the saved frame
    assert sample.messages[1].role == "assistant" and sample.metadata["env"] == "babyai"
