"""Hostile and lazy clients against real Env and Policy servers on loopback.

1. Errors that quote the request stay small: 4k control-character agent ids, 10k unknown
   option or config keys, a 10k-character task get INVALID_ARGUMENT / NOT_FOUND (or an in-band
   error) under 2 KiB, and the server (and, for in-band errors, the stream) still answers.
2. A large RAW_RGB frame is re-encoded off the event loop (another stream is answered while it
   is), and not decoded at all for a strategy that keeps no images.
3. Idle streams are ended (DEADLINE_EXCEEDED naming the limit, slot freed), and the
   orchestrator's pings keep an episode's streams alive while it waits on a slow model or
   between the llm-worker's commands.
4. A prompt over ``client.max_prompt_bytes`` never reaches the provider: the episode ends as
   ``agent_error`` saying so.

Every wait has a deadline; nothing is asserted about durations.
"""

from __future__ import annotations

import asyncio
import base64
import io
import re
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import grpc
import numpy as np
import pytest
from google.protobuf import struct_pb2
from PIL import Image

import agent_server.service as policy_service
import env_server.service as env_service
from agent_server.service import PolicyServicer
from moria.clients import EnvClient, channel_for, close_channels
from moria.codecs import text_action
from moria.common.v1 import types_pb2
from moria.env.v1 import env_service_pb2 as env_pb
from moria.env.v1 import env_service_pb2_grpc as env_grpc
from moria.policy.v1 import policy_service_pb2 as pol_pb
from moria.policy.v1 import policy_service_pb2_grpc as pol_grpc
from moria.quoting import MAX_QUOTE_CHARS, quote, quote_names
from moria.server import Drain, MoriaServer
from orchestrator.core.episode import EpisodeConfig, EpisodeDriver, EpisodePlan, run_episode
from orchestrator.core.episode_config import episode_config
from orchestrator.plan.spec import RunSpec, load_spec
from tests.support.fake_openai import FakeOpenAI
from tests.support.processes import start_server
from tests.support.servers import env_server, policy_server

GOTO = "BabyAI-MixedTrainLocal-v0/goto"
#: What "small" means for an error message (UTF-8 bytes).
SMALL = 2048
#: Deadline of every single wait (seconds): generous, the suite shares 2 cores.
DEADLINE = 60.0
ACTIONS = ["turn left", "turn right", "go forward"]
SPACE = types_pb2.ActionSpace(actions=[types_pb2.NamedAction(name=n) for n in ACTIONS],
                              default_action="go forward")
#: 10,000 distinct agent ids of control characters, about 100 characters each.
HOSTILE_IDS = [f"\x00\x01\x1b[2J\x7f{i}" * 15 for i in range(4_000)]
#: A 10,000-character name of control characters (4x longer once escaped).
HOSTILE_NAME = "\x00\x07\x1b" * 3_334


