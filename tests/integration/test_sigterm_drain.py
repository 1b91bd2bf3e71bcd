"""A real server process receiving SIGTERM drains: health NOT_SERVING, new sessions refused with
UNAVAILABLE, the running session finishes, then the process exits cleanly."""

from __future__ import annotations

import asyncio
import signal

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from moria.clients import EnvClient, channel_for, close_channels
from moria.codecs import text_action
from moria.env.v1 import env_service_pb2 as env_pb
from tests.support.processes import start_server
from tests.support.waiting import async_wait_until

GOTO = "babyai:BabyAI-MixedTrainLocal-v0/goto"


async def _health(target: str) -> int:
    stub = health_pb2_grpc.HealthStub(channel_for(target))
    reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=2)
    return int(reply.status)


async def test_sigterm_drains_then_exits() -> None:
    server = start_server("env_server", "--grace", "20")  # serving once it prints READY
    target = server.target
    try:
        assert await _health(target) == health_pb2.HealthCheckResponse.SERVING
        client = EnvClient(target)
        running = client.session()
        await running.open(env_pb.OpenRequest(task=GOTO, seed=1))
        server.process.send_signal(signal.SIGTERM)

        async def not_serving() -> bool:
            assert server.process.poll() is None, "exited with a session still running:\n" + (
                "\n".join(server.log[-20:]))
            return await _health(target) == health_pb2.HealthCheckResponse.NOT_SERVING

        await async_wait_until(not_serving, "health NOT_SERVING after SIGTERM", timeout=30)
        assert (await client.get_info(timeout=5.0)).draining
        late = client.session()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await late.open(env_pb.OpenRequest(task=GOTO, seed=2))
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        assert (await running.step({"agent_0": text_action("turn left")})).step == 1
        assert server.process.poll() is None  # still serving the running session
        await running.close()
        await close_channels()
        assert await asyncio.to_thread(server.wait_exit, 30) == 0
        assert any("draining: 1 active session" in line for line in server.log), server.log
    finally:
        server.kill()
