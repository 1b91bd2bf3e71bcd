"""The rl player end to end: the shipped Connect Four checkpoint, served by a real Policy server,
plays a real PettingZoo Env server through the orchestrator against the random player.

Every game is played to its end with no illegal move, in either seat, and the checkpoint wins
far more often than random play does (random vs random: about 55% for the first seat, 45% for
the second)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from orchestrator.core.runner import PreflightError, run_evaluation
from orchestrator.plan.spec import load_spec
from tests.support.servers import LOCAL_STACK_FILES, env_server, policy_server

CHECKPOINT = Path(__file__).resolve().parents[2] / "examples/checkpoints/connect_four_v3_mlp.npz"
GAMES = 20
#: measured with the shipped checkpoint (run seed 0, so the games are fixed): 18 of 20 wins as
#: player_1 and 18 of 20 as player_0. A random player wins about 9 to 11 of 20 (it reaches 15
#: with a chance of about 5% in the first seat, less in the second); 15 leaves room for a
#: retrained checkpoint of similar strength.
MIN_WINS = 15


async def _play(tmp_path: Path, rl_seat: str) -> list[dict]:
    async with env_server(("pettingzoo",)) as env_srv, \
            policy_server(files=LOCAL_STACK_FILES) as pol:
        spec = load_spec(None, [
            "envs.names=pettingzoo", "tasks.pettingzoo_tasks=[connect_four_v3]",
            f"eval.num_episodes.pettingzoo={GAMES}", f"eval.output_dir={tmp_path}",
            "eval.num_workers=4",
            f"endpoints.env.pettingzoo=[{env_srv.target}]", f"endpoints.policy=[{pol.target}]",
            "agent.type=random",
            f"players.{rl_seat}.agent.type=rl",
            f"players.{rl_seat}.agent.checkpoint={CHECKPOINT}"])
        outcome = await run_evaluation(spec, console=Console(quiet=True), show_progress=False)
    assert outcome.ran == GAMES
    return [json.loads(p.read_text()) for p in sorted(tmp_path.rglob("*_run_*.json"))]


@pytest.mark.parametrize("rl_seat", ["player_1", "player_0"])
async def test_shipped_checkpoint_beats_random_without_illegal_moves(
        tmp_path: Path, rl_seat: str) -> None:
    episodes = await _play(tmp_path, rl_seat)
    assert len(episodes) == GAMES
    assert len({e["seed"] for e in episodes}) == GAMES
    wins = 0
    for episode in episodes:
        assert episode["end_reason"] == "terminated"
        assert episode["players"][rl_seat]["agent"]["type"] == "rl"
        rl_steps = [s for s in episode["steps"] if s["agent_id"] == rl_seat]
        assert rl_steps and all(s["valid"] for s in rl_steps)
        assert all(s["action"].startswith("column ") for s in rl_steps)
        assert episode["stats"]["illegal_moves"] == {"player_0": 0, "player_1": 0}
        wins += episode["stats"]["outcome"][rl_seat] == "win"
    assert wins >= MIN_WINS, f"the rl player won only {wins} of {GAMES} games as {rl_seat}"


async def test_checkpoint_for_another_task_stops_the_run_before_any_episode(
        tmp_path: Path) -> None:
    async with env_server(("pettingzoo",)) as env_srv, \
            policy_server(files=LOCAL_STACK_FILES) as pol:
        spec = load_spec(None, [
            "envs.names=pettingzoo", "tasks.pettingzoo_tasks=[tictactoe_v3]",
            "eval.num_episodes.pettingzoo=1", f"eval.output_dir={tmp_path}",
            f"endpoints.env.pettingzoo=[{env_srv.target}]", f"endpoints.policy=[{pol.target}]",
            "agent.type=random", "players.player_2.agent.type=rl",
            f"players.player_2.agent.checkpoint={CHECKPOINT}"])
        with pytest.raises(PreflightError) as caught:
            await run_evaluation(spec, console=Console(quiet=True), show_progress=False)
    message = str(caught.value)
    assert message.startswith("pettingzoo/tictactoe_v3: the player of player_2 (rl) cannot start")
    assert "INVALID_ARGUMENT" in message
    assert ("trained for env 'pettingzoo', tasks ['connect_four_v3']; this episode is env "
            "'pettingzoo', task 'tictactoe_v3'") in message
    assert not list(tmp_path.rglob("*_run_*.json"))  # no episode was played
