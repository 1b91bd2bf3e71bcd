"""The multigrid family over real gRPC on loopback: a Soccer 2v2 and a Collect game played to
the end with random actions; every agent acts each step; team metrics present and consistent."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from env_server.families import FAMILIES
from moria.clients import EnvClient
from moria.codecs import (
    array_from_tensor,
    dict_from_struct,
    rgb_from_image,
    struct_from_dict,
    text_action,
)
from moria.common.v1 import types_pb2
from moria.env.v1 import env_service_pb2 as env_pb
from tests.support.servers import env_server

ACTIONS = ["noop", "left", "right", "forward", "pickup", "drop", "toggle", "done"]


@pytest.fixture(autouse=True)
def _register(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(FAMILIES, "multigrid", "env_server.families.multigrid:MultigridFamily")


def _player(agent_id: str, role: str = "", **options: Any) -> types_pb2.PlayerSpec:
    return types_pb2.PlayerSpec(agent_id=agent_id, role=role, options=struct_from_dict(options))


async def _play_to_end(session: Any, opened: env_pb.OpenResponse, seed: int
                       ) -> tuple[env_pb.StepResponse, float]:
    """Random actions for every agent until the episode ends; returns the last step and the
    sum of all rewards seen."""
    rng = np.random.default_rng(seed)
    agents = sorted(opened.agents)
    assert sorted(opened.next_agents) == agents
    total = 0.0
    for _ in range(opened.max_steps):
        step = await session.step({a: text_action(ACTIONS[int(rng.integers(8))])
                                   for a in agents})
        total += sum(s.reward for s in step.agents.values())
        if step.HasField("episode_end"):
            return step, total
        assert sorted(step.next_agents) == agents  # simultaneous: everyone acts every step
    raise AssertionError("the episode did not end within max_steps")


def _check_outcomes(metrics: dict[str, Any]) -> None:
    teams = metrics["teams"]
    scores = {c: t["goals_for"] for c, t in teams.items()}
    best = max(scores.values())
    top = [c for c, v in scores.items() if v == best]
    for colour, team in teams.items():
        expected = "loss" if colour not in top else "win" if len(top) == 1 else "draw"
        assert team["outcome"] == expected
        assert team["goals_against"] == sum(v for c, v in scores.items() if c != colour)
        for agent in team["agents"]:
            assert metrics["agent_outcomes"][agent] == expected
        assert sum(metrics["agent_goals"][a] for a in team["agents"]) == team["goals_for"]
    first = metrics["agent_outcomes"]["agent_0"]
    assert metrics["progression"] == {"win": 1.0, "draw": 0.5, "loss": 0.0}[first]
    assert metrics["winner"] == (top[0] if len(top) == 1 else "")


async def test_soccer_2v2_random_play_to_the_end_over_grpc() -> None:
    async with env_server(("multigrid",)) as srv:
        client = EnvClient(srv.target)
        tasks = {t.task: t for t in await client.list_tasks("multigrid")}
        assert tasks["MosaicMultiGrid-S-2v2-IndAgObs-v1"].num_agents == 4

        session = client.session()
        opened = await session.open(env_pb.OpenRequest(
            task="multigrid:MosaicMultiGrid-Soccer-2vs2-IndAgObs-v0", seed=27,
            players=[_player("agent_0", coordination_level=3, observation_mode="visible_teammates"),
                     _player("agent_1", role="defender", coordination_level=3),
                     _player("agent_2", coordination_level=2),
                     _player("agent_3", coordination_level=1)],
            observation=env_pb.ObservationOptions(
                feedback_on_invalid_action=True, include_tensors=True)))
        assert opened.family == "multigrid" and opened.max_steps == 256
        start = opened.agents["agent_0"]
        assert [a.name for a in start.action_space.actions] == ACTIONS
        assert start.action_space.default_action == "noop"
        assert "Your role: forward." in start.instruction
        assert "agent_1 is your teammate and plays defender." in start.instruction
        assert "Tips for playing together" not in opened.agents["agent_3"].instruction
        text = start.observation.text["long_term_context"]
        assert "You are facing: " in text and "Teammates:\n- agent_1 (green)" in text
        assert not start.observation.HasField("image")  # images only when asked
        frame = await session.render(types_pb2.IMAGE_ENCODING_RAW_RGB)
        assert rgb_from_image(frame).shape == (352, 512, 3)
        assert array_from_tensor(start.observation.tensors["image"]).shape == (3, 3, 3)

        step, _ = await _play_to_end(session, opened, seed=5)
        end = step.episode_end
        metrics = dict_from_struct(end.metrics)
        assert metrics["game"] == "soccer" and set(metrics["teams"]) == {"green", "blue"}
        green, blue = metrics["teams"]["green"], metrics["teams"]["blue"]
        assert green["agents"] == ["agent_0", "agent_1"] and blue["agents"] == ["agent_2",
                                                                                 "agent_3"]
        assert green["goals_for"] == blue["goals_against"]
        assert blue["goals_for"] == green["goals_against"]
        if end.reason == types_pb2.END_REASON_TERMINATED:
            assert metrics["end_reason"] == "goals_to_win"
            assert max(green["goals_for"], blue["goals_for"]) == 2
        else:
            assert end.reason == types_pb2.END_REASON_TRUNCATED
            assert metrics["end_reason"] == "step_limit" and end.num_steps == 256
        assert green["goals_for"] + blue["goals_for"] >= 1  # this seed's random play scores
        held = green["possession_steps"] + blue["possession_steps"]
        shares = green["possession_share"] + blue["possession_share"]
        assert shares == pytest.approx(1.0 if held else 0.0)
        for team in (green, blue):
            assert team["passes"] >= 0 and team["steals"] >= 0
        _check_outcomes(metrics)
        assert metrics["players"]["agent_1"]["role"] == "defender"
        assert set(end.returns) == {"agent_0", "agent_1", "agent_2", "agent_3"}
        await session.close()


async def test_collect_random_play_to_the_end_over_grpc() -> None:
    async with env_server(("multigrid",)) as srv:
        session = EnvClient(srv.target).session()
        opened = await session.open(env_pb.OpenRequest(
            task="multigrid:MosaicMultiGrid-C-2v2-IndAgObs-v1", seed=8,
            options=struct_from_dict({"coordination_level": 3}),
            observation=env_pb.ObservationOptions(feedback_on_invalid_action=True)))
        assert sorted(opened.agents) == ["agent_0", "agent_1", "agent_2", "agent_3"]
        assert "Your role" not in opened.agents["agent_0"].instruction  # falls back to level 2
        bad = await session.step({"agent_0": text_action("dance"), "agent_1": text_action("left"),
                                  "agent_2": text_action("noop"), "agent_3": text_action("right")})
        result = bad.agents["agent_0"].action_result
        assert not result.valid and result.applied_action.text == "noop"
        assert "noop" in result.feedback
        assert bad.agents["agent_0"].observation.text["short_term_context"] == ""

        step, _ = await _play_to_end(session, opened, seed=9)
        metrics = dict_from_struct(step.episode_end.metrics)
        assert metrics["game"] == "collect"
        collected = sum(t["goals_for"] for t in metrics["teams"].values())
        if metrics["end_reason"] == "all_balls_collected":
            assert collected == 7
        else:
            assert metrics["end_reason"] == "step_limit" and collected < 7
        assert "possession_share" not in metrics["teams"]["green"]
        _check_outcomes(metrics)
        assert all(p["coordination_level_used"] == 2 for p in metrics["players"].values())
        closed = await session.close()
        assert closed is not None and closed.episode_end.num_steps == step.episode_end.num_steps
