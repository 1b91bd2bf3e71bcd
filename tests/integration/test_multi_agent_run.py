"""Multi-agent runs through the orchestrator: each seat gets its own player from the run spec's
``players`` section, seat options reach the env, and the records keep who played what.

Real Env and Policy servers on loopback; the real PettingZoo and mosaic-multigrid games."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from rich.console import Console

from orchestrator.core.runner import run_evaluation
from orchestrator.plan.spec import load_spec
from tests.support.servers import env_server, policy_server


async def _run(tmp_path: Path, env: str, *overrides: str) -> list[dict]:
    async with env_server((env,)) as env_srv, policy_server() as pol:
        spec = load_spec(None, [
            f"envs.names={env}", f"eval.num_episodes.{env}=2", f"eval.output_dir={tmp_path}",
            f"endpoints.env.{env}=[{env_srv.target}]", f"endpoints.policy=[{pol.target}]",
            *overrides])
        outcome = await run_evaluation(spec, console=Console(quiet=True), show_progress=False)
    assert outcome.ran == 2
    return [json.loads(p.read_text()) for p in sorted(tmp_path.rglob("*_run_*.json"))]


async def test_tictactoe_seats_alternate_see_the_new_board_and_finish(tmp_path: Path) -> None:
    episodes = await _run(tmp_path, "pettingzoo", "tasks.pettingzoo_tasks=[tictactoe_v3]",
                          "agent.type=dummy", "players.player_2.agent.type=dummy",
                          "players.player_2.agent.max_text_history=3")
    for episode in episodes:
        assert episode["end_reason"] == "terminated"
        steps = episode["steps"]
        movers = [s["agent_id"] for s in steps]
        assert movers[0] == "player_1"  # X moves first, and only the mover acts
        assert all(a != b for a, b in itertools.pairwise(movers))
        assert all(s["valid"] for s in steps)
        outcome = episode["stats"]["outcome"]
        assert set(outcome) == {"player_1", "player_2"}
        assert sum(episode["stats"]["returns"].values()) == 0
        assert episode["players"]["player_2"]["agent"]["max_text_history"] == 3


async def test_soccer_seats_get_their_role_level_and_observation_mode(tmp_path: Path) -> None:
    episodes = await _run(
        tmp_path, "multigrid", "tasks.multigrid_tasks=[MosaicMultiGrid-S-2v2-IndAgObs-v1]",
        "agent.type=dummy", "eval.max_steps_per_episode=12",
        "players.agent_0.coordination_level=3", "players.agent_0.role=forward",
        "players.agent_1.coordination_level=3", "players.agent_1.role=defender",
        "players.agent_1.observation_mode=visible_teammates")
    for episode in episodes:
        assert episode["num_steps"] == 12
        first = [s for s in episode["steps"] if s["step"] == 0]
        assert {s["agent_id"] for s in first} == {"agent_0", "agent_1", "agent_2", "agent_3"}
        assert "teammate" in next(s for s in first if s["agent_id"] == "agent_1")[
            "observation"].lower()
        assert episode["players"]["agent_0"] == {"role": "forward", "coordination_level": 3,
                                                 "player": "dummy"}
