"""The crafter family over real gRPC on loopback: a short episode, options, errors."""

from __future__ import annotations

import grpc
import pytest

from moria.clients import EnvClient
from moria.codecs import array_from_tensor, dict_from_struct, rgb_from_image, text_action
from moria.common.v1 import types_pb2
from moria.env.v1 import env_service_pb2 as env_pb
from tests.support.servers import env_server

TASK = "crafter:default"


async def test_short_episode_with_current_text_image_and_tensors() -> None:
    async with env_server(("crafter",)) as srv:
        session = EnvClient(srv.target).session()
        opened = await session.open(env_pb.OpenRequest(
            task=TASK, seed=11, max_steps=4,
            options={"text_format": "current", "precise_location": True,
                     "size": [256, 256], "seed": None},
            observation=env_pb.ObservationOptions(
                include_image=True, include_tensors=True, feedback_on_invalid_action=True,
                image_encoding=types_pb2.IMAGE_ENCODING_RAW_RGB)))
        assert opened.family == "crafter" and opened.max_steps == 4
        start = opened.agents["agent_0"]
        names = [a.name for a in start.action_space.actions]
        assert len(names) == 17 and names[0] == "Noop" and names[-1] == "Make Iron Sword"
        assert start.action_space.default_action == "Noop"
        assert "Collect Diamond" in start.instruction
        text = start.observation.text
        assert text["long_term_context"].startswith("You see:")
        assert text["short_term_context"].startswith("Your status:")
        assert rgb_from_image(start.observation.image).shape == (256, 256, 3)
        window = array_from_tensor(start.observation.tensors["semantic"])
        assert window.shape == (7, 9) and window[3, 4] == 13  # the player

        step = await session.step({"agent_0": text_action("Move North")})
        assert step.agents["agent_0"].action_result.valid
        step = await session.step({"agent_0": text_action("move north")})  # wrong case
        result = step.agents["agent_0"].action_result
        assert not result.valid and result.applied_action.text == "Noop"
        assert "'Noop'" in result.feedback  # only there: the text stays the env's own
        assert step.agents["agent_0"].observation.text["short_term_context"].startswith(
            "Your status:")
        metrics = dict_from_struct(step.metrics)
        assert metrics["text_format"] == "current" and metrics["precise_location"] is True
        assert metrics["progression"] == 0.0 and len(metrics["achievements"]) == 22

        for action in ("Do", "Noop"):
            step = await session.step({"agent_0": text_action(action)})
        assert step.HasField("episode_end")
        assert step.episode_end.reason == types_pb2.END_REASON_TRUNCATED
        assert dict_from_struct(step.episode_end.metrics)["steps"] == 4
        await session.close()


async def test_same_seed_same_start_and_bad_options_rejected() -> None:
    async with env_server(("crafter",)) as srv:
        client = EnvClient(srv.target)
        starts = []
        for _ in range(2):
            session = client.session()
            opened = await session.open(env_pb.OpenRequest(task=TASK, seed=5))
            starts.append(opened.agents["agent_0"].observation.text["long_term_context"])
            await session.close()
        assert starts[0] == starts[1]
        for options, word in (({"unique_items": False}, "text_format=current"),
                              ({"view": [7, 7]}, "view")):
            session = client.session()
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await session.open(env_pb.OpenRequest(task=TASK, seed=1, options=options))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert word in err.value.details()
        session = client.session()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await session.open(env_pb.OpenRequest(task=TASK, seed=1, oracle=True))
        assert "no expert" in err.value.details()
