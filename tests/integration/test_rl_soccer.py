"""The shipped Soccer 2v2 checkpoint (``examples/checkpoints/soccer_2v2_mlp.npz``) as ``rl``
seats, served by a real Policy server, against a real multigrid Env server through the
orchestrator.

- Two rl seats (agent_0, agent_1: the green team) against two random seats, over 4 full
  episodes (256 steps or 2 goals): the rl team scores more goals than it concedes, and every rl
  answer is a valid action.
- The hybrid seating of docs/rl-checkpoints.md (rl + a model player vs rl + random; ``dummy``
  stands in for the LLM to keep the test fast) loads and plays one short episode.

The measured figures are printed (run with ``-s`` to see them)."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from orchestrator.core.runner import run_evaluation
from orchestrator.plan.spec import load_spec
from tests.support.servers import LOCAL_STACK_FILES, env_server, policy_server

CHECKPOINT = Path(__file__).resolve().parents[2] / "examples/checkpoints/soccer_2v2_mlp.npz"
TASK = "MosaicMultiGrid-S-2v2-IndAgObs-v1"
RL_ACTIONS = {"left", "right", "forward", "pickup"}


async def _run(out: Path, episodes: int, *overrides: str) -> list[dict]:
    async with env_server(("multigrid",)) as env_srv, policy_server(files=LOCAL_STACK_FILES) as pol:
        spec = load_spec(None, [
            "envs.names=multigrid", f"tasks.multigrid_tasks=[{TASK}]",
            f"eval.num_episodes.multigrid={episodes}", f"eval.output_dir={out}",
            "eval.num_workers=2",
            f"endpoints.env.multigrid=[{env_srv.target}]", f"endpoints.policy=[{pol.target}]",
            "agent.type=random", *overrides])
        outcome = await run_evaluation(spec, console=Console(quiet=True), show_progress=False)
    assert outcome.ran == episodes
    records = [json.loads(p.read_text()) for p in sorted(out.rglob("*_run_*.json"))]
    assert len(records) == episodes
    return records


def _rl(seat: str) -> list[str]:
    return [f"players.{seat}.agent.type=rl", f"players.{seat}.agent.checkpoint={CHECKPOINT}"]


async def test_rl_team_outscores_a_random_team(tmp_path: Path) -> None:
    records = await _run(tmp_path, 4, *_rl("agent_0"), *_rl("agent_1"))
    goals_for = goals_against = 0
    outcomes = []
    for record in records:
        # 2 goals end the game (terminated); else the 256-step limit (truncated)
        assert record["end_reason"] in ("terminated", "truncated")
        assert record["stats"]["end_reason"] in ("goals_to_win", "step_limit")
        for seat in ("agent_0", "agent_1"):
            assert record["players"][seat]["agent"]["type"] == "rl"
        teams = record["stats"]["teams"]
        assert teams["green"]["agents"] == ["agent_0", "agent_1"]
        goals_for += teams["green"]["goals_for"]
        goals_against += teams["green"]["goals_against"]
        outcomes.append(teams["green"]["outcome"])
        rl_steps = [s for s in record["steps"] if s["agent_id"] in ("agent_0", "agent_1")]
        assert rl_steps and all(s["valid"] and s["action"] in RL_ACTIONS for s in rl_steps)
    assert len({r["seed"] for r in records}) == 4
    print(f"\nSoccer 2v2 rl team (green) vs random team, 4 full episodes: goals {goals_for} "
          f"for, {goals_against} against; outcomes {outcomes}")
    assert goals_for > goals_against


async def test_hybrid_rl_and_model_seat_vs_rl_and_random_plays(tmp_path: Path) -> None:
    records = await _run(tmp_path, 1, "eval.max_steps_per_episode=24",
                         *_rl("agent_0"), "players.agent_1.agent.type=dummy",
                         *_rl("agent_2"), "players.agent_3.agent.type=random")
    (record,) = records
    types = {seat: record["players"][seat]["agent"]["type"] for seat in record["players"]}
    assert types == {"agent_0": "rl", "agent_1": "dummy", "agent_2": "rl",
                     "agent_3": "random"}
    assert record["num_steps"] == 24
    for seat in ("agent_0", "agent_2"):
        steps = [s for s in record["steps"] if s["agent_id"] == seat]
        assert len(steps) == 24
        assert all(s["valid"] and s["action"] in RL_ACTIONS for s in steps)
