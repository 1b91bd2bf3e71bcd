"""Hostile clients against real servers started as ``moria serve env|agent|orchestrator`` would
(child processes, their default flags unless a test says otherwise), a healthy client beside
the attacks. One test per finding of the second round of hostile-client checks:

1. an Open option never becomes a game constructor's keyword: a render mode (which made pygame
   reach for a display and, from 8 clients at once, killed the env server with SIGSEGV), a huge
   grid or step limit are INVALID_ARGUMENT naming the key and the keys allowed; the server
   lives and its log has no traceback; a run spec carrying one fails before any server starts;
2. no server imports code from, or parses as a model, a path a client names: a planted BALROG
   checkout is never imported, a ``.gguf`` path never loaded; the answer is the same whether
   the path exists or not;
3. refused requests do not keep their memory: RSS after 100 refused requests of each server's
   largest size stays within 200 MB of RSS before (it grew ~115 MB per refused 60 MB Open);
4. a request of 1.5M option keys is refused by its size before it is read, one of 20,000 by
   their count before any is decoded, while a healthy session steps on;
5. ``SubmitRun`` cannot probe the service's files (every path-like field is refused by name,
   the same answer for an existing and a missing path) nor make it dial a host it was not told
   to (``--allowed-endpoints``);
6. one client address cannot take every slot (``--max-sessions-per-peer``,
   ``--max-streams-per-peer``): another address still opens, and silent sessions are reaped
   without a traceback;
7. the smaller ones: a model endpoint that refuses the connection is said to refuse it; the
   worker protocol's ``reset`` with a seed past 64 bits is a clear error; a price file that is
   no price table is not echoed.

Every wait has a deadline; nothing is asserted about durations. Where memory is the point, RSS
is read from the server's process (psutil), after the server answered everything.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import psutil
import pytest
from google.protobuf import struct_pb2

from moria.codecs import text_action
from moria.common.v1 import types_pb2
from moria.env.v1 import env_service_pb2 as env_pb
from moria.env.v1 import env_service_pb2_grpc as env_grpc
from moria.orchestrator.v1 import orchestrator_service_pb2 as orch_pb
from moria.orchestrator.v1 import orchestrator_service_pb2_grpc as orch_grpc
from moria.policy.v1 import policy_service_pb2 as pol_pb
from moria.policy.v1 import policy_service_pb2_grpc as pol_grpc
from tests.support.processes import ServerProcess, start_server
from tests.support.wire import open_with_option_keys

GOTO = "BabyAI-MixedTrainLocal-v0/goto"
EMPTY = "MiniGrid-Empty-5x5-v0"
#: A deadline for every call; a server that takes longer is stuck, not slow.
DEADLINE = 30.0
#: How much a server's RSS may grow over 100 refused requests (the issue's bound).
RSS_BOUND_MB = 200
#: Channel options of the attacking client: it sends what it likes.
UNLIMITED = [("grpc.max_send_message_length", 2**31 - 1),
             ("grpc.max_receive_message_length", 2**31 - 1)]
VENV_BIN = Path(sys.executable).parent
SPACE = types_pb2.ActionSpace(actions=[types_pb2.NamedAction(name="turn left")],
                              default_action="turn left")


@contextmanager
def server(module: str, *args: str, address: str = "127.0.0.1:0") -> Iterator[ServerProcess]:
    started = start_server(module, *args, address=address)
    try:
        yield started
    finally:
        started.stop()


def without_quotes(text: str) -> str:
    """``text`` with every quoted value (``moria.quoting.quote``'s form) replaced."""
    return re.sub(r"'[^']*'(… \(\+\d+ chars\))?", "VALUE", text)


def rss_mb(process: ServerProcess) -> float:
    return psutil.Process(process.process.pid).memory_info().rss / 2**20


def no_traceback(process: ServerProcess) -> None:
    text = "\n".join(process.log)
    assert "Traceback" not in text, text[-3000:]


async def open_session(stub: env_grpc.EnvServiceStub, request: env_pb.OpenRequest,
                       ) -> tuple[grpc.StatusCode, str, Any]:
    """Open one session: (OK, "", the call) or the status it ended with."""
    call = stub.Session()
    await call.write(env_pb.SessionRequest(open=request))
    try:
        answer = await asyncio.wait_for(call.read(), DEADLINE)
    except grpc.aio.AioRpcError as exc:
        return exc.code(), exc.details() or "", call
    assert answer.WhichOneof("response") == "opened", answer
    return grpc.StatusCode.OK, "", call


def options(data: dict[str, Any]) -> struct_pb2.Struct:
    out = struct_pb2.Struct()
    out.update(data)
    return out


async def healthy_steps(target: str, steps: int) -> int:
    """A well-behaved session: open, ``steps`` steps (resetting at each episode end), close.
    Returns the steps answered."""
    async with grpc.aio.insecure_channel(target) as channel:
        stub = env_grpc.EnvServiceStub(channel)
        code, details, call = await open_session(stub, env_pb.OpenRequest(task=GOTO, seed=1))
        assert code == grpc.StatusCode.OK, details
        done = 0
        for _ in range(steps):
            await call.write(env_pb.SessionRequest(step=env_pb.StepRequest(
                actions={"agent_0": text_action("turn left")})))
            answer = await asyncio.wait_for(call.read(), DEADLINE)
            done += 1
            if answer.step.HasField("episode_end"):
                await call.write(env_pb.SessionRequest(reset=env_pb.ResetRequest(seed=done)))
                await asyncio.wait_for(call.read(), DEADLINE)
        await call.done_writing()
        return done


# ---- 1. options are data -----------------------------------------------------------------------


async def test_an_option_never_reaches_a_game_constructor() -> None:
    with server("env_server", "--families", "babyai") as env:
        async with grpc.aio.insecure_channel(env.target) as channel:
            stub = env_grpc.EnvServiceStub(channel)
            hostile = env_pb.OpenRequest(task=EMPTY, seed=0, options=options(
                {"render_mode": "human"}))

            async def client() -> list[tuple[grpc.StatusCode, str]]:
                return [(await open_session(stub, hostile))[:2] for _ in range(5)]

            # 8 clients x 5 such Opens took the server down with SIGSEGV
            answers = [a for c in await asyncio.gather(*(client() for _ in range(8))) for a in c]
            for key, value in (("size", 1500), ("max_steps", 1e15)):
                answers.append((await open_session(stub, env_pb.OpenRequest(
                    task=EMPTY, seed=0, options=options({key: value}))))[:2])
        assert len(answers) == 42
        for code, details in answers:
            assert code == grpc.StatusCode.INVALID_ARGUMENT, (code, details)
            assert "options: unknown key" in details, details
            assert "allowed: num_dists, tile_size, agent_view_size" in details, details
        assert "'render_mode'" in answers[0][1] and "'max_steps'" in answers[-1][1]
        assert await healthy_steps(env.target, 5) == 5
        assert env.process.poll() is None
        no_traceback(env)


def test_a_run_spec_with_a_render_mode_stops_before_any_server(tmp_path: Path) -> None:
    run = subprocess.run([str(VENV_BIN / "moria"), "eval", "envs.babyai_kwargs.render_mode=human",
                          f"eval.output_dir={tmp_path / 'out'}", "--no-progress"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 2, run.stderr[-2000:]
    assert "envs.babyai_kwargs': unknown key 'render_mode'" in run.stderr
    assert not (tmp_path / "out" / "logs").exists()  # no local stack was started


# ---- 2. no code or model file from a client's path ---------------------------------------------


def plant_checkout(root: Path, marker: Path) -> Path:
    """A folder that looks like a BALROG checkout whose package, once imported, writes
    ``marker``."""
    package = root / "balrog"
    for sub in ("agents", "prompt_builder", "config"):
        (package / sub).mkdir(parents=True)
    (package / "config" / "config.yaml").write_text("agent: {}\n")
    (package / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('imported')\n")
    return root


async def begin_refused(stub: pol_grpc.PolicyServiceStub, agent: dict[str, Any],
                        client: dict[str, Any] | None = None) -> tuple[grpc.StatusCode, str]:
    config = options({"agent": agent, **({"client": client} if client else {})})
    call = stub.Play()
    await call.write(pol_pb.PlayRequest(begin=pol_pb.Begin(
        agent_config=config, env_name="babyai", task=GOTO, agent_id="agent_0",
        instruction="Reach the goal.",
        action_space=SPACE)))
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await asyncio.wait_for(call.read(), DEADLINE)
    return caught.value.code(), caught.value.details() or ""


async def test_the_policy_server_imports_and_loads_nothing_a_client_names(
        tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    checkout = plant_checkout(tmp_path / "evil", marker)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 64)
    offered = tmp_path / "offered"
    offered.mkdir()
    with server("agent_server", "--balrog-sources", str(offered)) as agent:
        async with grpc.aio.insecure_channel(agent.target) as channel:
            stub = pol_grpc.PolicyServiceStub(channel)
            answers = {}
            for path in (checkout, tmp_path / "no-such-checkout"):
                answers[path] = await begin_refused(stub, {
                    "type": "naive", "protocol": "balrog", "balrog_source": str(path)})
            for path in (model, tmp_path / "no-such.gguf"):
                answers[path] = await begin_refused(stub, {"type": "naive"},
                                                    {"client_name": "local",
                                                     "model_id": str(path)})
            named = await begin_refused(stub, {"type": "naive", "protocol": "balrog",
                                               "balrog_source": "evil"})
            info = await stub.GetInfo(pol_pb.GetInfoRequest(check_config=options(
                {"agent": {"type": "naive", "protocol": "balrog",
                           "balrog_source": str(checkout)}})), timeout=DEADLINE)
    assert not marker.exists(), "the planted checkout was imported"
    for path, (code, details) in answers.items():
        assert code == grpc.StatusCode.INVALID_ARGUMENT, (path, details)
        assert "never a path" in details or "offers none" in details, details
    # the same answer whether or not the path exists (the quoted value aside)
    texts = [without_quotes(details) for _, details in answers.values()]
    assert texts[0] == texts[1] and texts[2] == texts[3], texts
    assert "it runs without --models-dir" in texts[2], texts[2]
    assert named[0] == grpc.StatusCode.INVALID_ARGUMENT
    assert named[1] == ("bad agent_config: agent.balrog_source 'evil' is not offered by this "
                        "server (its --balrog-sources offers no such BALROG checkout); "
                        "offered: none")
    assert info.config_errors and "never a path" in info.config_errors[0]
    no_traceback(agent)


# ---- 3. bounded memory under refused requests -------------------------------------------------


async def test_refused_requests_give_their_memory_back(tmp_path: Path) -> None:
    with server("env_server", "--families", "babyai") as env, \
            server("agent_server") as agent, \
            server("orchestrator.apps.service", "--state-dir", str(tmp_path),
                   "--allowed-endpoints", "127.0.0.1:9") as orchestrator:
        before = {name: rss_mb(s) for name, s in
                  (("env", env), ("agent", agent), ("orchestrator", orchestrator))}
        async with grpc.aio.insecure_channel(env.target, options=UNLIMITED) as channel:
            stub = env_grpc.EnvServiceStub(channel)
            # the largest Open the env server reads (1 MiB), naming an unknown task
            for _ in range(100):
                code, details, _ = await open_session(stub, env_pb.OpenRequest(
                    task="x" * 1_040_000))
                assert code == grpc.StatusCode.NOT_FOUND, details[:200]
            # larger ones are refused before they are read
            for _ in range(3):
                code, details, _ = await open_session(stub, env_pb.OpenRequest(
                    task="x" * 60_000_000))
                assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, details[:200]
        async with grpc.aio.insecure_channel(agent.target, options=UNLIMITED) as channel:
            stub_p = pol_grpc.PolicyServiceStub(channel)
            for _ in range(100):  # the largest Begin the agent server reads (16 MiB)
                call = stub_p.Play()
                await call.write(pol_pb.PlayRequest(begin=pol_pb.Begin(
                    instruction="x" * 16_000_000, agent=pol_pb.AgentSettings(type="nope"))))
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await asyncio.wait_for(call.read(), DEADLINE)
                assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        async with grpc.aio.insecure_channel(orchestrator.target, options=UNLIMITED) as channel:
            stub_o = orch_grpc.OrchestratorServiceStub(channel)
            for _ in range(100):  # a spec of 2 MB: over the spec limit, under the message's
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await stub_o.SubmitRun(orch_pb.SubmitRunRequest(spec=options(
                        {"hydra": "x" * 2_000_000})), timeout=DEADLINE)
                assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        await asyncio.sleep(1)
        after = {name: rss_mb(s) for name, s in
                 (("env", env), ("agent", agent), ("orchestrator", orchestrator))}
        for name in before:
            assert after[name] - before[name] < RSS_BOUND_MB, (name, before, after)
        for process in (env, agent, orchestrator):
            no_traceback(process)


async def test_a_play_message_over_16_mib_is_refused_before_it_is_read() -> None:
    # Begin and Observe alike: gRPC's receive limit is the largest Play request (16 MiB), so
    # the server reads the length prefix and refuses; the 64 MiB message limit is for sending
    with server("agent_server") as agent:
        async with grpc.aio.insecure_channel(agent.target, options=UNLIMITED) as channel:
            stub = pol_grpc.PolicyServiceStub(channel)
            for request in (pol_pb.PlayRequest(begin=pol_pb.Begin(instruction="x" * 60_000_000)),
                            pol_pb.PlayRequest(observe=pol_pb.Observe(
                                observation=types_pb2.Observation(
                                    text={"long_term_context": "x" * 17_000_000})))):
                call = stub.Play()
                await call.write(request)
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await asyncio.wait_for(call.read(), DEADLINE)
                assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert re.search(r"larger than max \(\d+ vs\. 16777216\)",
                                 caught.value.details() or ""), caught.value.details()
            info = await stub.GetInfo(pol_pb.GetInfoRequest(), timeout=DEADLINE)
            assert info.active_streams == 0
        no_traceback(agent)


# ---- 4. bounded work ------------------------------------------------------------------------


async def test_a_million_option_keys_are_refused_while_a_healthy_session_steps() -> None:
    with server("env_server", "--families", "babyai") as env:
        healthy = asyncio.ensure_future(healthy_steps(env.target, 200))
        async with grpc.aio.insecure_channel(env.target, options=UNLIMITED) as channel:
            stub = env_grpc.EnvServiceStub(channel)
            raw = channel.stream_stream("/moria.env.v1.EnvService/Session",
                                        request_serializer=bytes,
                                        response_deserializer=env_pb.SessionResponse.FromString)
            call = raw()
            await call.write(open_with_option_keys(1_500_000, GOTO))  # 33 MB, built as bytes
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await asyncio.wait_for(call.read(), DEADLINE)
            assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "larger than max" in (caught.value.details() or "")
            fewer = env_pb.OpenRequest(task=GOTO)
            for i in range(20_000):  # under the 1 MiB an Open may be
                fewer.options.fields[f"k{i}"].number_value = i
            code, details, _ = await open_session(stub, fewer)
            assert code == grpc.StatusCode.INVALID_ARGUMENT, details[:300]
            assert details == "options: 20,000 keys given; a family takes at most 64"
            # a few unknown keys: named (bounded), with the keys allowed
            code, details, _ = await open_session(stub, env_pb.OpenRequest(
                task=GOTO, options=options({f"key_{i}": i for i in range(30)})))
            assert code == grpc.StatusCode.INVALID_ARGUMENT
            assert "unknown keys 'key_0', 'key_1', 'key_10'" in details, details
            assert "and 20 more" in details
            info = await stub.GetInfo(env_pb.GetInfoRequest(), timeout=DEADLINE)
            assert info.families == ["babyai"]
        assert await asyncio.wait_for(healthy, DEADLINE * 4) == 200
        no_traceback(env)


# ---- 5. SubmitRun cannot probe the service's files or network ------------------------------------


#: Every field of a run spec that names a file, and a value that makes it one.
PATH_FIELDS: list[tuple[str, dict[str, Any]]] = [
    ("agent.checkpoint", {"agent": {"type": "rl", "checkpoint": "{path}"}}),
    ("agent.balrog_source", {"agent": {"type": "naive", "protocol": "balrog",
                                       "balrog_source": "{path}"}}),
    ("client.model_id", {"client": {"client_name": "local", "model_id": "{path}.gguf"}}),
    ("eval.icl_dataset", {"agent": {"type": "few_shot"}, "eval": {"icl_dataset": "{path}"}}),
    ("eval.prices", {"eval": {"prices": "{path}"}}),
    ("envs.meltingpot_kwargs.assets", {"envs": {"names": "meltingpot",
                                                "meltingpot_kwargs": {"assets": "{path}"}}}),
    ("envs.minihack_kwargs.boxoban_levels", {"envs": {"names": "minihack", "minihack_kwargs": {
        "boxoban_levels": "{path}"}}}),
    ("endpoints.tls.ca_cert", {"endpoints": {"env": {"babyai": ["127.0.0.1:9"]},
                                             "policy": ["127.0.0.1:9"],
                                             "tls": {"ca_cert": "{path}"}}}),
]


def _with_path(template: Any, path: str) -> Any:
    if isinstance(template, dict):
        return {k: _with_path(v, path) for k, v in template.items()}
    return template.replace("{path}", path) if isinstance(template, str) else template


async def test_submit_run_names_no_server_file_and_dials_no_stranger(tmp_path: Path) -> None:
    existing = tmp_path / "secret"
    existing.mkdir()
    (existing / "shadow").write_text("root:$6$salt$hash:19000:0:99999:7:::\n")
    probe_port = socket.socket()
    probe_port.bind(("127.0.0.1", 0))
    probe_port.listen()
    probe_port.setblocking(False)
    stranger = f"127.0.0.1:{probe_port.getsockname()[1]}"
    with server("orchestrator.apps.service", "--state-dir", str(tmp_path / "state"),
                "--allowed-endpoints", "127.0.0.1:9") as orchestrator:
        async with grpc.aio.insecure_channel(orchestrator.target) as channel:
            stub = orch_grpc.OrchestratorServiceStub(channel)

            async def refused(spec: dict[str, Any]) -> tuple[grpc.StatusCode, str]:
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await stub.SubmitRun(orch_pb.SubmitRunRequest(spec=options(spec)),
                                         timeout=DEADLINE)
                return caught.value.code(), caught.value.details() or ""

            for name, template in PATH_FIELDS:
                answers = []
                for path in (existing / "shadow", existing, tmp_path / "missing"):
                    code, details = await refused(_with_path(template, str(path)))
                    assert code == grpc.StatusCode.INVALID_ARGUMENT, (name, details)
                    assert f"{name} names a server file" in details, (name, details)
                    assert "root:" not in details and "$6$" not in details
                    answers.append(details.replace(str(path), "PATH"))
                assert len(set(answers)) == 1, (name, answers)  # exists or not: one answer
            code, details = await refused({"endpoints": {"env": {"babyai": [stranger]},
                                                         "policy": [stranger]}})
            assert code == grpc.StatusCode.INVALID_ARGUMENT
            assert "not among the servers this service dials" in details, details
            # a render mode in the spec: refused before anything runs
            code, details = await refused({"envs": {"babyai_kwargs": {"render_mode": "human"}}})
            assert code == grpc.StatusCode.INVALID_ARGUMENT and "'render_mode'" in details
            listed = await stub.ListRuns(orch_pb.ListRunsRequest(), timeout=DEADLINE)
        assert not listed.runs
        with pytest.raises(BlockingIOError):
            probe_port.accept()  # nobody knocked
        probe_port.close()
        no_traceback(orchestrator)


# ---- 6. per-peer fairness ---------------------------------------------------------------------


async def test_one_client_address_cannot_take_every_slot() -> None:
    with server("env_server", "--families", "babyai", "--capacity", "4", "--idle-timeout", "2",
                address="[::]:0") as env, \
            server("agent_server", "--capacity", "4", "--idle-timeout", "2",
                   address="[::]:0") as agent:
        port_env, port_agent = env.target.rsplit(":", 1)[1], agent.target.rsplit(":", 1)[1]
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port_env}") as one, \
                grpc.aio.insecure_channel(f"[::1]:{port_env}") as other:
            stub = env_grpc.EnvServiceStub(one)
            opened = [await open_session(stub, env_pb.OpenRequest(task=GOTO, seed=i))
                      for i in range(4)]
            assert [o[0] for o in opened] == [grpc.StatusCode.OK] * 3 + [
                grpc.StatusCode.RESOURCE_EXHAUSTED]
            assert "--max-sessions-per-peer" in opened[3][1], opened[3][1]
            info = await stub.GetInfo(env_pb.GetInfoRequest(), timeout=DEADLINE)
            assert (info.peer_capacity, info.peer_sessions) == (3, 3)
            code, details, _ = await open_session(env_grpc.EnvServiceStub(other),
                                                  env_pb.OpenRequest(task=GOTO, seed=9))
            assert code == grpc.StatusCode.OK, details  # another address still gets a slot
            # the silent sessions are reaped, their slots freed, without a traceback
            for _, _, call in opened[:3]:
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await asyncio.wait_for(call.read(), DEADLINE)
                assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port_agent}") as one, \
                grpc.aio.insecure_channel(f"[::1]:{port_agent}") as other:
            stub_p = pol_grpc.PolicyServiceStub(one)
            streams = []
            for _ in range(4):
                call = stub_p.Play()
                await call.write(pol_pb.PlayRequest(begin=pol_pb.Begin(
                    agent=pol_pb.AgentSettings(type="random"), env_name="babyai", task=GOTO,
                    agent_id="agent_0", instruction="x",
                    action_space=SPACE)))
                streams.append(call)
            answers = []
            for call in streams:
                try:
                    answers.append((await asyncio.wait_for(call.read(), DEADLINE))
                                   .WhichOneof("response"))
                except grpc.aio.AioRpcError as exc:
                    answers.append(f"{exc.code().name}: {exc.details()}")
            assert answers[:3] == ["ready"] * 3, answers
            assert answers[3].startswith("RESOURCE_EXHAUSTED") and \
                "--max-streams-per-peer" in answers[3], answers
            info_p = await pol_grpc.PolicyServiceStub(other).GetInfo(
                pol_pb.GetInfoRequest(), timeout=DEADLINE)
            assert (info_p.peer_capacity, info_p.peer_streams) == (3, 0)
        await asyncio.sleep(3)  # past the idle timeout: everything reaped
        for process in (env, agent):
            assert process.process.poll() is None
            no_traceback(process)


# ---- 7. the smaller ones ------------------------------------------------------------------------


async def test_a_model_endpoint_that_refuses_connections_is_said_to_refuse_them() -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there: a connection is refused at once
    with server("agent_server") as agent:
        async with grpc.aio.insecure_channel(agent.target) as channel:
            info = await pol_grpc.PolicyServiceStub(channel).GetInfo(pol_pb.GetInfoRequest(
                check_config=options({"agent": {"type": "naive"}, "client": {
                    "client_name": "vllm", "base_url": f"http://127.0.0.1:{port}/v1",
                    "model_id": "m"}})), timeout=DEADLINE)
    (error,) = info.config_errors
    assert "connection refused" in error and "timed out" not in error, error


def test_the_worker_protocol_refuses_a_seed_past_64_bits_clearly(tmp_path: Path) -> None:
    worker = subprocess.Popen(
        [str(VENV_BIN / "llm-worker"), "--interactive", "--env", "babyai", "--task", GOTO,
         "--agent-type", "dummy", "--telemetry-dir", str(tmp_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=tmp_path)
    out, err = worker.communicate(
        json.dumps({"cmd": "reset", "seed": 10**23}) + "\n" + json.dumps({"cmd": "stop"}) + "\n",
        timeout=300)
    answers = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    errors = [a for a in answers if a.get("type") == "error"]
    assert errors and errors[0]["message"] == (
        "field 'seed' must be an integer in [0, 2**64 - 1] (got '100000000000000000000000')"), \
        answers
    assert "Traceback" not in err, err[-2000:]


def test_a_price_file_that_is_no_price_table_is_not_echoed(tmp_path: Path) -> None:
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$salt$hash:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n"
                      "token: s3cr3t\n")
    run = subprocess.run([str(VENV_BIN / "moria"), "eval", "agent.type=dummy",
                          f"eval.prices={secret}", f"eval.output_dir={tmp_path / 'out'}",
                          "--no-progress"], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert run.returncode == 2, run.stderr[-2000:]
    assert "bad price table" in run.stderr and "<unknown key>" in run.stderr
    for secret_part in ("root:", "$6$", "daemon:", "s3cr3t", "token:"):
        assert secret_part not in run.stderr, run.stderr