def _struct(data: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(data)
    return out


def _many_keys(count: int = 100_000) -> dict[str, Any]:
    return {f"unknown_option_{i:06d}_" + "x" * 20: i for i in range(count)}


def _small(text: str) -> bool:
    return len(text.encode("utf-8")) < SMALL


async def _wait(awaitable: Any) -> Any:
    return await asyncio.wait_for(awaitable, DEADLINE)


async def _failure(call: Any, requests: list[Any]) -> tuple[grpc.StatusCode, str]:
    """Write ``requests`` one by one (reading each answer) until the call fails; its status."""
    with pytest.raises(grpc.aio.AioRpcError) as info:
        for request in requests:
            await _wait(call.write(request))
            await _wait(call.read())
        await _wait(call.done_writing())
        await _wait(call.read())
    return info.value.code(), info.value.details() or ""


@asynccontextmanager
async def _policy(*, idle_timeout_s: float = 60.0, capacity: int = 8,
                  ) -> AsyncIterator[tuple[str, PolicyServicer]]:
    """A PolicyService on loopback with the given idle timeout: (target, servicer)."""
    drain = Drain()
    servicer = PolicyServicer(drain=drain, capacity=capacity, idle_timeout_s=idle_timeout_s)
    server = MoriaServer(
        [lambda s: pol_grpc.add_PolicyServiceServicer_to_server(servicer, s)],
        [pol_pb.DESCRIPTOR.services_by_name["PolicyService"].full_name],
        address="127.0.0.1:0", drain=drain, grace_s=2.0)
    await server.start()
    try:
        yield server.bound_address, servicer
    finally:
        await close_channels()
        await server.shutdown()
        await servicer.aclose()


def _begin(config: dict[str, Any], **fields: Any) -> pol_pb.PlayRequest:
    """A Begin of ``config`` for a BabyAI seat; ``fields`` override Begin's fields."""
    values: dict[str, Any] = {"agent_id": "agent_0", "env_name": "babyai", "task": GOTO,
                              "instruction": "Reach the goal.", **fields}
    return pol_pb.PlayRequest(begin=pol_pb.Begin(action_space=SPACE,
                                                 agent_config=_struct(config), **values))


def _observe(text: str = "a wall ahead", step: int = 0,
             image: types_pb2.Image | None = None) -> pol_pb.PlayRequest:
    observation = types_pb2.Observation(text={"long_term_context": text})
    if image is not None:
        observation.image.CopyFrom(image)
    return pol_pb.PlayRequest(observe=pol_pb.Observe(observation=observation, step=step))


def _model_config(fake: FakeOpenAI, **agent: Any) -> dict[str, Any]:
    """A naive player calling ``fake`` (OpenAI wire format) through the vllm backend."""
    return {"agent": {"type": "naive", **agent},
            "client": {"client_name": "vllm", "base_url": fake.base_url, "model_id": "m",
                       "max_retries": 0}}


async def _dummy_turn(stub: pol_grpc.PolicyServiceStub) -> pol_pb.Act:
    """A fresh dummy stream plays one turn and ends: the server still serves."""
    call = stub.Play()
    await _wait(call.write(_begin({"agent": {"type": "dummy"}})))
    assert (await _wait(call.read())).WhichOneof("response") == "ready"
    await _wait(call.write(_observe()))
    act = (await _wait(call.read())).act
    await _wait(call.write(pol_pb.PlayRequest(end=pol_pb.End())))
    assert (await _wait(call.read())).WhichOneof("response") == "ended"
    await _wait(call.done_writing())
    assert await _wait(call.code()) == grpc.StatusCode.OK
    return act


def _open(**fields: Any) -> env_pb.SessionRequest:
    return env_pb.SessionRequest(open=env_pb.OpenRequest(
        task=fields.pop("task", f"babyai:{GOTO}"), seed=3, **fields))


# ---- 1. bounded error messages ----------------------------------------------------------------


@pytest.mark.parametrize(("request_", "code"), [
    # 10k keys: refused by their count, before one is decoded; 100k (5.7 MB): by its size,
    # before it is read (a session request takes at most 1 MiB)
    (_open(options=_struct(_many_keys(10_000))), grpc.StatusCode.INVALID_ARGUMENT),
    (_open(options=_struct(_many_keys())), grpc.StatusCode.RESOURCE_EXHAUSTED),
    (_open(task=HOSTILE_NAME), grpc.StatusCode.NOT_FOUND),
    (_open(task=f"babyai:{HOSTILE_NAME}"), grpc.StatusCode.NOT_FOUND),
], ids=["10k-unknown-option-keys", "100k-unknown-option-keys", "control-char-task",
        "control-char-babyai-task"])
async def test_env_open_errors_quoting_the_request_stay_small(
        request_: env_pb.SessionRequest, code: grpc.StatusCode) -> None:
    async with env_server(capacity=1) as env:
        stub = env_grpc.EnvServiceStub(channel_for(env.target))
        got, details = await _failure(stub.Session(), [request_])
        assert got == code, details[:300]
        assert _small(details), f"{len(details.encode()):,} bytes: {details[:300]!r}"
        # the server is unharmed and the only slot is free again: a normal session plays
        info = await stub.GetInfo(env_pb.GetInfoRequest(), timeout=DEADLINE)
        assert info.active_sessions == 0
        session = EnvClient(env.target).session()
        await _wait(session.open(_open().open))
        assert (await _wait(session.step({"agent_0": text_action("turn left")}))).step == 1
        await _wait(session.close())


async def test_env_step_with_4k_control_char_agent_ids_gets_a_small_in_band_error() -> None:
    async with env_server() as env:
        session = EnvClient(env.target).session()
        await _wait(session.open(_open().open))
        hostile = {agent_id: text_action("turn left") for agent_id in HOSTILE_IDS}
        answer = await _wait(session.step(hostile))
        assert answer.error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
        assert "not due to act" in answer.error.message and "and 3990 more" in answer.error.message
        assert _small(answer.error.message), f"{len(answer.error.message):,} characters"
        # the same stream goes on: the step that was due is answered
        assert (await _wait(session.step({"agent_0": text_action("turn left")}))).step == 1
        await _wait(session.close())


async def test_env_list_tasks_of_a_hostile_family_name_is_small() -> None:
    async with env_server() as env:
        stub = env_grpc.EnvServiceStub(channel_for(env.target))
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await stub.ListTasks(env_pb.ListTasksRequest(family=HOSTILE_NAME * 5),
                                 timeout=DEADLINE)
        assert info.value.code() == grpc.StatusCode.NOT_FOUND
        assert _small(info.value.details() or "")
        assert (await stub.GetInfo(env_pb.GetInfoRequest(), timeout=DEADLINE)).families


@pytest.mark.parametrize("begin", [
    _begin({"agent": {"type": "dummy", **_many_keys()}}),
    _begin({**_many_keys(), "agent": {"type": "dummy"}}),
    _begin({"agent": {"type": "scripted"}}, agent_id=HOSTILE_NAME, env_name=HOSTILE_NAME,
           task=HOSTILE_NAME, episode_id=HOSTILE_NAME),
], ids=["100k-unknown-agent-keys", "100k-unknown-sections", "control-char-names"])
async def test_policy_begin_errors_quoting_the_request_stay_small(
        begin: pol_pb.PlayRequest) -> None:
    async with policy_server(capacity=1) as pol:
        stub = pol_grpc.PolicyServiceStub(channel_for(pol.target))
        code, details = await _failure(stub.Play(), [begin])
        assert code == grpc.StatusCode.INVALID_ARGUMENT, details[:300]
        assert _small(details), f"{len(details.encode()):,} bytes: {details[:300]!r}"
        info = await stub.GetInfo(pol_pb.GetInfoRequest(), timeout=DEADLINE)
        assert info.active_streams == 0
        assert (await _dummy_turn(stub)).action.text in ACTIONS  # the only slot is free


async def test_policy_check_config_errors_stay_small() -> None:
    async with policy_server() as pol:
        stub = pol_grpc.PolicyServiceStub(channel_for(pol.target))
        # 200 unknown keys: validated, the message lists 10 and counts the rest; 10,000: refused
        # by their count before any is validated (a section takes at most 256)
        for count, said in ((200, "and 190 more problems"),
                            (10_000, "agent: 10,001 keys given; a config takes at most 256")):
            info = await stub.GetInfo(pol_pb.GetInfoRequest(check_config=_struct(
                {"agent": {"type": "naive", **_many_keys(count)}})), timeout=DEADLINE)
            assert info.config_errors
            assert all(_small(e) for e in info.config_errors)
            assert said in info.config_errors[0], info.config_errors[0]


# ---- 2. frames: re-encoded off the event loop, skipped when unused -----------------------------


def _raw_frame(size: int) -> types_pb2.Image:
    pixels = np.arange(size * size * 3, dtype=np.uint32).astype(np.uint8).reshape(size, size, 3)
    return types_pb2.Image(encoding=types_pb2.IMAGE_ENCODING_RAW_RGB, width=size, height=size,
                           data=pixels.tobytes())


def _png_sizes(request: dict[str, Any]) -> list[tuple[int, int]]:
    """(width, height) of every image the model received in one chat request."""
    sizes = []
    for message in request["messages"]:
        for part in message["content"] if isinstance(message["content"], list) else []:
            if part.get("type") == "image_url":
                data = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
                sizes.append(Image.open(io.BytesIO(data)).size)
    return sizes


async def test_a_large_raw_frame_is_re_encoded_while_other_streams_are_answered(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The re-encoding of a 2048x2048 RAW_RGB frame is held open until another stream's
    answer has arrived: that can only happen when it runs off the event loop."""
    real_png_bytes: Callable[[types_pb2.Image], bytes] = policy_service.png_bytes
    entered, other_answered = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def held_png_bytes(image: types_pb2.Image) -> bytes:
        seen["thread"] = threading.current_thread()
        entered.set()
        seen["other_answered_first"] = other_answered.wait(DEADLINE / 2)
        return real_png_bytes(image)

    monkeypatch.setattr(policy_service, "png_bytes", held_png_bytes)
    loop_thread = threading.current_thread()
    with FakeOpenAI("turn left") as fake:
        async with policy_server() as pol:
            stub = pol_grpc.PolicyServiceStub(channel_for(pol.target))
            big = stub.Play()
            await _wait(big.write(_begin(_model_config(fake, max_image_history=1))))
            await _wait(big.read())
            other = stub.Play()
            await _wait(other.write(_begin({"agent": {"type": "dummy"}})))
            await _wait(other.read())

            await _wait(big.write(_observe("a big frame", image=_raw_frame(2048))))
            assert await asyncio.to_thread(entered.wait, DEADLINE), "no re-encoding started"
            await _wait(other.write(_observe()))
            answer = await _wait(other.read())
            other_answered.set()
            big_answer = await _wait(big.read())
            for call in (big, other):
                call.cancel()
        requests = [r.json for r in fake.requests if r.json is not None]
    assert answer.act.action.text in ACTIONS
    assert seen["other_answered_first"] is True
    assert seen["thread"] is not loop_thread
    assert not big_answer.act.HasField("error") and big_answer.act.action.text == "turn left"
    assert _png_sizes(requests[-1]) == [(2048, 2048)]


@pytest.mark.parametrize("image", [
    types_pb2.Image(encoding=types_pb2.IMAGE_ENCODING_RAW_RGB, width=64, height=64,
                    data=b"not 64x64x3 bytes"),
    types_pb2.Image(encoding=types_pb2.IMAGE_ENCODING_PNG, width=8, height=8,
                    data=b"not a png at all"),
], ids=["raw-of-the-wrong-size", "png-without-png-header"])
async def test_a_corrupt_frame_is_ignored_unless_images_are_kept(
        image: types_pb2.Image) -> None:
    with FakeOpenAI("turn left") as fake:
        async with policy_server() as pol:
            stub = pol_grpc.PolicyServiceStub(channel_for(pol.target))
            # text only (max_image_history=0): the frame is never looked at
            text_only = stub.Play()
            await _wait(text_only.write(_begin(_model_config(fake, max_image_history=0))))
            await _wait(text_only.read())
            await _wait(text_only.write(_observe(image=image)))
            act = (await _wait(text_only.read())).act
            assert not act.HasField("error") and act.action.text == "turn left"
            text_only.cancel()
            # frames kept: the same frame is a malformed Observe
            code, details = await _failure(stub.Play(), [
                _begin(_model_config(fake, max_image_history=1)), _observe(image=image)])
        requests = [r.json for r in fake.requests if r.json is not None]
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "malformed observe" in details
    assert len(requests) == 1 and _png_sizes(requests[0]) == []


# ---- 3. idle timeouts and the orchestrator's pings ---------------------------------------------


async def test_an_idle_play_stream_is_ended_and_its_slot_freed() -> None:
    server = await asyncio.to_thread(start_server, "agent_server", "--idle-timeout", "1",
                                     "--capacity", "1")
    try:
        stub = pol_grpc.PolicyServiceStub(channel_for(server.target))
        idle = stub.Play()
        await _wait(idle.write(_begin({"agent": {"type": "dummy"}})))
        ready = (await _wait(idle.read())).ready
        assert ready.idle_timeout_s == 1.0
        assert await _wait(idle.code()) == grpc.StatusCode.DEADLINE_EXCEEDED
        details = await _wait(idle.details())
        assert "1 s" in details and "--idle-timeout" in details and "ping" in details
        info = await stub.GetInfo(pol_pb.GetInfoRequest(), timeout=DEADLINE)
        assert (info.capacity, info.active_streams) == (1, 0)
        assert (await _dummy_turn(stub)).action.text in ACTIONS  # the one slot is free
    finally:
        await close_channels()
        await asyncio.to_thread(server.stop)


async def test_ping_is_answered_after_open_or_begin_and_refused_before() -> None:
    async with env_server(idle_timeout_s=30.0) as env, _policy(idle_timeout_s=30.0) as (pol, _):
        env_stub = env_grpc.EnvServiceStub(channel_for(env.target))
        code, _details = await _failure(env_stub.Session(), [
            env_pb.SessionRequest(ping=env_pb.PingRequest())])
        assert code == grpc.StatusCode.FAILED_PRECONDITION
        session = env_stub.Session()
        await _wait(session.write(_open()))
        assert (await _wait(session.read())).opened.idle_timeout_s == 30.0
        await _wait(session.write(env_pb.SessionRequest(ping=env_pb.PingRequest())))
        assert (await _wait(session.read())).WhichOneof("response") == "pong"
        session.cancel()

        pol_stub = pol_grpc.PolicyServiceStub(channel_for(pol))
        code, _details = await _failure(pol_stub.Play(), [pol_pb.PlayRequest(ping=pol_pb.Ping())])
        assert code == grpc.StatusCode.FAILED_PRECONDITION
        play = pol_stub.Play()
        await _wait(play.write(_begin({"agent": {"type": "dummy"}})))
        assert (await _wait(play.read())).ready.idle_timeout_s == 30.0
        await _wait(play.write(pol_pb.PlayRequest(ping=pol_pb.Ping())))
        assert (await _wait(play.read())).WhichOneof("response") == "pong"
        play.cancel()


class _PingCounter:
    """Counts the pings the env and policy servers answer; ``reached`` is set once both have
    answered ``target`` of them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, target: int) -> None:
        self.env = self.policy = 0
        self.target = target
        self.reached = asyncio.Event()
        on_ping = env_service._Session._on_ping

        async def counted_on_ping(session: Any, request: Any) -> Any:
            self.env += 1
            self._check()
            return await on_ping(session, request)

        monkeypatch.setattr(env_service._Session, "_on_ping", counted_on_ping)
        original_read = policy_service._PlayStream.read

        async def counted_read(stream: Any) -> Any:
            request = await original_read(stream)
            if request is not grpc.aio.EOF and request.WhichOneof("request") == "ping":
                self.policy += 1
                self._check()
            return request

        monkeypatch.setattr(policy_service._PlayStream, "read", counted_read)

    def _check(self) -> None:
        if min(self.env, self.policy) >= self.target:
            self.reached.set()


def _spec(fake: FakeOpenAI, *overrides: str) -> RunSpec:
    return load_spec(None, ["client.client_name=vllm", f"client.base_url={fake.base_url}",
                            "client.model_id=m", "client.max_retries=0", *overrides])


def _plan(env_target: str, policy_target: str) -> EpisodePlan:
    return EpisodePlan(run_id="hardening", env="babyai", task=GOTO, episode_index=0, seed=5,
                       env_target=env_target, policy_target=policy_target)


def _config(spec: RunSpec) -> EpisodeConfig:
    """``spec`` resolved for ``_plan``'s episode."""
    return episode_config(spec, "babyai", GOTO, 5)


async def test_a_model_slower_than_the_idle_timeouts_still_finishes_its_episode(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Both servers end streams silent for 3 s; every model call takes 7 s. The env session
    waits through each call and the Play stream through each env step: pings keep them (every
    0.75 s: the slack leaves room for a loaded machine's late timers and collector pauses)."""
    pings = _PingCounter(monkeypatch, target=1)
    with FakeOpenAI("turn left", latency=7.0) as fake:
        async with env_server(idle_timeout_s=3.0) as env, \
                _policy(idle_timeout_s=3.0) as (pol, _):
            record = await run_episode(_plan(env.target, pol),
                                       _config(_spec(fake, "eval.max_steps_per_episode=2")))
        calls = len(fake.requests)
    assert (record.end_reason, record.num_steps, record.error) == ("truncated", 2, "")
    assert calls == 2
    assert pings.env >= 1


async def test_a_driver_waiting_between_commands_keeps_its_streams(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The llm-worker drives an episode one command at a time and may wait long between them:
    the driver pings the env session and the Play stream meanwhile (8 pings each at a quarter
    of the 2 s idle timeout: twice the timeout passes), and the next step still plays."""
    pings = _PingCounter(monkeypatch, target=8)
    async with env_server(idle_timeout_s=2.0) as env, _policy(idle_timeout_s=2.0) as (pol, _):
        spec = load_spec(None, ["agent.type=dummy", "eval.max_steps_per_episode=3"])
        driver = EpisodeDriver(_plan(env.target, pol), _config(spec))
        try:
            await _wait(driver.start())
            await _wait(driver.step())
            await _wait(pings.reached.wait())
            turns = await _wait(driver.step())
        finally:
            await _wait(driver.finish())
    assert driver.num_steps == 2 and turns[0].result is not None and driver.error == ""


# ---- 4. prompt-size cap ------------------------------------------------------------------------


PROMPT_CAP = re.compile(r"prompt of (\d+) bytes exceeds client\.max_prompt_bytes=(\d+); lower "
                        r"agent\.max_text_history / max_image_history or raise the cap")


async def test_an_over_cap_prompt_is_never_sent_and_the_stream_goes_on() -> None:
    with FakeOpenAI("turn left") as fake:
        async with policy_server() as pol:
            stub = pol_grpc.PolicyServiceStub(channel_for(pol.target))
            config = _model_config(fake)
            config["client"]["max_prompt_bytes"] = 5_000
            play = stub.Play()
            await _wait(play.write(_begin(config)))
            await _wait(play.read())
            await _wait(play.write(_observe("small")))
            first = (await _wait(play.read())).act
            await _wait(play.write(_observe("x" * 10_000, step=1)))
            second = (await _wait(play.read())).act
            await _wait(play.write(pol_pb.PlayRequest(end=pol_pb.End())))
            assert (await _wait(play.read())).WhichOneof("response") == "ended"
            play.cancel()
        received = len(fake.requests)
    assert not first.HasField("error") and first.action.text == "turn left"
    match = PROMPT_CAP.fullmatch(second.error.message)
    assert match, second.error.message
    assert int(match[1]) > 10_000 and int(match[2]) == 5_000
    assert second.error.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    assert received == 1  # the over-cap prompt never reached the provider


async def test_an_over_cap_prompt_ends_the_episode_as_agent_error() -> None:
    with FakeOpenAI("turn left") as fake:
        async with env_server() as env, policy_server() as pol:
            record = await run_episode(_plan(env.target, pol.target),
                                       _config(_spec(fake, "client.max_prompt_bytes=100",
                                                     "eval.max_steps_per_episode=2")))
        received = len(fake.requests)
    assert record.end_reason == "agent_error" and record.num_steps == 0
    match = PROMPT_CAP.search(record.error)
    assert match and int(match[2]) == 100 and int(match[1]) > 100, record.error
    assert received == 0



def test_quoting_stays_bounded_when_escapes_lengthen_the_text() -> None:
    """``quote`` cuts by the length of what it shows: 1,024 control characters would show as
    4,096 (``\\x00``), so fewer are kept and the rest counted."""
    shown = quote("\x00" * 10_000)
    assert len(shown) <= MAX_QUOTE_CHARS + 40 and shown.endswith(" chars)")
    names = quote_names(HOSTILE_IDS)
    assert _small(names) and names.endswith("and 3980 more")


def _nested_struct(depth: int) -> struct_pb2.Struct:
    """A Struct nested ``depth`` mappings deep: past protobuf's parse depth limit at ~34."""
    root = struct_pb2.Struct()
    level = root
    for _ in range(depth):
        level = level.fields["a"].struct_value
    return root


async def test_a_message_that_does_not_parse_is_invalid_argument_mid_session() -> None:
    """An env Session that already holds a slot sends bytes that are no SessionRequest: the
    stream ends INVALID_ARGUMENT (gRPC alone says UNKNOWN), the slot is freed and the server
    goes on serving."""
    from tests.support.waiting import async_wait_until

    async with env_server() as srv:
        client = EnvClient(srv.target)
        raw = channel_for(srv.target).stream_stream(
            "/moria.env.v1.EnvService/Session", request_serializer=lambda data: data,
            response_deserializer=env_pb.SessionResponse.FromString)
        call = raw()
        opening = env_pb.SessionRequest(open=env_pb.OpenRequest(
            task="babyai:BabyAI-MixedTrainLocal-v0/goto"))
        await _wait(call.write(opening.SerializeToString()))
        await _wait(call.read())
        assert (await client.get_info()).active_sessions == 1
        await _wait(call.write(b"\xff\xff\xff\xff"))  # a field tag with no end
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await _wait(call.read())

        async def freed() -> bool:
            return (await client.get_info()).active_sessions == 0

        await async_wait_until(freed, "the refused session's slot to be freed", timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "does not parse" in (caught.value.details() or "")


async def test_a_begin_too_deep_to_parse_is_invalid_argument() -> None:
    async with policy_server() as pol:
        stub = pol_grpc.PolicyServiceStub(channel_for(pol.target))
        call = stub.Play()
        begin = pol_pb.PlayRequest(begin=pol_pb.Begin(agent_id="agent_0"))
        begin.begin.agent_config.CopyFrom(_nested_struct(60))
        await _wait(call.write(begin))
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await _wait(call.read())
        # the server goes on: a well-formed stream is served
        other = stub.Play()
        await _wait(other.write(_begin({"agent": {"type": "dummy"}})))
        ready = await _wait(other.read())
        other.cancel()
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "does not parse" in (caught.value.details() or "")
    assert ready.HasField("ready")
