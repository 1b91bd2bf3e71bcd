"""Games in worker processes: they play like in-process games, and a worker killed with SIGKILL
fails only its own session (INTERNAL) while the server keeps serving."""

from __future__ import annotations

import asyncio
import os
import random
import signal

import grpc
import pytest

from env_server.families import FAMILIES
from env_server.isolation import ProcessGame
from moria.clients import EnvClient, EnvSession
from moria.codecs import dict_from_struct, text_action
from moria.common.v1 import types_pb2
from moria.env.v1 import env_service_pb2 as env_pb
from tests.support.servers import env_server

GOTO = "babyai:BabyAI-MixedTrainLocal-v0/goto"


def _worker_pid(servicer: object, session_count: int) -> list[int]:
    """The worker pids of the open sessions; asserts there are ``session_count`` of them."""
    sessions = servicer.sessions.values()  # type: ignore[attr-defined]
    pids = [s.game.pid for s in sessions if isinstance(s.game, ProcessGame)]
    assert len(pids) == session_count
    return pids


async def test_isolated_game_plays_the_same_as_in_process() -> None:
    texts = []
    for isolate in ((), ("babyai",)):
        async with env_server(process_families=isolate) as srv:
            session = EnvClient(srv.target).session()
            opened = await session.open(env_pb.OpenRequest(task=GOTO, seed=5, oracle=True))
            obs = opened.agents["agent_0"].observation
            trace = [obs.text["long_term_context"]]
            for _ in range(opened.max_steps):
                step = await session.step({"agent_0": text_action(
                    dict_from_struct(obs.info)["expert_action"])})
                obs = step.agents["agent_0"].observation
                trace.append(obs.text["long_term_context"])
                if step.HasField("episode_end"):
                    break
            assert step.episode_end.reason == types_pb2.END_REASON_TERMINATED
            _worker_pid(srv.servicer, 1 if isolate else 0)  # asserts the worker count
            await session.close()
            texts.append(trace)
    assert texts[0] == texts[1]


async def test_unknown_task_in_a_worker_is_not_found() -> None:
    async with env_server(process_families=("babyai",)) as srv:
        session = EnvClient(srv.target).session()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await session.open(env_pb.OpenRequest(task="babyai:Nope-v0"))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        assert "BabyAI-MixedTrainLocal-v0/goto" in err.value.details()


async def test_sigkill_of_a_worker_fails_only_its_session(monkeypatch) -> None:
    monkeypatch.setitem(FAMILIES, "crashy", "tests.support.crash_family:CrashFamily")
    async with env_server(families=("babyai", "crashy"),
                          process_families=("babyai", "crashy")) as srv:
        client = EnvClient(srv.target)
        victim, survivor = client.session(), client.session()
        opened = await victim.open(env_pb.OpenRequest(task=GOTO, seed=1))
        await survivor.open(env_pb.OpenRequest(task=GOTO, seed=2))
        pids = _worker_pid(srv.servicer, 2)
        victim_pid = srv.servicer.sessions[opened.session_id].game.pid
        assert victim_pid in pids
        os.kill(victim_pid, signal.SIGKILL)
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await victim.step({"agent_0": text_action("turn left")})
        assert err.value.code() == grpc.StatusCode.INTERNAL
        assert "signal 9" in err.value.details()
        assert (await survivor.step({"agent_0": text_action("turn left")})).step == 1
        # an exception inside an isolated game is INTERNAL too, and the server goes on
        crashing = client.session()
        await crashing.open(env_pb.OpenRequest(task="crashy:crash"))
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await crashing.step({"agent_0": text_action("crash")})
        assert err.value.code() == grpc.StatusCode.INTERNAL and "boom" in err.value.details()
        fresh = client.session()
        await fresh.open(env_pb.OpenRequest(task=GOTO, seed=3))
        assert (await fresh.step({"agent_0": text_action("turn left")})).step == 1
        await fresh.close()
        await survivor.close()
        info = await client.get_info()
        assert info.active_sessions == 0


async def _random_trace(target: str, task: str, seed: int, steps: int,
                        ) -> tuple[EnvSession, list[str]]:
    """Open ``task`` with ``seed`` and take up to ``steps`` steps of actions drawn from its
    action list by ``random.Random(seed)``: the open session and each step's text."""
    session = EnvClient(target).session()
    opened = await session.open(env_pb.OpenRequest(task=task, seed=seed))
    agent = next(iter(opened.agents))
    names = [a.name for a in opened.agents[agent].action_space.actions][:8]
    rng, trace = random.Random(seed), []
    for _ in range(steps):
        step = await session.step({agent: text_action(rng.choice(names))})
        trace.append(step.agents[agent].observation.text["long_term_context"])
        if step.HasField("episode_end"):
            break
    return session, trace


@pytest.mark.parametrize("task", ["nle:NetHackChallenge-v0", "minihack:MiniHack-MazeWalk-9x9-v0"])
async def test_nethack_games_in_the_server_process_play_as_in_workers(task: str) -> None:
    """``--isolate ''``: NLE and MiniHack games share the server process (NLE loads a copy of
    its C library per game) and step on the event loop; three sessions played at once follow
    the same trajectories as in worker processes."""
    family = task.partition(":")[0]
    traces = {}
    for isolate in ((family,), ()):
        async with env_server(families=(family,), process_families=isolate) as srv:
            played = await asyncio.gather(*(_random_trace(srv.target, task, seed, 40)
                                            for seed in (1, 2, 3)))
            sessions = list(srv.servicer.sessions.values())
            assert [s.inline_steps for s in sessions] == [not isolate] * 3
            _worker_pid(srv.servicer, 3 if isolate else 0)  # asserts the worker count
            for session, _ in played:
                await session.close()
            traces[isolate] = [trace for _, trace in played]
    assert traces[(family,)] == traces[()]
    assert all(len(trace) >= 10 for trace in traces[()])
