"""EnvService over real gRPC on loopback: the session contract and its errors."""

from __future__ import annotations

import asyncio

import grpc
import numpy as np
import pytest

from env_server.families import FAMILIES
from moria.clients import EnvClient, check_health
from moria.codecs import array_from_tensor, dict_from_struct, rgb_from_image, text_action
from moria.common.v1 import types_pb2
from moria.env.v1 import env_service_pb2 as env_pb
from tests.support.servers import env_server
from tests.support.waiting import async_wait_until

GOTO = "babyai:BabyAI-MixedTrainLocal-v0/goto"


def _open(task: str = GOTO, seed: int = 7, **kw: object) -> env_pb.OpenRequest:
    return env_pb.OpenRequest(task=task, seed=seed, observation=env_pb.ObservationOptions(
        feedback_on_invalid_action=True), **kw)


async def _play_a_step(client: EnvClient) -> env_pb.StepResponse:
    session = client.session()
    await session.open(_open())
    resp = await session.step({"agent_0": text_action("turn left")})
    await session.close()
    return resp


async def test_open_step_close_round_trip() -> None:
    async with env_server() as srv:
        client = EnvClient(srv.target)
        session = client.session()
        opened = await session.open(_open())
        assert opened.family == "babyai"
        assert list(opened.next_agents) == ["agent_0"]
        start = opened.agents["agent_0"]
        names = [a.name for a in start.action_space.actions]
        assert names == ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]
        assert start.action_space.default_action == "go forward"
        assert "go to" in start.instruction
        assert start.observation.text["long_term_context"]
        # the typed channels and the map's same-named entries hold the same texts
        assert start.observation.long_term_context == start.observation.text["long_term_context"]
        assert (start.observation.short_term_context
                == start.observation.text["short_term_context"])
        assert "expert_action" not in dict_from_struct(start.observation.info)
        step = await session.step({"agent_0": text_action("turn left")})
        assert step.step == 1
        assert step.agents["agent_0"].action_result.valid
        assert step.agents["agent_0"].action_result.applied_action.text == "turn left"
        assert "progression" in dict_from_struct(step.metrics)
        closed = await session.close()
        assert closed is not None
        assert closed.episode_end.reason == types_pb2.END_REASON_CANCELLED


async def test_invalid_action_applies_default_and_feeds_back_only_in_the_action_result() -> None:
    """The feedback sentence is in ActionResult.feedback and in no observation text, the
    (ignored, still accepted) ObservationOptions.feedback_on_invalid_action notwithstanding."""
    async with env_server() as srv:
        session = EnvClient(srv.target).session()
        await session.open(_open())  # feedback_on_invalid_action=True on the wire
        step = await session.step({"agent_0": text_action("fly to the moon")})
        result = step.agents["agent_0"].action_result
        assert not result.valid
        assert result.applied_action.text == "go forward"
        assert "'go forward'" in result.feedback
        texts = step.agents["agent_0"].observation.text
        assert texts["short_term_context"] == ""
        assert all(result.feedback not in text for text in texts.values())
        await session.close()


async def test_same_seed_same_start_and_oracle_hint_only_when_asked() -> None:
    async with env_server() as srv:
        client = EnvClient(srv.target)
        texts = []
        for _ in range(2):
            session = client.session()
            opened = await session.open(_open(seed=1234, oracle=True))
            obs = opened.agents["agent_0"].observation
            texts.append((opened.agents["agent_0"].instruction, obs.text["long_term_context"]))
            assert dict_from_struct(obs.info)["expert_action"] in {
                a.name for a in opened.agents["agent_0"].action_space.actions}
            await session.close()
        assert texts[0] == texts[1]


async def test_oracle_solves_goto_over_grpc() -> None:
    async with env_server() as srv:
        session = EnvClient(srv.target).session()
        opened = await session.open(_open(seed=99, oracle=True))
        assert opened.progression == dict_from_struct(opened.metrics)["progression"] == 0.0
        obs = opened.agents["agent_0"].observation
        for _ in range(opened.max_steps):
            hint = dict_from_struct(obs.info)["expert_action"]
            step = await session.step({"agent_0": text_action(hint)})
            # the typed progression and the Struct's key are the same number at every step
            assert step.progression == dict_from_struct(step.metrics)["progression"]
            obs = step.agents["agent_0"].observation
            if step.HasField("episode_end"):
                break
        assert step.episode_end.reason == types_pb2.END_REASON_TERMINATED
        assert dict_from_struct(step.episode_end.metrics)["progression"] == 1.0
        assert step.episode_end.progression == step.progression == 1.0
        assert step.episode_end.returns["agent_0"] > 0
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await session.step({"agent_0": text_action("turn left")})
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION


