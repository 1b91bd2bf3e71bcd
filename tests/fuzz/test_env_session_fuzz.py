"""Fuzzing ``EnvService.Session`` with random and malformed request sequences.

One real env server on loopback hosting BabyAI and Crafter (in-process, started once for the
module, with the request limits ``moria serve env`` has) receives 2,000 generated streams:
valid openers followed by random steps, requests in the wrong order (step/reset/render/close
before open, open twice, anything after close), unknown and empty tasks, extreme seeds and step
limits, random players and Struct options, option maps with random keys, with every key a
family's schema knows (and the constructor keywords no client may give: ``render_mode``,
``size``, ``max_steps``) holding values of random types, with more keys than a family takes,
and with the path-like option (``balrog_source``) naming server files; random observation
options, actions of every oneof kind (valid names, unicode, long texts, extreme indices,
tensors whose dtype, shape and bytes disagree), actions for unknown agents, oversized fields of
every request kind (an Open's task and options, a step's action: just under and over the 1 MiB
a session request may be), empty messages, and early hang-ups (half-close or cancel at any
point).

Properties, after every example:
- the server never crashes: health is SERVING and a control session opened at the start still
  steps normally;
- a stream that fails carries a code from ``MALFORMED_INPUT_CODES`` (never UNKNOWN or
  INTERNAL), and every in-band step error is INVALID_ARGUMENT;
- answers come one per request, of the matching kind, until the stream ends;
- capacity is released: ``active_sessions`` is back to the baseline (the control session);
- a control call (GetInfo) made every 50 ms while the example runs is answered within
  ``STALL_DEADLINE_S`` (no stall of the event loop);
- the process RSS stays within ``RSS_LIMIT`` (200 MiB) of its baseline, taken after a warm-up
  of the oversized requests (a growth over it is measured again after garbage collection and
  ``malloc_trim``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from moria import malloc_tuning
from moria.clients import channel_for, close_channels
from moria.common.v1 import types_pb2
from moria.env.v1 import env_service_pb2 as env_pb
from moria.env.v1 import env_service_pb2_grpc as env_grpc
from moria.families import families
from moria.metrics import ENV_SERVICE
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
from tests.support.servers import env_server

TASKS = ["BabyAI-MixedTrainLocal-v0/goto", "BabyAI-MixedTrainLocal-v0/pickup",
         "BabyAI-MixedTrainLocal-v0/open"]
#: Every option key a family's schema knows, and constructor keywords no client may give.
OPTION_KEYS = sorted({key for m in families().values() for key in m.options}
                     | {"render_mode", "size", "max_steps", "seed", "view"})
#: Values for path-like options: server files of every kind, and names.
PATHS = ["/etc/passwd", "/etc/shadow", "../../..", "/proc/self/environ", "/dev/zero", ".",
         "installed", "balrog", "x" * 5000, "/tmp"]
#: Sizes of an oversized field: under and over what a session request may be (1 MiB). A
#: request gRPC refuses for its size takes the client 0.1-0.7 s to hear so: oversized requests
#: are a small share of the examples.
PADDED_SIZES = [1_000_000, 1_100_000, 3_000_000]
#: Option keys of an oversized Open: about 0.6 MB (refused by their count) and 1.2 MB (by size).
OPTION_KEY_COUNTS = [30_000, 60_000]
ACTIONS = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle", "done"]
AGENT = "agent_0"
#: A long action text: far above the 4096-character action cap, under the 1 MiB an Open or a
#: step may be (an invalid action, in band). Long texts are drawn as descriptions (``Padded``)
#: and built when sent: Hypothesis keeps every value it draws, and 2,000 examples of drawn
#: 200k strings grew the test process by 300 MB.
LONG_TEXT = 200_000
#: Examples per run (the issue asks for at least 2,000; lower it only for a quick local look).
EXAMPLES = int(os.environ.get("MORIA_FUZZ_EXAMPLES", "2000"))


@dataclass
class EnvFixture:
    """The module's server, its stub and the control session."""

    loop: BackgroundLoop
    target: str
    servicer: Any
    stub: env_grpc.EnvServiceStub
    control: Any
    control_done: bool = False
    rss: RssBound | None = None


