"""Regressions found by the stream fuzzers (tests/fuzz): malformed requests that made a server
answer INTERNAL or UNKNOWN instead of INVALID_ARGUMENT. Real servers on loopback."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import struct_pb2

from moria.clients import channel_for
from moria.common.v1 import types_pb2
from moria.env.v1 import env_service_pb2 as env_pb
from moria.env.v1 import env_service_pb2_grpc as env_grpc
from moria.policy.v1 import policy_service_pb2 as pol_pb
from moria.policy.v1 import policy_service_pb2_grpc as pol_grpc
from tests.support.servers import env_server, policy_server

GOTO = "babyai:BabyAI-MixedTrainLocal-v0/goto"


def _struct(data: dict[str, object]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(data)
    return out


async def _first_error(call: grpc.aio.StreamStreamCall, requests: list[object],
                       ) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        for request in requests:
            await call.write(request)
            await call.read()
        await call.done_writing()
        await call.read()
    return info.value


@pytest.mark.parametrize("where", ["options", "players"])
async def test_open_with_an_infinite_struct_number_is_invalid_argument(where: str) -> None:
    """A Struct number that is infinite has no JSON form: it used to crash the decoding of
    OpenRequest.options (INTERNAL "the game crashed"); now INVALID_ARGUMENT naming the field,
    and the capacity slot is given back."""
    bad = _struct({"num_dists": float("inf")})
    request = (env_pb.OpenRequest(task=GOTO, options=bad) if where == "options" else
               env_pb.OpenRequest(task=GOTO, players=[types_pb2.PlayerSpec(
                   agent_id="agent_0", options=bad)]))
    async with env_server(capacity=1) as env:
        stub = env_grpc.EnvServiceStub(channel_for(env.target))
        err = await _first_error(stub.Session(), [env_pb.SessionRequest(open=request)])
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
        assert where in (err.details() or "")
        # the only slot is free again: a normal session opens
        call = stub.Session()
        await call.write(env_pb.SessionRequest(open=env_pb.OpenRequest(task=GOTO)))
        assert (await call.read()).WhichOneof("response") == "opened"
        call.cancel()


#: A player that keeps frames (so the server decodes them); its model is never called, as
#: the malformed Observe fails first.
IMAGE_PLAYER = {"agent": {"type": "naive", "max_image_history": 1},
                "client": {"client_name": "vllm", "base_url": "http://127.0.0.1:9/v1",
                           "model_id": "m"}}


@pytest.mark.parametrize(("observation", "config"), [
    (types_pb2.Observation(tensors={"grid": types_pb2.Tensor(dtype=0, shape=[2], data=b"ab")}),
     {"agent": {"type": "dummy"}}),
    (types_pb2.Observation(tensors={"grid": types_pb2.Tensor(
        dtype=types_pb2.DATA_TYPE_UINT8, shape=[3], data=b"ab")}), {"agent": {"type": "dummy"}}),
    (types_pb2.Observation(image=types_pb2.Image(
        encoding=types_pb2.IMAGE_ENCODING_RAW_RGB, width=2, height=2, data=b"xyz")),
     IMAGE_PLAYER),
    (types_pb2.Observation(info=_struct({"expert_action": float("inf")})),
     {"agent": {"type": "dummy"}}),
], ids=["unset-dtype", "short-bytes", "raw-rgb-size", "infinite-info"])
async def test_malformed_observe_is_invalid_argument(observation: types_pb2.Observation,
                                                    config: dict[str, object]) -> None:
    """A malformed Observe used to escape the Play handler as an exception (UNKNOWN); now the
    stream ends with INVALID_ARGUMENT and the stream slot is given back. (An image is only
    decoded for a player that keeps images: tests/integration/test_server_hardening.py.)"""
    async with policy_server(capacity=1) as pol:
        stub = pol_grpc.PolicyServiceStub(channel_for(pol.target))
        begin = pol_pb.Begin(agent_id="agent_0", agent_config=_struct(
            config), action_space=types_pb2.ActionSpace(
                actions=[types_pb2.NamedAction(name="go forward")]))
        err = await _first_error(stub.Play(), [
            pol_pb.PlayRequest(begin=begin),
            pol_pb.PlayRequest(observe=pol_pb.Observe(observation=observation))])
        assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()
        assert "malformed observe" in (err.details() or "")
        info = await stub.GetInfo(pol_pb.GetInfoRequest())
        assert info.active_streams == 0