async def test_images_png_and_raw_when_asked() -> None:
    async with env_server() as srv:
        client = EnvClient(srv.target)
        for encoding in (types_pb2.IMAGE_ENCODING_PNG, types_pb2.IMAGE_ENCODING_RAW_RGB):
            session = client.session()
            opened = await session.open(env_pb.OpenRequest(
                task=GOTO, seed=3, observation=env_pb.ObservationOptions(
                    include_image=True, image_encoding=encoding)))
            image = opened.agents["agent_0"].observation.image
            assert image.encoding == encoding
            frame = rgb_from_image(image)
            assert frame.shape == (image.height, image.width, 3) and frame.std() > 0
            full = rgb_from_image(await session.render())
            assert full.ndim == 3 and full.shape[2] == 3
            await session.close()


async def test_unknown_task_is_not_found_with_valid_list() -> None:
    async with env_server() as srv:
        session = EnvClient(srv.target).session()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await session.open(_open(task="babyai:NoSuchTask-v9"))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        assert "BabyAI-MixedTrainLocal-v0/goto" in err.value.details()
        assert (await _play_a_step(EnvClient(srv.target))).step == 1


async def test_step_before_open_is_failed_precondition() -> None:
    async with env_server() as srv:
        session = EnvClient(srv.target).session()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await session.step({"agent_0": text_action("turn left")})
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "open" in err.value.details()
        assert (await _play_a_step(EnvClient(srv.target))).step == 1


async def _active_sessions(client: EnvClient, count: int) -> bool:
    """Whether the server reports exactly ``count`` open sessions (GetInfo)."""
    return (await client.get_info()).active_sessions == count


async def test_capacity_full_is_resource_exhausted_and_frees_on_close() -> None:
    async with env_server(capacity=2) as srv:
        client = EnvClient(srv.target)
        held = [client.session() for _ in range(2)]
        for s in held:
            await s.open(_open())
        extra = client.session()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await extra.open(_open())
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        # the held sessions keep working
        assert (await held[0].step({"agent_0": text_action("turn left")})).step == 1
        await held[1].close()
        await async_wait_until(lambda: _active_sessions(client, 1),
                               "the closed session's slot to be freed", timeout=30)
        assert (await _play_a_step(client)).step == 1
        await held[0].close()


async def test_malformed_tensor_is_invalid_argument() -> None:
    async with env_server() as srv:
        client = EnvClient(srv.target)
        session = client.session()
        await session.open(_open())
        bad = types_pb2.Action(tensor=types_pb2.Tensor(
            dtype=types_pb2.DATA_TYPE_FLOAT32, shape=[2, 2], data=b"\x00" * 3))
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await session.step({"agent_0": bad})
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "needs 16" in err.value.details()
        assert (await _play_a_step(client)).step == 1


async def test_tensors_travel_only_when_asked() -> None:
    async with env_server() as srv:
        client = EnvClient(srv.target)
        plain = client.session()
        opened = await plain.open(_open())
        assert not opened.agents["agent_0"].observation.tensors
        await plain.close()
        session = client.session()
        opened = await session.open(env_pb.OpenRequest(
            task=GOTO, seed=7, observation=env_pb.ObservationOptions(include_tensors=True)))
        grid = array_from_tensor(opened.agents["agent_0"].observation.tensors["grid"])
        assert grid.shape == (7, 7, 3) and grid.dtype == np.uint8
        assert set(np.unique(grid[..., 0])) <= set(range(11))  # minigrid object ids
        assert grid[3, 6, 0] in (1, 5, 6, 7)  # own cell: empty, or the carried key/ball/box
        await session.close()


async def test_scalar_tensor_action_is_an_index() -> None:
    from moria.codecs import tensor_from_array

    async with env_server() as srv:
        session = EnvClient(srv.target).session()
        await session.open(_open())
        action = types_pb2.Action(tensor=tensor_from_array(np.array(1, dtype=np.int64)))
        step = await session.step({"agent_0": action})
        assert step.agents["agent_0"].action_result.applied_action.text == "turn right"
        await session.close()


