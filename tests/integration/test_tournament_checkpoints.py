"""``moria tournament`` and rl checkpoint paths: a relative path is looked for from the current
directory, then from the tournament file's folder, and every player's file is checked before
match 1 (a missing one exits 2 naming the key, the path and where it was looked for), through
the real ``moria`` script with its own local stack."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from orchestrator.apps.tournament import load_tournament

ROOT = Path(__file__).resolve().parents[2]
README_PATH = "examples/checkpoints/connect_four_v3_mlp.npz"  # as README.md writes it
BIN = Path(sys.executable).parent


def _spec(folder: Path, checkpoint: str, out: Path) -> Path:
    """A three-player connect-four tournament whose rl player (last in spec order, so the
    first match that seats it is match 3 of 6) loads ``checkpoint``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tournament.yaml"
    path.write_text(yaml.safe_dump({
        "env": "pettingzoo", "task": "connect_four_v3", "seeds": 1,
        "players": {"random": {"agent": {"type": "random"}},
                    "scripted": {"agent": {"type": "scripted"}},
                    "rl": {"agent": {"type": "rl", "checkpoint": checkpoint}}},
        "eval": {"output_dir": str(out)}}))
    return path


def _tournament(path: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "moria"), "tournament", str(path), "--no-progress"],
                          cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONUNBUFFERED": "1"})


def test_a_missing_checkpoint_stops_before_match_1_naming_where_it_looked(
        tmp_path: Path) -> None:
    out = tmp_path / "out"
    path = _spec(tmp_path / "specs", README_PATH, out)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = _tournament(path, elsewhere)
    assert run.returncode == 2, run.stderr
    assert "match 1" not in run.stderr and not out.exists()  # no game, no folder
    assert run.stderr.strip().splitlines() == [
        f"error: players.rl.agent.checkpoint: no file {README_PATH!r}; looked for "
        f"{elsewhere / README_PATH} and {tmp_path / 'specs' / README_PATH} (expected a "
        "moria-mlp .npz policy file (docs/rl-checkpoints.md); a relative path is taken from "
        "the current directory, then from the tournament file's folder)"]


def test_a_path_relative_to_the_tournament_file_plays_every_match(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    (specs / "ck").mkdir(parents=True)
    shutil.copy(ROOT / README_PATH, specs / "ck" / "c4.npz")
    out = tmp_path / "out"
    path = _spec(specs, "ck/c4.npz", out)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = _tournament(path, elsewhere)
    assert run.returncode == 0, run.stderr
    assert "match 6/6" in run.stderr and "done: all 6 episode(s) scored" in run.stderr
    document = json.loads((out / "tournament.json").read_text())
    assert {s["player"]: s["games"] for s in document["standings"]} == {
        "random": 4, "scripted": 4, "rl": 4}


def test_the_readme_path_works_from_the_repository_root(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    path = _spec(tmp_path / "specs", README_PATH, tmp_path / "out")
    monkeypatch.chdir(ROOT)
    spec = load_tournament(path)
    assert spec.players["rl"].agent is not None
    assert spec.players["rl"].agent.checkpoint == str(ROOT / README_PATH)
