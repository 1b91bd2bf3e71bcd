"""Scripted players against the random baseline through the orchestrator, with real Env and
Policy servers on loopback and the real PettingZoo and mosaic-multigrid games.

The measured figures are printed (run with ``-s`` to see them)."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from rich.console import Console

from moria.clients import PolicyClient
from moria.codecs import struct_from_dict
from moria.policy.v1 import policy_service_pb2 as pol_pb
from orchestrator.core.runner import run_evaluation
from orchestrator.plan.spec import load_spec
from tests.support.servers import env_server, policy_server


async def _run(out: Path, env: str, episodes: int, *overrides: str) -> list[dict]:
    """Run ``episodes`` episodes of ``env`` and return their records."""
    async with env_server((env,)) as env_srv, policy_server() as pol:
        spec = load_spec(None, [
            f"envs.names={env}", f"eval.num_episodes.{env}={episodes}",
            f"eval.output_dir={out}", f"endpoints.env.{env}=[{env_srv.target}]",
            f"endpoints.policy=[{pol.target}]", "agent.type=random", *overrides])
        outcome = await run_evaluation(spec, console=Console(quiet=True), show_progress=False)
    assert outcome.ran == episodes
    records = [json.loads(p.read_text()) for p in sorted(out.rglob("*_run_*.json"))]
    assert len(records) == episodes
    return records


def _results(records: list[dict], seat: str) -> list[str]:
    for record in records:
        assert record["end_reason"] == "terminated", record["end_reason"]
        assert record["players"][seat]["agent"]["type"] == "scripted"
    return [r["stats"]["outcome"][seat] for r in records]


async def test_connect_four_scripted_beats_random_in_both_seats(tmp_path: Path) -> None:
    results: list[str] = []
    for seat in ("player_0", "player_1"):  # first mover, then second mover: 10 seeds each
        records = await _run(tmp_path / seat, "pettingzoo", 10,
                             "tasks.pettingzoo_tasks=[connect_four_v3]",
                             f"players.{seat}.agent.type=scripted")
        results += _results(records, seat)
    wins = results.count("win")
    print(f"\nconnect_four_v3 scripted vs random: {wins}/{len(results)} wins, "
          f"{results.count('draw')} draws, {results.count('loss')} losses")
    assert len(results) == 20
    assert wins / len(results) >= 0.8


async def test_every_pettingzoo_game_is_played_to_the_end(tmp_path: Path) -> None:
    summary = {}
    for task, seat in (("tictactoe_v3", "player_2"), ("chess_v6", "player_0"),
                       ("go_v5", "white_0")):
        records = await _run(tmp_path / task, "pettingzoo", 1,
                             f"tasks.pettingzoo_tasks=[{task}]",
                             f"players.{seat}.agent.type=scripted")
        results = _results(records, seat)
        for record in records:
            assert record["stats"]["end"], record["stats"]  # ended by the game's own rules
            mover_steps = [s for s in record["steps"] if s["agent_id"] == seat]
            assert mover_steps and all(s["valid"] for s in mover_steps)
        summary[task] = (results, [r["num_steps"] for r in records])
    print(f"\nscripted vs random, other games: {summary}")
    assert summary["tictactoe_v3"][0] != ["loss"]  # win-or-block never loses to one random line


async def _soccer_like(tmp_path: Path, task: str, episodes: int) -> tuple[int, int]:
    records = await _run(tmp_path, "multigrid", episodes, f"tasks.multigrid_tasks=[{task}]",
                         "players.agent_0.agent.type=scripted",
                         "players.agent_1.agent.type=scripted")
    ours = theirs = 0
    for record in records:
        teams = record["stats"]["teams"]
        assert teams["green"]["agents"] == ["agent_0", "agent_1"]
        ours += teams["green"]["goals_for"]
        theirs += teams["green"]["goals_against"]
        assert all(s["valid"] for s in record["steps"] if s["agent_id"] in ("agent_0", "agent_1"))
    return ours, theirs


async def test_soccer_scripted_team_outscores_random_team(tmp_path: Path) -> None:
    ours, theirs = await _soccer_like(tmp_path, "MosaicMultiGrid-S-2v2-IndAgObs-v1", 3)
    print(f"\nSoccer 2v2 scripted (green) vs random (blue): goals {ours} for, {theirs} against")
    assert ours > theirs


async def test_collect_scripted_team_outcollects_random_team(tmp_path: Path) -> None:
    ours, theirs = await _soccer_like(tmp_path, "MosaicMultiGrid-C-2v2-IndAgObs-v1", 2)
    print(f"\nCollect 2v2 scripted (green) vs random (blue): balls {ours} for, {theirs} against")
    assert ours > theirs


async def test_begin_for_an_unsupported_game_is_invalid_argument() -> None:
    async with policy_server() as pol:
        stream = PolicyClient(pol.target).play()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stream.begin(pol_pb.Begin(
                agent_id="player_0", env_name="pettingzoo", task="rps_v2",
                agent_config=struct_from_dict({"agent": {"type": "scripted"}})))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "rps_v2" in err.value.details()
    assert "pettingzoo/connect_four_v3" in err.value.details()