async def test_wrong_agent_is_in_band_error_and_session_survives() -> None:
    async with env_server() as srv:
        session = EnvClient(srv.target).session()
        await session.open(_open())
        resp = await session.step({"agent_9": text_action("turn left")})
        assert resp.error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
        assert "agent_9" in resp.error.message
        ok = await session.step({"agent_0": text_action("turn left")})
        assert ok.step == 1
        await session.close()


async def test_game_crash_ends_only_that_session_with_internal(monkeypatch) -> None:
    monkeypatch.setitem(FAMILIES, "crashy", "tests.support.crash_family:CrashFamily")
    async with env_server(families=("babyai", "crashy")) as srv:
        client = EnvClient(srv.target)
        healthy = client.session()
        await healthy.open(_open())
        doomed = client.session()
        await doomed.open(env_pb.OpenRequest(task="crashy:crash"))
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await doomed.step({"agent_0": text_action("crash")})
        assert err.value.code() == grpc.StatusCode.INTERNAL
        assert "boom" in err.value.details()
        assert (await healthy.step({"agent_0": text_action("turn left")})).step == 1
        await healthy.close()
        info = await client.get_info()
        assert info.active_sessions == 0


async def test_a_game_that_crashes_in_its_first_reset_is_closed_and_frees_its_slot(
        monkeypatch) -> None:
    from tests.support.crash_family import ResetCrashGame

    monkeypatch.setitem(FAMILIES, "crashy", "tests.support.crash_family:CrashFamily")
    monkeypatch.setattr(ResetCrashGame, "closed", 0)
    async with env_server(families=("babyai", "crashy")) as srv:
        client = EnvClient(srv.target)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await client.session().open(env_pb.OpenRequest(task="crashy:crash_on_reset"))
        assert err.value.code() == grpc.StatusCode.INTERNAL
        assert "reset boom" in err.value.details()
        assert ResetCrashGame.closed == 1  # closed once, by the open that made it
        assert (await client.get_info()).active_sessions == 0
        healthy = client.session()  # the server goes on serving
        await healthy.open(_open())
        assert (await healthy.step({"agent_0": text_action("turn left")})).step == 1
        await healthy.close()


async def test_ping_answers_pong_once_opened_and_ends_an_unopened_stream() -> None:
    async with env_server() as srv:
        client = EnvClient(srv.target)
        session = client.session()
        await session.open(_open())
        assert (await session.ping()) == env_pb.PingResponse()
        assert (await session.step({"agent_0": text_action("turn left")})).step == 1
        await session.close()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await client.session().ping()
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION


async def test_idle_session_is_reaped() -> None:
    async with env_server(idle_timeout_s=0.3) as srv:
        session = EnvClient(srv.target).session()
        await session.open(_open())
        await async_wait_until(lambda: _active_sessions(EnvClient(srv.target), 0),
                               "the idle session to be reaped", timeout=30)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await session.step({"agent_0": text_action("turn left")})
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert (await EnvClient(srv.target).get_info()).active_sessions == 0


async def test_drain_refuses_new_sessions_and_lets_running_ones_finish() -> None:
    async with env_server(grace_s=5.0) as srv:
        client = EnvClient(srv.target)
        running = client.session()
        await running.open(_open())
        assert await check_health(srv.target)
        shutdown = asyncio.create_task(srv.server.shutdown())

        async def not_serving() -> bool:
            return not await check_health(srv.target)

        await async_wait_until(not_serving, "health NOT_SERVING once draining", timeout=30)
        assert srv.server.drain.draining
        late = client.session()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await late.open(_open())
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        assert (await running.step({"agent_0": text_action("turn left")})).step == 1
        await running.close()
        await asyncio.wait_for(shutdown, timeout=5)


async def test_get_info_and_list_tasks() -> None:
    async with env_server(capacity=5) as srv:
        client = EnvClient(srv.target)
        info = await client.get_info()
        assert list(info.families) == ["babyai"] and info.capacity == 5
        assert info.version.components["minigrid"] == "3.2.0"
        tasks = await client.list_tasks("babyai")
        assert [t.task for t in tasks[:5]] == [
            "BabyAI-MixedTrainLocal-v0/goto", "BabyAI-MixedTrainLocal-v0/pickup",
            "BabyAI-MixedTrainLocal-v0/open", "BabyAI-MixedTrainLocal-v0/putnext",
            "BabyAI-MixedTrainLocal-v0/pick_up_seq_go_to"]
        assert any(t.task.startswith("MiniGrid-") for t in tasks)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await client.list_tasks("nethack")
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
