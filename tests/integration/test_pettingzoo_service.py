"""The pettingzoo family over real gRPC on loopback: each game opened and played to its end."""

from __future__ import annotations

import random

import chess
import grpc
import pytest

from env_server.families import FAMILIES
from moria.clients import EnvClient
from moria.codecs import array_from_tensor, dict_from_struct, rgb_from_image, struct_from_dict
from moria.codecs import text_action as text
from moria.common.v1 import types_pb2
from moria.env.v1 import env_service_pb2 as env_pb
from tests.support.servers import env_server

FIRST = {"chess_v6": "player_0", "connect_four_v3": "player_0", "go_v5": "black_0",
         "tictactoe_v3": "player_1"}


@pytest.fixture(autouse=True)
def _register(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(FAMILIES, "pettingzoo", "env_server.families.pettingzoo:PettingZooFamily")


def _observation_options(image: bool = False) -> env_pb.ObservationOptions:
    return env_pb.ObservationOptions(
        feedback_on_invalid_action=True, include_tensors=True, include_image=image,
        image_encoding=types_pb2.IMAGE_ENCODING_RAW_RGB)


async def _play_to_end(session: object, opened: env_pb.OpenResponse, rng: random.Random,
                       script: list[str] | None = None) -> env_pb.StepResponse:
    """Each step: every agent due to act answers; the one with legal moves plays one (from
    ``script`` while it lasts, checked against the legal list), the others send a note."""
    observations = {a: s.observation for a, s in opened.agents.items()}
    due = list(opened.next_agents)
    moves = list(script or [])
    while True:
        actions = {}
        for agent in due:
            legal = list(observations[agent].legal_actions)
            if not legal:
                actions[agent] = text("(waiting)")
                continue
            move = moves.pop(0) if moves else rng.choice(legal)
            assert move in legal
            actions[agent] = text(move)
        step = await session.step(actions)  # type: ignore[attr-defined]
        assert not step.error.message, step.error.message
        for agent, result in step.agents.items():
            observations[agent] = result.observation
            if agent in actions and actions[agent].text != "(waiting)":
                assert result.action_result.valid
                assert result.action_result.applied_action.text == actions[agent].text
        if step.HasField("episode_end"):
            assert list(step.next_agents) == []
            return step
        assert len(step.next_agents) == 1
        mover = step.next_agents[0]
        assert list(observations[mover].legal_actions)
        due = list(step.next_agents)


async def test_each_game_played_to_the_end_over_grpc() -> None:
    async with env_server(("pettingzoo",)) as srv:
        client = EnvClient(srv.target)
        tasks = await client.list_tasks("pettingzoo")
        assert sorted(t.task for t in tasks) == sorted(FIRST)
        assert all(t.num_agents == 2 for t in tasks)

        for index, task in enumerate(["connect_four_v3", "go_v5", "tictactoe_v3", "chess_v6"]):
            session = client.session()
            opened = await session.open(env_pb.OpenRequest(
                task=f"pettingzoo:{task}", seed=7 + index, observation=_observation_options()))
            first = FIRST[task]
            start = opened.agents[first]
            assert "random legal move" in start.instruction
            legal = list(start.observation.legal_actions)
            mask = array_from_tensor(start.observation.tensors["action_mask"])
            assert int(mask.sum()) == len(legal) == sum(start.observation.action_mask)
            assert "it is your turn" in start.observation.text["short_term_context"]
            assert list(opened.next_agents) == [first]
            # chess ends by a scripted fool's mate; the other games are played out randomly
            script = ["f2f3", "e7e5", "g2g4", "d8h4"] if task == "chess_v6" else None
            step = await _play_to_end(session, opened, random.Random(index), script)
            end = step.episode_end
            assert end.reason == types_pb2.END_REASON_TERMINATED
            returns = dict(end.returns)
            assert sorted(returns) == sorted(opened.agents) and sum(returns.values()) == 0.0
            metrics = dict_from_struct(end.metrics)
            assert metrics["returns"] == returns
            for agent, value in returns.items():
                assert metrics["outcome"][agent] == {1.0: "win", 0.0: "draw",
                                                     -1.0: "loss"}[value]
            if task == "chess_v6":
                assert metrics["winner"] == "player_1" and returns["player_1"] == 1.0
                assert chess.Board(dict_from_struct(
                    step.agents["player_0"].observation.info)["fen"]).is_checkmate()
            await session.close()


async def test_illegal_move_image_and_go_board_size_over_grpc() -> None:
    async with env_server(("pettingzoo",)) as srv:
        client = EnvClient(srv.target)
        session = client.session()
        opened = await session.open(env_pb.OpenRequest(
            task="go_v5", seed=3, observation=_observation_options(image=True),
            options=struct_from_dict({"board_size": 7})))
        assert opened.max_steps == 4 * 7 * 7
        obs = opened.agents["black_0"].observation
        assert len(obs.legal_actions) == 7 * 7 + 1
        assert array_from_tensor(obs.tensors["observation"]).shape == (7, 7, 17)
        assert rgb_from_image(obs.image).shape == (400, 400, 3)
        actions = {a: text("I9 is not a point") for a in opened.next_agents}
        step = await session.step(actions)
        result = step.agents["black_0"].action_result
        assert not result.valid and result.applied_action.text in obs.legal_actions
        assert result.feedback.startswith("Your previous answer was not a legal move")
        metrics = dict_from_struct(step.metrics)
        assert metrics["illegal_moves"]["black_0"] == 1.0
        assert list(step.next_agents) == ["white_0"]
        await session.close()

        bad = client.session()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await bad.open(env_pb.OpenRequest(task="go_v5", options=struct_from_dict(
                {"board_size": 8})))
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "board_size" in (err.value.details() or "")