@pytest.fixture(scope="module")
def env() -> Iterator[EnvFixture]:
    loop = BackgroundLoop()
    malloc_tuning.pin_mmap_threshold()  # as moria serve env does (moria.server.server_main)
    manager = env_server(("babyai", "crafter"), capacity=64)

    async def start() -> EnvFixture:
        running = await manager.__aenter__()
        stub = env_grpc.EnvServiceStub(channel_for(running.target))
        control = stub.Session()
        await control.write(env_pb.SessionRequest(open=env_pb.OpenRequest(
            task=f"babyai:{TASKS[0]}", seed=7)))
        opened = await control.read()
        assert opened.WhichOneof("response") == "opened"
        fixture = EnvFixture(loop, running.target, running.servicer, stub, control)
        # the warm-up, before the RSS baseline: a game of each family (crafter's first world
        # compiles its numba code, about 100 MiB), then the large requests
        for task in ("crafter:default", *(f"babyai:{t}" for t in TASKS)):
            await drive(stub.Session, [_req(open=env_pb.OpenRequest(task=task)), *[
                _req(step=env_pb.StepRequest(actions={AGENT: types_pb2.Action(index=0)}))] * 3],
                cancel=False, final=lambda r: False)
        for size in PADDED_SIZES:
            opener = _req(open=env_pb.OpenRequest(task=f"babyai:{TASKS[0]}"))
            for padded in (Padded(opener, "open.task", size),
                           *(Padded(opener, "open.options", n) for n in OPTION_KEY_COUNTS)):
                await drive(stub.Session, [padded.build()], cancel=False,
                            final=lambda r: False)
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


# ---- strategies ---------------------------------------------------------------------------

def _req(**kind: Any) -> env_pb.SessionRequest:
    return env_pb.SessionRequest(**kind)


task_names = st.one_of(
    st.sampled_from(TASKS).map(lambda t: f"babyai:{t}"),
    st.sampled_from(TASKS),
    st.sampled_from(["", "babyai:", ":", "nethack:NetHackScore-v0", "babyai:NoSuchTask-v9",
                     "BabyAI-MixedTrainLocal-v0/nope"]),
    TEXT,
)

observation_options = st.builds(
    env_pb.ObservationOptions,
    include_image=st.booleans(),
    image_encoding=st.integers(0, 5), include_tensors=st.booleans(),
    feedback_on_invalid_action=st.booleans())

players = st.lists(st.builds(types_pb2.PlayerSpec,
                             agent_id=st.one_of(st.just(AGENT), st.just(""), TEXT),
                             role=TEXT, options=struct_of()), max_size=2)

babyai_options = st.one_of(
    st.just({}),
    st.fixed_dictionaries({}, optional={
        "num_dists": st.one_of(st.integers(-2, 12), st.floats(allow_nan=False), TEXT),
        "tile_size": st.one_of(st.integers(-1, 16), st.booleans(), st.none()),
    }),
    st.dictionaries(TEXT, st.integers(-5, 5), max_size=2),
)


def _struct(data: dict[str, Any]) -> Any:
    from google.protobuf import struct_pb2

    out = struct_pb2.Struct()
    out.update(data)
    return out


#: Option maps: keys any schema knows (and some no client may give) with values of any type,
#: path-like values, and more keys than any family takes.
schema_options = st.one_of(
    st.dictionaries(st.sampled_from(OPTION_KEYS), st.one_of(JSON_VALUE, st.sampled_from(PATHS)),
                    min_size=1, max_size=4),
    st.dictionaries(st.sampled_from(["balrog_source", "assets", "boxoban_levels"]),
                    st.sampled_from(PATHS), min_size=1, max_size=2),
    st.integers(60, 2_000).map(lambda n: {f"key_{i}": i for i in range(n)}),
)

open_requests = st.one_of(
    st.builds(
        env_pb.OpenRequest, task=task_names, seed=UINT64, players=players,
        observation=observation_options,
        options=st.one_of(babyai_options.map(_struct), struct_of(), schema_options.map(_struct)),
        oracle=st.booleans(), max_steps=st.one_of(st.integers(-3, 200), INT64)),
    # Crafter with the options of any schema (its path-like balrog_source among them): nearly
    # always refused before a world is built (a world takes a few hundred ms)
    st.builds(env_pb.OpenRequest, task=st.sampled_from(["crafter:default", "default"]),
              seed=UINT64, options=schema_options.map(_struct)),
)

valid_opens = st.builds(
    env_pb.OpenRequest, task=st.sampled_from(TASKS).map(lambda t: f"babyai:{t}"),
    seed=UINT64, oracle=st.booleans(), max_steps=st.integers(0, 40),
    observation=observation_options)

actions = st.one_of(
    st.sampled_from(ACTIONS).map(lambda a: types_pb2.Action(text=a)),
    TEXT.map(lambda t: types_pb2.Action(text=t)),
    INT64.map(lambda i: types_pb2.Action(index=i)),
    st.integers(-1, 8).map(lambda i: types_pb2.Action(index=i)),
    tensors().map(lambda t: types_pb2.Action(tensor=t)),
    st.just(types_pb2.Action()),
)

step_requests = st.dictionaries(
    st.one_of(st.just(AGENT), TEXT), actions, max_size=2,
).map(lambda acts: _req(step=env_pb.StepRequest(actions=acts)))
valid_steps = st.sampled_from(ACTIONS).map(
    lambda a: _req(step=env_pb.StepRequest(actions={AGENT: types_pb2.Action(text=a)})))

