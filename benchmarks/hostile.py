"""Hostile requests against real servers: how long a control call waits, and how much of its
step rate a healthy session keeps, while one client sends each kind of hostile request back to
back. The goals (docs/security.md): no control call (``GetInfo``) delayed more than 250 ms, and
a healthy session keeps at least half its step rate.

``moria serve env`` (BabyAI) and ``moria serve agent`` run as processes on unix sockets, as
the local stack runs them. This process drives a healthy client (an env session stepping the
oracle's action, or a Play stream of the dummy player answering Observes) and calls
``GetInfo`` every 20 ms; the attacker is another process (``python -m benchmarks.hostile
attack KIND TARGET SECONDS``), so building a 33 MB request never stalls the measuring loop.
Each attack runs ``--seconds``; the healthy rate is compared with a baseline of the same
length measured just before it, with no attacker.

Attacks: on the env server, Opens naming a 1 MiB unknown task (NOT_FOUND), carrying 20,000
option keys (refused by their count), 1.5M option keys (33 MB, refused by their size before
they are read) or a 60 MB task; on the agent server, Begins of 16 MiB with a refused config, of
60 MB (refused by their size), and configs of 10,000 keys (refused by their count).

Run: ``python -m benchmarks.hostile [--seconds 5]``; writes ``benchmarks/out/hostile.json``
with the load average before and after. Figures, never assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import grpc

from moria import aio

OUT = Path(__file__).resolve().parent / "out"
TASK = "BabyAI-MixedTrainLocal-v0/goto"
#: The goals this run judges.
CONTROL_GOAL_MS = 250.0
RATE_GOAL = 0.5
#: How often the control call is made (seconds).
PROBE_EVERY_S = 0.02
UNLIMITED = [("grpc.max_send_message_length", 2**31 - 1),
             ("grpc.max_receive_message_length", 2**31 - 1)]
ENV_ATTACKS = ("task_1mib", "keys_20k", "keys_1_5m", "task_60mb")
POLICY_ATTACKS = ("begin_16mib", "begin_60mb", "config_keys_10k")


# ---- the attacker (its own process) --------------------------------------------------------

def _field(number: int, payload: bytes) -> bytes:
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _open_with_keys(count: int) -> bytes:
    """A serialized SessionRequest whose Open carries ``count`` option keys."""
    entries = b"".join(_field(1, _field(1, f"k{i}".encode()) + _field(
        2, b"\x11" + struct.pack("<d", i))) for i in range(count))
    return _field(1, _field(1, TASK.encode()) + _field(5, entries))


def _attack_request(kind: str) -> tuple[str, bytes]:
    """(full method name, serialized request) of one attack."""
    from google.protobuf import struct_pb2

    from moria.env.v1 import env_service_pb2 as env_pb
    from moria.policy.v1 import policy_service_pb2 as pol_pb

    session, play = "/moria.env.v1.EnvService/Session", "/moria.policy.v1.PolicyService/Play"
    if kind == "task_1mib":
        return session, env_pb.SessionRequest(open=env_pb.OpenRequest(
            task="x" * 1_040_000)).SerializeToString()
    if kind == "keys_20k":
        return session, _open_with_keys(20_000)
    if kind == "keys_1_5m":
        return session, _open_with_keys(1_500_000)
    if kind == "task_60mb":
        return session, env_pb.SessionRequest(open=env_pb.OpenRequest(
            task="x" * 60_000_000)).SerializeToString()
    if kind in ("begin_16mib", "begin_60mb"):
        size = 16_000_000 if kind == "begin_16mib" else 60_000_000
        return play, pol_pb.PlayRequest(begin=pol_pb.Begin(
            instruction="x" * size, agent=pol_pb.AgentSettings(type="nope"))).SerializeToString()
    if kind == "config_keys_10k":
        config = struct_pb2.Struct()
        config.update({"agent": {"type": "dummy", **{f"key_{i}": i for i in range(10_000)}}})
        return play, pol_pb.PlayRequest(begin=pol_pb.Begin(
            agent_config=config)).SerializeToString()
    raise ValueError(f"unknown attack {kind!r}; attacks: {ENV_ATTACKS + POLICY_ATTACKS}")


async def attack(kind: str, target: str, seconds: float) -> int:
    """Send attack ``kind`` to ``target`` back to back for ``seconds``; the requests sent."""
    method, request = _attack_request(kind)
    sent = 0
    deadline = time.monotonic() + seconds
    async with grpc.aio.insecure_channel(target, options=UNLIMITED) as channel:
        call_of = channel.stream_stream(method, request_serializer=bytes,
                                        response_deserializer=bytes)
        while time.monotonic() < deadline:
            call = call_of()
            await call.write(request)
            with contextlib.suppress(grpc.aio.AioRpcError):  # the refusal is the point
                await call.read()
            call.cancel()
            sent += 1
    return sent


# ---- the healthy client and the control probe ------------------------------------------------

async def _env_steps(target: str, stop: asyncio.Event) -> int:
    from moria.clients import EnvClient
    from moria.codecs import dict_from_struct, text_action
    from moria.env.v1 import env_service_pb2 as env_pb

    steps, seed = 0, 0
    while not stop.is_set():
        session = EnvClient(target).session()
        opened = await session.open(env_pb.OpenRequest(task=TASK, seed=seed, oracle=True))
        obs = opened.agents["agent_0"].observation
        while not stop.is_set():
            step = await session.step(
                {"agent_0": text_action(dict_from_struct(obs.info)["expert_action"])})
            steps += 1
            obs = step.agents["agent_0"].observation
            if step.HasField("episode_end"):
                break
        await session.close()
        seed += 1
    return steps


async def _policy_turns(target: str, stop: asyncio.Event) -> int:
    from moria.clients import channel_for
    from moria.common.v1 import types_pb2
    from moria.policy.v1 import policy_service_pb2 as pol_pb
    from moria.policy.v1 import policy_service_pb2_grpc as pol_grpc

    call = pol_grpc.PolicyServiceStub(channel_for(target)).Play()
    await call.write(pol_pb.PlayRequest(begin=pol_pb.Begin(
        agent=pol_pb.AgentSettings(type="dummy"), agent_id="agent_0", instruction="play",
        action_space=types_pb2.ActionSpace(actions=[types_pb2.NamedAction(name="go")],
                                           default_action="go"))))
    await call.read()
    turns = 0
    while not stop.is_set():
        await call.write(pol_pb.PlayRequest(observe=pol_pb.Observe(
            observation=types_pb2.Observation(text={"long_term_context": "a wall"}),
            step=turns)))
        await call.read()
        turns += 1
    call.cancel()
    return turns


async def _probe(info: Callable[[], Awaitable[Any]], stop: asyncio.Event) -> list[float]:
    latencies = []
    while not stop.is_set():
        started = time.perf_counter()
        await info()
        latencies.append(1000 * (time.perf_counter() - started))
        await asyncio.sleep(PROBE_EVERY_S)
    return latencies


async def _window(healthy: Callable[[asyncio.Event], Awaitable[int]],
                  info: Callable[[], Awaitable[Any]], seconds: float,
                  attacker: list[str] | None) -> dict[str, Any]:
    """The healthy rate and control latencies over ``seconds``, with ``attacker`` (a command)
    running meanwhile when given."""
    stop = asyncio.Event()
    process = (subprocess.Popen(attacker, stdout=subprocess.PIPE, text=True)
               if attacker else None)
    started = time.perf_counter()
    tasks = [asyncio.ensure_future(healthy(stop)), asyncio.ensure_future(_probe(info, stop))]
    await asyncio.sleep(seconds)
    stop.set()
    done, latencies = await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - started
    sent = None
    if process is not None:
        out, _ = process.communicate(timeout=seconds + 120)
        sent = int(out.strip() or 0)
    ordered = sorted(latencies)
    return {"rate_per_s": round(done / elapsed, 1),
            "control_worst_ms": round(ordered[-1], 1) if ordered else None,
            "control_p99_ms": round(ordered[int(0.99 * (len(ordered) - 1))], 1)
            if ordered else None, "attack_requests": sent}


async def measure(seconds: float) -> dict[str, Any]:
    """Every attack against its server: baseline and attacked windows, and the verdicts."""
    from moria.clients import EnvClient, PolicyClient
    from orchestrator.core.stack import LocalStack

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as logs:
        async with LocalStack(["babyai"], Path(logs)) as stack:
            env = EnvClient(stack.env_target)
            policy = PolicyClient(stack.policy_target)
            await env.get_info(timeout=10)
            await policy.get_info(timeout=10)
            roles = [("env", ENV_ATTACKS, stack.env_target,
                      lambda stop: _env_steps(stack.env_target, stop),
                      lambda: env.get_info(timeout=30)),
                     ("policy", POLICY_ATTACKS, stack.policy_target,
                      lambda stop: _policy_turns(stack.policy_target, stop),
                      lambda: policy.get_info(timeout=30))]
            for role, attacks, target, healthy, info in roles:
                for kind in attacks:
                    base = await _window(healthy, info, seconds, None)
                    hit = await _window(healthy, info, seconds, [
                        sys.executable, "-m", "benchmarks.hostile", "attack", kind, target,
                        str(seconds)])
                    ratio = hit["rate_per_s"] / base["rate_per_s"] if base["rate_per_s"] else 0
                    results[f"{role}.{kind}"] = {
                        "baseline": base, "attacked": hit, "rate_ratio": round(ratio, 3),
                        "control_goal_met": (hit["control_worst_ms"] or 0) <= CONTROL_GOAL_MS,
                        "rate_goal_met": ratio >= RATE_GOAL}
    return results


def run(seconds: float) -> dict[str, Any]:
    """``measure`` with the load average before and after."""
    before = [round(x, 2) for x in os.getloadavg()]
    results = aio.run(measure(seconds))
    return {"seconds_per_window": seconds, "load_average_before": before,
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "goals": {"control_worst_ms_at_most": CONTROL_GOAL_MS,
                      "healthy_rate_ratio_at_least": RATE_GOAL},
            "attacks": results}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["attack"]:
        kind, target, seconds = args[1], args[2], float(args[3])
        print(aio.run(attack(kind, target, seconds)))
        return 0
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hostile",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0,
                        help="length of each baseline and attacked window (default 5)")
    parsed = parser.parse_args(args)
    figures = run(parsed.seconds)
    OUT.mkdir(exist_ok=True)
    (OUT / "hostile.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
