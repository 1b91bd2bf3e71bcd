"""The babaisai family over real gRPC on loopback: list, open, step, invalid action, oracle win."""

from __future__ import annotations

from moria.clients import EnvClient
from moria.codecs import dict_from_struct, rgb_from_image, struct_from_dict, text_action
from moria.common.v1 import types_pb2
from moria.env.v1 import env_service_pb2 as env_pb
from tests.support.servers import env_server

A = "agent_0"


async def test_babaisai_episode_over_grpc() -> None:
    async with env_server(("babaisai",)) as srv:
        client = EnvClient(srv.target)
        info = await client.get_info()
        assert list(info.families) == ["babaisai"]
        tasks = await client.list_tasks("babaisai")
        assert len(tasks) == 40 and tasks[0].task == "env/goto_win"

        session = client.session()
        opened = await session.open(env_pb.OpenRequest(
            task="babaisai:env/two_room-break_stop-goto_win", seed=4, oracle=True,
            options=struct_from_dict({"text_fixes": False, "tile_size": 8}),
            observation=env_pb.ObservationOptions(
                feedback_on_invalid_action=True, include_image=True,
                image_encoding=types_pb2.IMAGE_ENCODING_RAW_RGB)))
        assert opened.family == "babaisai" and opened.max_steps == 100
        start = opened.agents[A]
        assert [a.name for a in start.action_space.actions] == [
            "idle", "up", "right", "down", "left"]
        assert start.action_space.default_action == "idle"
        assert "Baba Is You" in start.instruction
        obs = start.observation
        text = obs.text["long_term_context"]
        assert text.startswith("Active rules:\n") and "\nwall is stop\n" in text
        assert rgb_from_image(obs.image).shape == (9 * 8, 13 * 8, 3)

        step = await session.step({A: text_action("fly")})
        result = step.agents[A].action_result
        assert not result.valid and result.applied_action.text == "idle"
        assert "idle" in result.feedback
        assert step.agents[A].observation.text["short_term_context"] == ""
        assert step.step == 1

        obs = step.agents[A].observation
        for _ in range(opened.max_steps):
            hint = dict_from_struct(obs.info)["expert_action"]
            step = await session.step({A: text_action(hint)})
            obs = step.agents[A].observation
            if step.HasField("episode_end"):
                break
        assert step.episode_end.reason == types_pb2.END_REASON_TERMINATED
        metrics = dict_from_struct(step.episode_end.metrics)
        assert metrics["progression"] == 1.0 and metrics["won"] is True
        assert metrics["target_plan"].startswith("break[wall is stop], goto[")
        assert step.episode_end.returns[A] > 0
        await session.close()