#: Requests with one field oversized (built when sent): an Open's task or options, a step's
#: action text: every request kind that carries client text.
padded_requests = st.one_of(
    st.builds(lambda o, n: Padded(_req(open=o), "open.task", n), valid_opens,
              st.sampled_from(PADDED_SIZES)),
    st.builds(lambda o, n: Padded(_req(open=o), "open.options", n), valid_opens,
              st.sampled_from(OPTION_KEY_COUNTS)),
    st.sampled_from([LONG_TEXT, *PADDED_SIZES]).map(lambda n: Padded(
        _req(step=env_pb.StepRequest(actions={AGENT: types_pb2.Action(text="")})),
        f"step.actions.{AGENT}.text", n)),
)

any_request = st.one_of(
    valid_steps, valid_steps, step_requests, step_requests,
    open_requests.map(lambda o: _req(open=o)), padded_requests,
    UINT64.map(lambda s: _req(reset=env_pb.ResetRequest(seed=s))),
    st.integers(0, 2**31 - 1).map(lambda e: _req(render=env_pb.RenderRequest(encoding=e))),
    st.just(_req(close=env_pb.CloseRequest())),
    st.just(env_pb.SessionRequest()),
)

sequences = st.one_of(
    # a valid opener, then random requests
    st.tuples(valid_opens.map(lambda o: _req(open=o)),
              st.lists(any_request, max_size=8)).map(lambda t: [t[0], *t[1]]),
    # a random (often malformed) opener, then random requests
    st.tuples(open_requests.map(lambda o: _req(open=o)),
              st.lists(any_request, max_size=4)).map(lambda t: [t[0], *t[1]]),
    # anything in any order, including nothing at all
    st.lists(any_request, max_size=5),
)


# ---- checks -------------------------------------------------------------------------------

_ANSWER_TO = {"open": "opened", "reset": "reset", "step": "step", "render": "render",
              "close": "closed"}


async def _active(fx: EnvFixture) -> int:
    info = await fx.stub.GetInfo(env_pb.GetInfoRequest(), timeout=5)
    return int(info.active_sessions)


async def _step_control(fx: EnvFixture) -> None:
    """One normal step of the control session (reset first when its episode ended)."""
    if fx.control_done:
        await fx.control.write(_req(reset=env_pb.ResetRequest()))
        assert (await fx.control.read()).WhichOneof("response") == "reset"
        fx.control_done = False
    await fx.control.write(_req(step=env_pb.StepRequest(
        actions={AGENT: types_pb2.Action(text="turn left")})))
    answer = await fx.control.read()
    assert answer.WhichOneof("response") == "step", answer
    assert answer.step.error.code == grpc.StatusCode.OK.value[0], answer.step.error
    fx.control_done = answer.step.HasField("episode_end")


async def _example(fx: EnvFixture, requests: list[env_pb.SessionRequest], cancel: bool,
                   ) -> list[str]:
    """Play one example and check it; returns what happened (Hypothesis events)."""
    before = server_errors(fx.servicer.metrics, ENV_SERVICE)
    requests = realized(requests)
    outcome, events = await drive_watched(
        fx.stub.Session, requests, cancel=cancel,
        final=lambda r: r.WhichOneof("response") == "closed",
        control=lambda deadline: fx.stub.GetInfo(env_pb.GetInfoRequest(), timeout=deadline))
    kinds = [r.WhichOneof("request") for r in requests]
    for kind, answer in zip(kinds, outcome.responses, strict=False):
        assert answer.WhichOneof("response") == _ANSWER_TO[kind], (kind, answer)
        if kind == "step" and answer.step.error.code != grpc.StatusCode.OK.value[0]:
            invalid_argument = grpc.StatusCode.INVALID_ARGUMENT.value[0]
            assert answer.step.error.code == invalid_argument, answer.step.error
            events.append("in-band step error")

    await assert_unharmed(outcome, target=fx.target, metrics=fx.servicer.metrics,
                          service=ENV_SERVICE, errors_before=before,
                          active=lambda: _active(fx), what="sessions")
    await _step_control(fx)
    assert fx.rss is not None
    fx.rss.check(f" after {kinds}")
    return events


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(requests=sequences, cancel=st.booleans())
def test_session_stream_survives_random_and_malformed_input(
        env: EnvFixture, requests: list[env_pb.SessionRequest], cancel: bool) -> None:
    for name in env.loop.run(_example(env, requests, cancel)):
        event(name)


def test_control_session_still_closes_cleanly(env: EnvFixture) -> None:
    """After the fuzzing, the control session ends normally with a CloseResponse."""

    async def close() -> None:
        await _step_control(env)
        await env.control.write(_req(close=env_pb.CloseRequest()))
        answer = await env.control.read()
        assert answer.WhichOneof("response") == "closed"
        await env.control.done_writing()
        assert await env.control.code() == grpc.StatusCode.OK

    env.loop.run(close())
    assert env.rss is not None
    growth = env.rss.check(release=True)
    print(f"RSS: baseline {env.rss.baseline / 2**20:,.0f} MiB; growth {growth / 2**20:+,.0f} "
          f"MiB, at most {env.rss.peak / 2**20:+,.0f} MiB")
