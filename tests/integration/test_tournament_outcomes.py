"""A tournament's outcome when some games fail: the real ``moria tournament`` CLI (its own local
stack of env and agent servers as child processes) plays PettingZoo Connect Four, and one
player's model is ``tests.support.fake_openai``, a real HTTP server on loopback answering every
request with HTTP 401 (a bad key).

Every game of that player ends ``agent_error``: it counts for nobody (no standing, no matrix
cell, no rating game), and the tournament exits 1 naming how many games failed and the
provider's message; the games between the other two players are scored as usual.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support.fake_openai import Behaviour, FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-test-tournament-0000"
PROVIDER_MESSAGE = "Incorrect API key provided; find your API key in your account settings"
#: Deadline of the whole tournament process (6 one-game matches on one local stack).
RUN_TIMEOUT_S = 300


def _tournament(tmp_path: Path, base_url: str) -> tuple[Path, Path]:
    out = tmp_path / "out"
    path = tmp_path / "tournament.yaml"
    path.write_text(yaml.safe_dump({
        "env": "pettingzoo", "task": "connect_four_v3", "seeds": 1,
        "players": {
            "random": {"agent": {"type": "random"}},
            "scripted": {"agent": {"type": "scripted"}},
            "badkey": {"agent": {"type": "naive"},
                       "client": {"client_name": "openai", "base_url": base_url,
                                  "model_id": "fake-model", "max_retries": 0}},
        },
        "eval": {"output_dir": str(out)},
    }))
    return path, out


def _run(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator.apps.cli", "tournament", str(path), "--no-progress"],
        cwd=ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
        env={**os.environ, "OPENAI_API_KEY": KEY, "COLUMNS": "200"})


def test_games_failing_on_a_bad_key_count_for_nobody_and_fail_the_tournament(
        tmp_path: Path) -> None:
    with FakeOpenAI(reply="column 1") as server:
        # every request of the bad player's games is refused: 4 games, one call each
        server.script(*(Behaviour(status=401, body={"error": {"message": PROVIDER_MESSAGE}})
                        for _ in range(8)))
        path, out = _tournament(tmp_path, server.base_url)
        run = _run(path)
        calls = len(server.requests)
    assert run.returncode == 1, run.stderr
    assert calls == 4  # one refused call per game of the bad player, none retried
    # the count and the first distinct error, once for the 4 games that share it
    assert "4 of 6 episode(s) failed (agent_error: 4); 2 scored" in run.stderr
    error_lines = [line for line in run.stderr.splitlines() if PROVIDER_MESSAGE in line]
    assert len(error_lines) == 1 and "(and 3 more episode(s))" in error_lines[0]
    assert "bad API key for openai (HTTP 401" in error_lines[0]
    assert KEY not in run.stderr

    document = json.loads((out / "tournament.json").read_text())
    standings = {s["player"]: s for s in document["standings"]}
    # the failed games count for nobody: only random vs scripted (2 games) are results
    assert standings["badkey"]["games"] == 0 and standings["badkey"]["win_rate"] is None
    assert standings["random"]["games"] == standings["scripted"]["games"] == 2
    assert standings["random"]["wins"] + standings["scripted"]["wins"] + \
        standings["random"]["draws"] == 2
    for other in ("random", "scripted"):
        assert document["matrix"][other]["badkey"]["games"] == 0
        assert document["matrix"]["badkey"][other]["win_rate"] is None
    failed = [g for g in document["games"] if "badkey" in g["pairing"]]
    assert len(failed) == 4
    assert all(g["status"] == "agent_error" and g["outcome"] == {} for g in failed)
    assert all(PROVIDER_MESSAGE in g["error"] for g in failed)
    assert document["unscored_games"] == 4
    outcome = document["outcome"]
    assert (outcome["state"], outcome["exit_code"], outcome["episodes_planned"],
            outcome["episodes_scored"], outcome["failed_by_reason"]) == (
        "failed", 1, 6, 2, {"agent_error": 4})
    assert PROVIDER_MESSAGE in (out / "tournament.md").read_text()


def test_a_tournament_whose_games_are_all_scored_exits_0(tmp_path: Path) -> None:
    path = tmp_path / "tournament.yaml"
    path.write_text(yaml.safe_dump({
        "env": "pettingzoo", "task": "tictactoe_v3", "seeds": 1,
        "players": {"random": {"agent": {"type": "random"}},
                    "dummy": {"agent": {"type": "dummy"}}},
        "eval": {"output_dir": str(tmp_path / "out")}}))
    run = _run(path)
    assert run.returncode == 0, run.stderr
    assert "done: all 2 episode(s) scored" in run.stderr
    document = json.loads((tmp_path / "out" / "tournament.json").read_text())
    assert document["outcome"]["state"] == "succeeded" and document["unscored_games"] == 0
