"""Saved frames (``eval.save_images``) and ``moria replay`` over real Env servers: a run saves
every step's frame on BabyAI, Crafter, MiniHack and Soccer; ``--verify`` passes on those
episodes and fails, naming the step and the field, on a record whose action or reward was
altered; ``--frames`` draws the frames of a run made without them; Melting Pot is refused."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from rich.console import Console

from moria.families import families
from orchestrator.apps import cli
from orchestrator.core.runner import run_evaluation
from orchestrator.plan.spec import load_spec
from orchestrator.store.frames import list_frames
from tests.support.servers import env_server, policy_server

FAMILIES = ("babyai", "crafter", "minihack", "multigrid")
STEPS = 6

pytestmark = pytest.mark.slow


async def _run(out: Path, *, save_images: bool) -> None:
    """One dummy-player episode of each family's first task (Soccer for multigrid)."""
    async with env_server(FAMILIES) as env, policy_server() as pol:
        spec = load_spec(None, [
            "agent.type=dummy", f"envs.names={'-'.join(FAMILIES)}", "eval.num_samples=1",
            f"eval.max_steps_per_episode={STEPS}", f"eval.save_images={save_images}",
            f"eval.output_dir={out}", "tasks.multigrid_tasks=[MosaicMultiGrid-S-2v2-IndAgObs-v1]",
            *(f"endpoints.env.{family}=[{env.target}]" for family in FAMILIES),
            f"endpoints.policy=[{pol.target}]"])
        outcome = await run_evaluation(spec, console=Console(quiet=True), show_progress=False)
        assert outcome.verdict is not None and outcome.verdict.succeeded


def _episodes(out: Path) -> dict[str, tuple[Path, dict[str, Any]]]:
    """{env: (episode file, its document)} of a run of one episode per env."""
    found = {}
    for path in sorted(out.glob("*/*/*_run_*.json")):
        doc = json.loads(path.read_text())
        found[doc["env"]] = (path, doc)
    return found


def _assert_frames(path: Path, doc: dict[str, Any]) -> None:
    folder = path.parent / doc["frames"]
    frames = list_frames(folder)
    # one frame before the first step and one after each step
    assert sorted(frames) == list(range(doc["num_steps"] + 1)), (path, sorted(frames))
    assert doc["frame_count"] == doc["num_steps"] + 1
    with Image.open(frames[doc["num_steps"]]) as last:
        assert last.mode == "RGB" and min(last.size) >= 64


def _replay(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(["replay", *argv])
    return code, capsys.readouterr().out


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run with ``eval.save_images=true``, shared by the tests that only read it."""
    out = tmp_path_factory.mktemp("saved")
    asyncio.run(_run(out, save_images=True))
    return out


def test_save_images_writes_every_frame(saved_run: Path) -> None:
    episodes = _episodes(saved_run)
    assert set(episodes) == set(FAMILIES)
    for path, doc in episodes.values():
        assert doc["num_steps"] == STEPS, (path, doc["end_reason"])
        _assert_frames(path, doc)


def test_verify_passes_then_names_an_altered_action_and_reward(
        saved_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _replay(str(saved_run), "--verify", capsys=capsys)
    assert code == 0, out
    assert out.strip().endswith("4 verified, 0 differs, 0 replayed, 0 not replayable"), out
    summary = json.loads((saved_run / "replay.json").read_text())
    assert summary["counts"]["verified"] == 4

    altered = tmp_path / "altered"
    shutil.copytree(saved_run, altered)
    episodes = _episodes(altered)
    babyai, doc = episodes["babyai"]
    step = doc["steps"][2]
    step["action"] = "turn left" if step["action"] != "turn left" else "turn right"
    babyai.write_text(json.dumps(doc))
    crafter, doc = episodes["crafter"]
    doc["steps"][4]["reward"] += 1.0
    crafter.write_text(json.dumps(doc))

    code, out = _replay(str(babyai), str(crafter), "--verify", capsys=capsys)
    assert code == 1, out
    lines = out.splitlines()
    # the turn changes what the agent sees before its next step
    assert lines[0].startswith(f"differs: {babyai} (first difference: step 3, agent_0, "
                               "observation: recorded "), lines[0]
    assert lines[1].startswith(f"differs: {crafter} (first difference: step 4, agent_0, "
                               "reward: recorded "), lines[1]


def test_frames_are_drawn_for_a_run_without_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    asyncio.run(_run(tmp_path, save_images=False))
    for _, doc in _episodes(tmp_path).values():
        assert doc["frames"] == "" and doc["frame_count"] == 0
    code, out = _replay(str(tmp_path), "--frames", capsys=capsys)
    assert code == 0, out
    assert "4 replayed" in out
    for path, doc in _episodes(tmp_path).values():
        _assert_frames(path, doc)


#: Every other family whose games replay (its manifest names no replay_refusal): a new family
#: is checked here without a line of this test changing.
OTHER_FAMILIES = tuple(sorted(name for name, manifest in families().items()
                              if not manifest.replay_refusal and name not in FAMILIES))


def test_every_deterministic_family_verifies(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    async def run() -> None:
        async with env_server(OTHER_FAMILIES) as env, policy_server() as pol:
            spec = load_spec(None, [
                "agent.type=dummy", f"envs.names={'-'.join(OTHER_FAMILIES)}",
                "eval.num_samples=1", f"eval.max_steps_per_episode={STEPS}",
                "eval.num_workers=2", f"eval.output_dir={tmp_path}",
                *(f"endpoints.env.{family}=[{env.target}]" for family in OTHER_FAMILIES),
                f"endpoints.policy=[{pol.target}]"])
            outcome = await run_evaluation(spec, console=Console(quiet=True),
                                           show_progress=False)
            assert outcome.verdict is not None and outcome.verdict.succeeded

    assert {"babaisai", "nim", "nle", "pettingzoo", "textworld"} <= set(OTHER_FAMILIES)
    asyncio.run(run())
    code, out = _replay(str(tmp_path), "--verify", capsys=capsys)
    assert code == 0, out
    counts = json.loads((tmp_path / "replay.json").read_text())["counts"]
    assert counts == {"verified": len(OTHER_FAMILIES), "differs": 0, "replayed": 0,
                      "not_replayable": 0}


def test_melting_pot_and_bad_input_are_refused(
        saved_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, doc = _episodes(saved_run)["babyai"]
    melting = tmp_path / "run" / "meltingpot" / "clean_up" / "clean_up_run_00.json"
    melting.parent.mkdir(parents=True)
    melting.write_text(json.dumps({**doc, "env": "meltingpot", "task": "clean_up"}))
    code, out = _replay(str(melting), "--verify", capsys=capsys)
    assert code == 2, out
    assert "not_replayable" in out and "Melting Pot's engine does not play an episode" in out

    code, out = _replay(str(tmp_path / "nowhere"), capsys=capsys)
    assert code == 2 and "neither a results directory nor an episode .json file" in out
    lone = tmp_path / "lone" / "babyai" / "t" / path.name
    lone.parent.mkdir(parents=True)
    shutil.copy(path, lone)
    code, out = _replay(str(lone), "--verify", capsys=capsys)
    assert code == 2 and "cannot read the run spec" in out, out
    broken = tmp_path / "run" / "babyai" / "t" / "t_run_00.json"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"task": ')
    code, out = _replay(str(broken), capsys=capsys)
    assert code == 2 and f"{broken} is no episode file" in out, out
