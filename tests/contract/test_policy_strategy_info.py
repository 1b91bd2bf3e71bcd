"""PolicyService.GetInfo serves what each strategy class declares (strategy_info), and a real
policy server on loopback says the same as the generated moria/strategies.json that clients
without a server at hand read."""

from __future__ import annotations

from moria.clients import channel_for
from moria.policy.v1 import policy_service_pb2 as pol_pb
from moria.policy.v1 import policy_service_pb2_grpc as pol_grpc
from moria.strategies import StrategyFacts, strategy_facts
from tests.support.servers import policy_server


async def test_get_info_serves_the_facts_of_every_strategy() -> None:
    async with policy_server() as pol:
        stub = pol_grpc.PolicyServiceStub(channel_for(pol.target))
        info = await stub.GetInfo(pol_pb.GetInfoRequest(), timeout=30)
    served = [StrategyFacts(s.name, s.calls_model, s.reads_tensors, s.keeps_images)
              for s in info.strategy_info]
    names = [f.name for f in served]
    # One entry per served name, sorted, and the old field still lists the same names.
    assert names == sorted(set(names)) == list(info.strategies)
    assert {f.name: f for f in served} == strategy_facts()
    # The facts are real, not all defaults: the model-calling players, the tensor readers and
    # the image keepers are the ones the scheduler and the env sessions rely on.
    by_name = {f.name: f for f in served}
    assert by_name["naive"] == StrategyFacts("naive", True, False, True)
    assert by_name["rl"] == StrategyFacts("rl", False, True, False)
    assert by_name["scripted"] == StrategyFacts("scripted", False, True, False)
    assert by_name["random"] == StrategyFacts("random", False, False, False)


def test_strategy_info_is_an_addition_to_get_info_response() -> None:
    """Field 2 (strategies) keeps its number and type; strategy_info is the new field 8, so an
    older client reads a new server's answer unchanged."""
    fields = pol_pb.GetInfoResponse.DESCRIPTOR.fields_by_name
    assert fields["strategies"].number == 2
    assert fields["strategies"].type == fields["strategies"].TYPE_STRING
    assert fields["strategy_info"].number == 8
    assert fields["strategy_info"].message_type.full_name == "moria.policy.v1.StrategyInfo"
    info = pol_pb.StrategyInfo.DESCRIPTOR.fields_by_name
    assert {name: f.number for name, f in info.items()} == {
        "name": 1, "calls_model": 2, "reads_tensors": 3, "keeps_images": 4}
