"""The typed config of PolicyService (Begin.agent / Begin.client, GetInfoRequest.check_agent /
check_client) is an addition: the Struct fields keep their numbers and are still accepted, a
server given both reads the typed ones, and a bad value is reported the same either way."""

from __future__ import annotations

import grpc
import pytest

from moria.clients import PolicyClient, channel_for
from moria.codecs import struct_from_dict
from moria.common.v1 import types_pb2
from moria.config import AgentConfig, ClientConfig
from moria.policy.v1 import policy_service_pb2 as pol_pb
from moria.policy.v1 import policy_service_pb2_grpc as pol_grpc
from moria.policy_config import agent_settings, client_settings
from tests.support.servers import policy_server

SPACE = types_pb2.ActionSpace(actions=[types_pb2.NamedAction(name="go forward")],
                              default_action="go forward")


def _numbers(message: type, *names: str) -> dict[str, tuple[int, str]]:
    fields = message.DESCRIPTOR.fields_by_name  # type: ignore[attr-defined]
    return {n: (fields[n].number, (fields[n].message_type.full_name)) for n in names}


def test_the_typed_fields_are_additions() -> None:
    assert _numbers(pol_pb.Begin, "agent_config", "agent", "client") == {
        "agent_config": (5, "google.protobuf.Struct"),
        "agent": (12, "moria.policy.v1.AgentSettings"),
        "client": (13, "moria.policy.v1.ClientSettings")}
    assert _numbers(pol_pb.GetInfoRequest, "check_config", "check_agent", "check_client") == {
        "check_config": (1, "google.protobuf.Struct"),
        "check_agent": (2, "moria.policy.v1.AgentSettings"),
        "check_client": (3, "moria.policy.v1.ClientSettings")}


async def _begin(stub: pol_grpc.PolicyServiceStub, begin: pol_pb.Begin) -> pol_pb.Ready:
    call = stub.Play()
    try:
        await call.write(pol_pb.PlayRequest(begin=begin))
        response = await call.read()
        return response.ready
    finally:
        call.cancel()


async def test_begin_reads_the_typed_config_and_still_the_struct() -> None:
    async with policy_server() as pol:
        stub = pol_grpc.PolicyServiceStub(channel_for(pol.target))
        base = {"agent_id": "agent_0", "action_space": SPACE, "seed": 1}
        typed = await _begin(stub, pol_pb.Begin(
            agent=agent_settings(AgentConfig(type="random")), **base))
        assert typed.strategy == "random"
        old = await _begin(stub, pol_pb.Begin(
            agent_config=struct_from_dict({"agent": {"type": "dummy"}}), **base))
        assert old.strategy == "dummy"
        both = await _begin(stub, pol_pb.Begin(
            agent=pol_pb.AgentSettings(type="random"),
            agent_config=struct_from_dict({"agent": {"type": "telepathy"}}), **base))
        assert both.strategy == "random"
        errors = []
        for begin in (pol_pb.Begin(agent=pol_pb.AgentSettings(type="telepathy"), **base),
                      pol_pb.Begin(agent_config=struct_from_dict(
                          {"agent": {"type": "telepathy"}}), **base)):
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await _begin(stub, begin)
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            errors.append(err.value.details())
        assert errors[0] == errors[1] and "telepathy" in errors[0]


async def test_get_info_checks_the_typed_config_as_the_struct(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    agent, client = AgentConfig(type="naive"), ClientConfig(client_name="openai")
    async with policy_server() as pol:
        policy = PolicyClient(pol.target)
        typed = await policy.get_info(check=(agent, client))
        old = await policy.get_info(check_config={"agent": {"type": "naive"},
                                                  "client": {"client_name": "openai"}})
        fine = await policy.get_info(check=(AgentConfig(type="dummy"), ClientConfig()))
        stub = pol_grpc.PolicyServiceStub(channel_for(pol.target))
        only_client = await stub.GetInfo(pol_pb.GetInfoRequest(
            check_client=client_settings(client)))
    assert any("OPENAI_API_KEY" in e for e in typed.config_errors)
    assert list(typed.config_errors) == list(old.config_errors)
    assert list(only_client.config_errors) == list(typed.config_errors)  # agent: defaults
    assert not fine.config_errors
