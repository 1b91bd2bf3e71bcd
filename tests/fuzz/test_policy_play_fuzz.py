"""Fuzzing ``PolicyService.Play`` with random and malformed request sequences.

One real policy server on loopback (in-process, started once for the module) receives 2,000
generated streams: a Begin (valid configs of the non-model players, unknown strategies and
clients, malformed and random Struct configs, typed configs with random values in every field
(infinities, NaN and int edges included), a model strategy without its API key, a human
seat on a server without a console, random action spaces and demonstrations, extreme seeds)
followed by random turns; requests in the wrong order (observe/end before begin, begin twice,
anything after end); observations with unicode and long texts (below the message limit),
images whose encoding, size and bytes disagree, tensors whose dtype, shape and bytes disagree,
random legal-action lists and masks, random Struct info (infinities included); configs naming
server files in every path-like field (``agent.balrog_source`` with ``protocol=balrog``,
``agent.checkpoint``, a ``client.model_id`` ending ``.gguf``: /etc/shadow, a planted folder,
traversals) and configs of more keys than a section takes; oversized fields of every request
kind (a Begin's instruction just under and over its 16 MiB, an Observe's text, an End's
detail, a ping's size past its 64 KiB); empty messages; early hang-ups (half-close or cancel
at any point).

Properties, after every example:
- the server never crashes: health is SERVING and a control stream begun at the start still
  answers Observe with an action;
- a stream that fails carries a code from ``MALFORMED_INPUT_CODES`` and the server counted no
  UNKNOWN or INTERNAL status;
- answers come one per request, of the matching kind;
- capacity is released: ``active_streams`` is back to the baseline (the control stream);
- no config naming a server file is taken: the server offers none (``moria serve agent``'s
  default), so every such Begin ends INVALID_ARGUMENT;
- a control call (GetInfo) made every 50 ms while the example runs is answered within
  ``STALL_DEADLINE_S``;
- the process RSS stays within ``RSS_LIMIT`` (200 MiB) of its baseline, taken after a warm-up
  of the oversized requests.

Model strategies are only begun with a config that fails before any model is built (no API
key), so no model is ever loaded (an empty config would mean the default: the local model).
``scripted`` is left out, and ``rl`` is begun only naming a checkpoint the server does not
offer.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from moria import malloc_tuning
from moria.clients import channel_for, close_channels
from moria.common.v1 import types_pb2
from moria.metrics import POLICY_SERVICE
from moria.policy.v1 import policy_service_pb2 as pol_pb
from moria.policy.v1 import policy_service_pb2_grpc as pol_grpc
from tests.fuzz.harness import (
    INT64,
    JSON_VALUE,
    RSS_LIMIT,
    TEXT,
    UINT64,
    BackgroundLoop,
    Padded,
    RssBound,
    assert_unharmed,
    drive,
    drive_watched,
    realized,
    server_errors,
    struct_of,
    tensors,
)
from tests.support.servers import policy_server

ACTIONS = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle", "done"]
#: Examples per run (the issue asks for at least 2,000; lower it only for a quick local look).
EXAMPLES = int(os.environ.get("MORIA_FUZZ_EXAMPLES", "2000"))
#: A long observation text: far above any prompt, far below the 64 MiB message limit. Long
#: texts are drawn as descriptions (``Padded``) and built when sent: Hypothesis keeps every
#: value it draws, and 2,000 examples of drawn 200k strings grew the test process by 300 MB.
LONG_TEXT = 200_000
#: Provider key variables removed while the module runs, so model strategies fail at Begin.
KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY",
            "OPENROUTER_API_KEY")
#: Server files a config may try to name.
PATHS = ["/etc/shadow", "/etc/passwd", "../../..", "/proc/self/environ", "/dev/zero", "/tmp",
         "/tmp/x.gguf", "model.gguf", "checkout", "x" * 5000]
#: Sizes of an oversized field: a Begin's (16 MiB), an Observe's text, an End's detail.
BEGIN_SIZES = [16_700_000, 16_800_000]
TEXT_SIZES = [60_000, 70_000, LONG_TEXT, 2_000_000]


@dataclass
class PolicyFixture:
    """The module's server, its stub and the control stream."""

    loop: BackgroundLoop
    target: str
    servicer: Any
    stub: pol_grpc.PolicyServiceStub
    control: Any
    turns: int = 0
    rss: RssBound | None = None


def _struct(data: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(data)
    return out


def _space(names: list[str]) -> types_pb2.ActionSpace:
    return types_pb2.ActionSpace(actions=[types_pb2.NamedAction(name=n) for n in names],
                                 default_action=names[0] if names else "")


@pytest.fixture(scope="module")
def policy() -> Iterator[PolicyFixture]:
    saved = {k: os.environ.pop(k) for k in KEY_VARS if k in os.environ}
    malloc_tuning.pin_mmap_threshold()  # as moria serve agent does (moria.server.server_main)
    loop = BackgroundLoop()
    manager = policy_server(capacity=64)

    async def start() -> PolicyFixture:
        running = await manager.__aenter__()
        stub = pol_grpc.PolicyServiceStub(channel_for(running.target))
        control = stub.Play()
        await control.write(pol_pb.PlayRequest(begin=pol_pb.Begin(
            episode_id="control", agent_id="agent_0", instruction="play",
            action_space=_space(ACTIONS), agent_config=_struct({"agent": {"type": "dummy"}}),
            seed=3)))
        ready = await control.read()
        assert ready.WhichOneof("response") == "ready", ready
        fixture = PolicyFixture(loop, running.target, running.servicer, stub, control)
        for padded in warm_up_requests():  # before the RSS baseline
            await drive(stub.Play, [padded.build()], cancel=False, final=lambda r: False)
        fixture.rss = RssBound(RSS_LIMIT)
        return fixture

    fixture = loop.run(start())
    try:
        yield fixture
    finally:
        async def stop() -> None:
            fixture.control.cancel()
            await close_channels()
            await manager.__aexit__(None, None, None)

        loop.run(stop())
        loop.stop()
        os.environ.update(saved)


# ---- strategies ---------------------------------------------------------------------------

def _req(**kind: Any) -> pol_pb.PlayRequest:
    return pol_pb.PlayRequest(**kind)


valid_configs = st.builds(
    lambda kind, extra: {"agent": {"type": kind, **extra}},
    st.sampled_from(["dummy", "random", "oracle"]),
    st.fixed_dictionaries({}, optional={"max_text_history": st.integers(-2, 20)}))

bad_configs = st.one_of(
    st.sampled_from([
        {"agent": {"type": "no_such_strategy"}},
        {"agent": {"type": "human"}},  # this server has no console
        {"agent": {"type": "naive"}, "client": {"client_name": "openai", "model_id": "m"}},
        {"agent": {"type": "cot"}, "client": {"client_name": "anthropic"}},
        {"agent": {"type": "naive"}, "client": {"client_name": "no_such_client"}},
        {"agent": {"type": "dummy"}, "client": {"temperature": "hot"}},
        {"agent": {"type": "dummy"}, "surprise": {}},
        {"agent": "dummy"},
        {"agent": {"type": 7}},
        {"agent": {"type": "dummy", "num_ctx": float("inf")}},
    ]),
    # unknown sections next to the real ones
    st.dictionaries(TEXT, JSON_VALUE, min_size=1, max_size=3).filter(
        lambda d: bool(set(d) - {"agent", "client"})),
    # random fields in both sections, the strategy kept to a player without a model
    st.builds(lambda agent, client, kind: {"agent": {**agent, "type": kind}, "client": client},
              st.dictionaries(TEXT, JSON_VALUE, max_size=3),
              st.dictionaries(st.one_of(TEXT, st.sampled_from(
                  ["client_name", "temperature", "timeout", "max_retries"])), JSON_VALUE,
                  max_size=3),
              st.sampled_from(["dummy", "random", "oracle", "", "NAIVE"])),
)

action_spaces = st.one_of(
    st.just(_space(ACTIONS)),
    st.lists(TEXT, max_size=5).map(_space),
    st.builds(types_pb2.ActionSpace, default_action=TEXT, free_text=st.booleans()),
)

demonstrations = st.lists(st.builds(
    pol_pb.Demonstration, task=TEXT, seed=UINT64, instruction=TEXT, source=TEXT,
    steps=st.lists(st.builds(pol_pb.DemonstrationStep, observation=TEXT, action=TEXT,
                             reward=st.floats(allow_nan=True)), max_size=2)), max_size=2)

struct_begins = st.builds(
    pol_pb.Begin, episode_id=TEXT, agent_id=st.one_of(st.just("agent_0"), TEXT),
    instruction=TEXT, action_space=action_spaces,
    agent_config=st.one_of(valid_configs, valid_configs, bad_configs).map(_struct),
    seed=UINT64, env_name=TEXT, task=TEXT, demonstrations=demonstrations,
    record_prompts=st.booleans())

INT32 = st.one_of(st.integers(-(2**31), 2**31 - 1), st.sampled_from([0, -1, 1, 2**31 - 1]))
DOUBLE = st.one_of(st.floats(), st.sampled_from([0.0, -1.0, 1.0, 2.5]))

# The typed config (Begin.agent / Begin.client): random values of every kind in the fields,
# the agent type always set and kept to a player without a model (or refused).
typed_agents = st.builds(
    lambda kind, fields: pol_pb.AgentSettings(type=kind, **fields),
    st.sampled_from(["dummy", "random", "oracle", "", "NAIVE", "no_such_strategy"]),
    st.fixed_dictionaries({}, optional={
        "protocol": st.one_of(st.sampled_from(["moria", "balrog"]), TEXT),
        "balrog_source": TEXT, "remember_cot": st.booleans(), "max_text_history": INT32,
        "max_image_history": INT32, "max_cot_history": INT32, "max_icl_history": INT32,
        "checkpoint": TEXT, "sample": st.booleans()}))
typed_generation = st.builds(
    lambda fields, extra: pol_pb.GenerateSettings(**fields, extra=extra),
    st.fixed_dictionaries({}, optional={"max_tokens": INT32, "temperature": DOUBLE,
                                        "no_temperature": st.booleans()}),
    st.one_of(struct_of(), struct_of(st.sampled_from(["temperature", "max_tokens", "top_p"]))))
typed_clients = st.one_of(st.none(), st.builds(
    lambda fields: pol_pb.ClientSettings(**fields),
    st.fixed_dictionaries({}, optional={
        "client_name": st.one_of(st.sampled_from(["openai", "claude", "nope"]), TEXT),
        "model_id": TEXT, "base_url": TEXT, "generate_kwargs": typed_generation,
        "timeout": DOUBLE, "max_retries": INT32, "delay": DOUBLE, "stream": st.booleans(),
        "reasoning_effort": TEXT, "thinking_budget": INT32, "local_contexts": INT32,
        "max_concurrency": INT32, "max_prompt_bytes": INT64})))


def _typed(begin: pol_pb.Begin, agent: pol_pb.AgentSettings,
           client: pol_pb.ClientSettings | None) -> pol_pb.Begin:
    """``begin`` with a typed config (its Struct, if any, is then ignored)."""
    begin.agent.CopyFrom(agent)
    if client is not None:
        begin.client.CopyFrom(client)
    return begin


#: Configs naming server files in every path-like field, and configs of many keys.
path_configs = st.one_of(
    st.sampled_from(PATHS).map(lambda p: {"agent": {"type": "naive", "protocol": "balrog",
                                                    "balrog_source": p}}),
    st.sampled_from(PATHS).map(lambda p: {"agent": {"type": "rl", "checkpoint": p}}),
    st.builds(lambda p, name: {"agent": {"type": "naive"}, "client": {
        "client_name": name, "model_id": p if p.endswith(".gguf") else p + ".gguf"}},
        st.sampled_from(PATHS), st.sampled_from(["local", "llamacpp"])),
    st.sampled_from([300, 5_000]).map(lambda n: {"agent": {"type": "dummy", **{
        f"key_{i}": i for i in range(n)}}}),
)
path_begins = st.builds(lambda config, space: pol_pb.Begin(
    agent_id="agent_0", instruction="play", action_space=space,
    agent_config=_struct(config)), path_configs, action_spaces)

begins = st.one_of(struct_begins, st.builds(_typed, struct_begins, typed_agents, typed_clients),
                   path_begins)

images = st.builds(
    types_pb2.Image, encoding=st.one_of(st.integers(0, 2), st.integers(3, 2**31 - 1)),
    width=st.integers(-2, 6), height=st.integers(-2, 6),
    data=st.one_of(st.binary(max_size=120), st.just(b"\x89PNG\r\n\x1a\n")))

infos = st.one_of(
    st.just(struct_pb2.Struct()),
    st.sampled_from([*ACTIONS, 3, -1, 10**9, True, None, "", float("inf")]).map(
        lambda hint: _struct({"expert_action": hint})),
    struct_of(),
)

observations = st.builds(
    types_pb2.Observation,
    text=st.dictionaries(
        st.one_of(st.sampled_from(["long_term_context", "short_term_context"]), TEXT),
        TEXT, max_size=3),
    image=st.one_of(st.none(), images),
    tensors=st.dictionaries(TEXT, tensors(), max_size=2),
    legal_actions=st.lists(st.one_of(st.sampled_from(ACTIONS), TEXT), max_size=4),
    action_mask=st.lists(st.booleans(), max_size=8),
    info=infos, step=INT64)

last_results = st.one_of(st.none(), st.builds(
    types_pb2.ActionResult, valid=st.booleans(),
    applied_action=st.one_of(TEXT.map(lambda t: types_pb2.Action(text=t)),
                             INT64.map(lambda i: types_pb2.Action(index=i))),
    feedback=TEXT))

observes = st.builds(pol_pb.Observe, observation=observations,
                     last_action_result=last_results, step=INT64)
plain_observes = st.builds(
    lambda text, step: pol_pb.Observe(observation=types_pb2.Observation(
        text={"long_term_context": text}), step=step), TEXT, st.integers(0, 100))

#: Requests with one field oversized (built when sent): every request kind that carries text.
_BEGIN = pol_pb.PlayRequest(begin=pol_pb.Begin(
    agent_id="agent_0", action_space=_space(ACTIONS),
    agent_config=_struct({"agent": {"type": "dummy"}})))
_OBSERVE = pol_pb.PlayRequest(observe=pol_pb.Observe(observation=types_pb2.Observation(
    text={"long_term_context": ""})))
padded_requests = st.one_of(
    st.sampled_from([LONG_TEXT, *BEGIN_SIZES]).map(
        lambda n: Padded(_BEGIN, "begin.instruction", n)),
    st.sampled_from(TEXT_SIZES).map(lambda n: Padded(
        _OBSERVE, "observe.observation.text.long_term_context", n)),
    st.sampled_from(TEXT_SIZES).map(lambda n: Padded(
        pol_pb.PlayRequest(end=pol_pb.End(episode_end=types_pb2.EpisodeEnd())),
        "end.episode_end.detail", n)),
)


def warm_up_requests() -> list[Padded]:
    """One of each oversized request, sent before the RSS baseline is taken."""
    return [Padded(_BEGIN, "begin.instruction", n) for n in BEGIN_SIZES] + [
        Padded(_OBSERVE, "observe.observation.text.long_term_context", n) for n in TEXT_SIZES]


any_request = st.one_of(
    padded_requests,
    plain_observes.map(lambda o: _req(observe=o)),
    plain_observes.map(lambda o: _req(observe=o)),
    plain_observes.map(lambda o: _req(observe=o)),
    observes.map(lambda o: _req(observe=o)),
    observes.map(lambda o: _req(observe=o)),
    st.builds(pol_pb.End, episode_end=st.builds(
        types_pb2.EpisodeEnd, reason=st.integers(0, 9), num_steps=INT64, detail=TEXT,
        returns=st.dictionaries(TEXT, st.floats(), max_size=2))).map(lambda e: _req(end=e)),
    begins.map(lambda b: _req(begin=b)),
    st.just(pol_pb.PlayRequest()),
)

begin_first = st.tuples(begins.map(lambda b: _req(begin=b)),
                        st.lists(any_request, max_size=6)).map(lambda t: [t[0], *t[1]])
sequences = st.one_of(begin_first, begin_first, st.lists(any_request, max_size=4),
                      st.tuples(padded_requests, st.lists(any_request, max_size=2)).map(
                          lambda t: [t[0], *t[1]]))


# ---- checks -------------------------------------------------------------------------------

_ANSWER_TO = {"begin": "ready", "observe": "act", "end": "ended"}


async def _active(fx: PolicyFixture) -> int:
    info = await fx.stub.GetInfo(pol_pb.GetInfoRequest(), timeout=5)
    return int(info.active_streams)


async def _turn_control(fx: PolicyFixture) -> None:
    """One normal turn of the control stream: it must answer a listed action."""
    fx.turns += 1
    await fx.control.write(_req(observe=pol_pb.Observe(
        observation=types_pb2.Observation(text={"long_term_context": "a wall ahead"}),
        step=fx.turns)))
    answer = await fx.control.read()
    assert answer.WhichOneof("response") == "act", answer
    assert not answer.act.HasField("error"), answer.act.error
    assert answer.act.action.text in ACTIONS


async def _example(fx: PolicyFixture, requests: list[pol_pb.PlayRequest], cancel: bool,
                   ) -> list[str]:
    """Play one example and check it; returns what happened (Hypothesis events)."""
    before = server_errors(fx.servicer.metrics, POLICY_SERVICE)
    names_a_file = bool(requests) and isinstance(requests[0], pol_pb.PlayRequest) \
        and _names_a_file(requests[0])
    requests = realized(requests)
    outcome, events = await drive_watched(
        fx.stub.Play, requests, cancel=cancel,
        final=lambda r: r.WhichOneof("response") == "ended",
        control=lambda deadline: fx.stub.GetInfo(pol_pb.GetInfoRequest(), timeout=deadline))
    if names_a_file and not outcome.cancelled_by_us:
        assert not outcome.responses, "a Begin naming a server file was taken"
        assert outcome.code == grpc.StatusCode.INVALID_ARGUMENT, (outcome.code,
                                                                    outcome.details)
        events.append("a config naming a server file refused")
    kinds = [r.WhichOneof("request") for r in requests]
    for kind, answer in zip(kinds, outcome.responses, strict=False):
        assert answer.WhichOneof("response") == _ANSWER_TO[kind], (kind, answer)
        if kind == "observe":
            assert answer.act.HasField("action"), answer.act
            events.append("act answered")

    await assert_unharmed(outcome, target=fx.target, metrics=fx.servicer.metrics,
                          service=POLICY_SERVICE, errors_before=before,
                          active=lambda: _active(fx), what="streams")
    await _turn_control(fx)
    assert fx.rss is not None
    fx.rss.check(f" after {kinds}")
    return events


def _names_a_file(request: pol_pb.PlayRequest) -> bool:
    """Whether ``request`` is a Begin whose Struct config names a server file (what
    ``path_configs`` draws)."""
    if request.WhichOneof("request") != "begin" or request.begin.HasField("agent"):
        return False
    config = request.begin.agent_config
    agent = config.fields["agent"].struct_value.fields if "agent" in config.fields else {}
    client = config.fields["client"].struct_value.fields if "client" in config.fields else {}
    return ("balrog_source" in agent or "checkpoint" in agent
            or ("model_id" in client and client["model_id"].string_value.endswith(".gguf")
                and client["client_name"].string_value in ("local", "llamacpp")))


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(requests=sequences, cancel=st.booleans())
def test_play_stream_survives_random_and_malformed_input(
        policy: PolicyFixture, requests: list[pol_pb.PlayRequest], cancel: bool) -> None:
    for name in policy.loop.run(_example(policy, requests, cancel)):
        event(name)


def test_control_stream_still_ends_cleanly(policy: PolicyFixture) -> None:
    """After the fuzzing, the control stream still ends normally with its Ended answer."""

    async def end() -> None:
        await _turn_control(policy)
        await policy.control.write(_req(end=pol_pb.End()))
        answer = await policy.control.read()
        assert answer.WhichOneof("response") == "ended"
        await policy.control.done_writing()
        assert await policy.control.code() == grpc.StatusCode.OK

    policy.loop.run(end())
    assert policy.rss is not None
    growth = policy.rss.check(release=True)
    print(f"RSS: baseline {policy.rss.baseline / 2**20:,.0f} MiB; growth "
          f"{growth / 2**20:+,.0f} MiB, at most {policy.rss.peak / 2**20:+,.0f} MiB")
