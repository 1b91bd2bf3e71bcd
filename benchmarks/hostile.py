"""Hostile requests against real servers: how long a control call waits, and how much of its
step rate a healthy session keeps, during each hostile request. The goals (docs/security.md):
no control call (``GetInfo``) delayed more than 250 ms, and a healthy session keeps at least
half its step rate, during any single hostile request.

``moria serve env`` (BabyAI) and ``moria serve agent`` run as processes on unix sockets, as
the local stack runs them. This process drives a healthy client (an env session stepping the
oracle's action, or a Play stream of the dummy player answering Observes) and calls
``GetInfo`` every 20 ms, recording when each step and each call ended; the attacker is another
process (``python -m benchmarks.hostile attack KIND TARGET SECONDS``), so building a 33 MB
request never stalls the measuring loop. It sends one hostile request at a time, waits for its
answer, pauses ``PAUSE_S``, and reports when each request was under way (CLOCK_MONOTONIC, the
same clock in every process). The healthy rate *during* the requests (steps that ended inside
one, over the time they took) is compared with the rate in a baseline window of the same
length just before, with no attacker; the control figure is the longest GetInfo that began
during a request. With ``--flood``, the attacker sends back to back instead (no pause), and
the rates are over the whole window: a harsher test than the goal's, reported beside it.

The healthy client is paced (``--healthy-rate``, default ``HEALTHY_RATE`` steps a second, the
rate of the healthy client beside which the attacks were first found): a session of a real run
waits on its model between steps, and it is the server's own hold on its loop that a paced
session feels. At ``--healthy-rate 0`` it steps as fast as it can instead: then it and the
server already keep both cores of a small machine busy, and any third process (the attacker
building and sending its request) takes its share of them whatever the server does; the
figures of both modes go into the result file.

Attacks: on the env server, Opens naming a 1 MiB unknown task (NOT_FOUND), carrying 20,000
option keys (refused by their count), 1.5M option keys (33 MB, refused by their size before
they are read) or a 60 MB task; on the agent server, Begins of 16 MiB with a refused config, of
60 MB (refused by their size), and configs of 10,000 keys (refused by their count).

Run: ``python -m benchmarks.hostile [--seconds 5] [--healthy-rate 200] [--flood]``; writes
``benchmarks/out/hostile.json`` (``hostile_flood.json``)
with the load average before and after. Figures, never assertions.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
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
#: The attacker's pause between two requests (seconds), unless flooding.
PAUSE_S = 0.2
#: The healthy client's default pace (steps a second): the issue's healthy client stepped at
#: about 200 a second.
HEALTHY_RATE = 200.0
UNLIMITED = [("grpc.max_send_message_length", 2**31 - 1),
             ("grpc.max_receive_message_length", 2**31 - 1)]
ENV_ATTACKS = ("task_1mib", "keys_20k", "keys_1_5m", "task_60mb")
POLICY_ATTACKS = ("begin_16mib", "begin_60mb", "config_keys_10k")


# ---- the attacker (its own process) --------------------------------------------------------

def _attack_request(kind: str) -> tuple[str, bytes]:
    """(full method name, serialized request) of one attack."""
    from google.protobuf import struct_pb2

    from moria.env.v1 import env_service_pb2 as env_pb
    from moria.policy.v1 import policy_service_pb2 as pol_pb
    from tests.support.wire import open_with_option_keys

    session, play = "/moria.env.v1.EnvService/Session", "/moria.policy.v1.PolicyService/Play"
    if kind == "task_1mib":
        return session, env_pb.SessionRequest(open=env_pb.OpenRequest(
            task="x" * 1_040_000)).SerializeToString()
    if kind == "keys_20k":
        return session, open_with_option_keys(20_000, TASK)
    if kind == "keys_1_5m":
        return session, open_with_option_keys(1_500_000, TASK)
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


async def attack(kind: str, target: str, seconds: float, pause: float) -> list[list[float]]:
    """Send attack ``kind`` to ``target`` for ``seconds``, one request at a time with
    ``pause`` seconds between them; each request's [start, end] (time.monotonic)."""
    method, request = _attack_request(kind)
    intervals = []
    deadline = time.monotonic() + seconds
    async with grpc.aio.insecure_channel(target, options=UNLIMITED) as channel:
        call_of = channel.stream_stream(method, request_serializer=bytes,
                                        response_deserializer=bytes)
        while time.monotonic() < deadline:
            started = time.monotonic()
            call = call_of()
            await call.write(request)
            with contextlib.suppress(grpc.aio.AioRpcError):  # the refusal is the point
                await call.read()
            call.cancel()
            intervals.append([started, time.monotonic()])
            if pause:
                await asyncio.sleep(pause)
    return intervals


# ---- the healthy client and the control probe ------------------------------------------------

class Pacer:
    """Awaited before each healthy step: holds the steps to ``rate`` a second (0: no pause).
    A step that is late starts at once and the schedule restarts from it: lost steps are not
    made up in a burst, so a stall shows as missing steps."""

    def __init__(self, rate: float):
        self.period = 1.0 / rate if rate > 0 else 0.0
        self.next = time.monotonic()

    async def __call__(self) -> None:
        if not self.period:
            return
        self.next += self.period
        delay = self.next - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            self.next = time.monotonic()


async def _env_steps(target: str, stop: asyncio.Event, rate: float) -> list[float]:
    from benchmarks.common import oracle_episode
    from moria.clients import EnvClient

    ended: list[float] = []
    seed = 0
    pace = Pacer(rate)
    while not stop.is_set():
        await oracle_episode(EnvClient(target).session(), TASK, seed,
                             lambda: not stop.is_set(), lambda: ended.append(time.monotonic()),
                             pace)
        seed += 1
    return ended


async def _policy_turns(target: str, stop: asyncio.Event, rate: float) -> list[float]:
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
    ended: list[float] = []
    pace = Pacer(rate)
    while not stop.is_set():
        await pace()
        await call.write(pol_pb.PlayRequest(observe=pol_pb.Observe(
            observation=types_pb2.Observation(text={"long_term_context": "a wall"}),
            step=len(ended))))
        await call.read()
        ended.append(time.monotonic())
    call.cancel()
    return ended


async def _probe(info: Callable[[], Awaitable[Any]],
                 stop: asyncio.Event) -> list[tuple[float, float]]:
    """(start, milliseconds) of every control call until ``stop``."""
    calls = []
    while not stop.is_set():
        started = time.monotonic()
        await info()
        calls.append((started, 1000 * (time.monotonic() - started)))
        await asyncio.sleep(PROBE_EVERY_S)
    return calls


def _inside(moment: float, intervals: list[list[float]]) -> bool:
    return any(start <= moment <= end for start, end in intervals)


async def _window(healthy: Callable[[asyncio.Event], Awaitable[list[float]]],
                  info: Callable[[], Awaitable[Any]], seconds: float,
                  attacker: list[str] | None) -> dict[str, Any]:
    """The healthy rate and control latencies over ``seconds``, with ``attacker`` (a command)
    running meanwhile when given: over the whole window, and during its requests."""
    stop = asyncio.Event()
    process = (subprocess.Popen(attacker, stdout=subprocess.PIPE, text=True)
               if attacker else None)
    started = time.monotonic()
    tasks = [asyncio.ensure_future(healthy(stop)), asyncio.ensure_future(_probe(info, stop))]
    await asyncio.sleep(seconds)
    stop.set()
    ended, calls = await asyncio.gather(*tasks)
    elapsed = time.monotonic() - started
    figures: dict[str, Any] = {"rate_per_s": round(len(ended) / elapsed, 1),
                               "control_worst_ms": round(max(ms for _, ms in calls), 1)}
    if process is not None:
        out, _ = process.communicate(timeout=seconds + 120)
        intervals = json.loads(out.strip().splitlines()[-1])
        busy = sum(end - start for start, end in intervals)
        during = [ms for start, ms in calls if _inside(start, intervals)]
        figures.update({
            "attack_requests": len(intervals),
            "attack_ms_mean": round(1000 * busy / max(1, len(intervals)), 1),
            "rate_during_per_s": round(sum(_inside(t, intervals) for t in ended) / busy, 1)
            if busy else None,
            "control_worst_during_ms": round(max(during), 1) if during else None})
    return figures


async def measure(seconds: float, flood: bool, rate: float,
                  only: frozenset[str] = frozenset()) -> dict[str, Any]:
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
                      lambda stop: _env_steps(stack.env_target, stop, rate),
                      lambda: env.get_info(timeout=30)),
                     ("policy", POLICY_ATTACKS, stack.policy_target,
                      lambda stop: _policy_turns(stack.policy_target, stop, rate),
                      lambda: policy.get_info(timeout=30))]
            for role, attacks, target, healthy, info in roles:
                for kind in attacks:
                    if only and kind not in only:
                        continue
                    base = await _window(healthy, info, seconds, None)
                    hit = await _window(healthy, info, seconds, [
                        sys.executable, "-m", "benchmarks.hostile", "attack", kind, target,
                        str(seconds), "0" if flood else str(PAUSE_S)])
                    rate = hit["rate_per_s"] if flood else hit["rate_during_per_s"] or 0
                    control = (hit["control_worst_ms"] if flood
                               else hit["control_worst_during_ms"] or 0)
                    ratio = rate / base["rate_per_s"] if base["rate_per_s"] else 0
                    results[f"{role}.{kind}"] = {
                        "baseline": base, "attacked": hit, "rate_ratio": round(ratio, 3),
                        "control_goal_met": control <= CONTROL_GOAL_MS,
                        "rate_goal_met": ratio >= RATE_GOAL}
    return results


def run(seconds: float, flood: bool = False, rate: float = HEALTHY_RATE,
        only: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``measure`` (of the attacks in ``only``; empty: all) with the load average before and
    after."""
    before = [round(x, 2) for x in os.getloadavg()]
    results = aio.run(measure(seconds, flood, rate, only))
    return {"seconds_per_window": seconds, "flood": flood, "pause_s": 0 if flood else PAUSE_S,
            "healthy_rate_per_s": rate or "unpaced",
            "load_average_before": before,
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "goals": {"control_worst_ms_at_most": CONTROL_GOAL_MS,
                      "healthy_rate_ratio_at_least": RATE_GOAL},
            "attacks": results}


RESULT = Path(__file__).resolve().parent / "results" / "hostile.json"
#: What each attack is, for the result table.
DESCRIBED = {"task_1mib": "Open naming a 1 MiB unknown task",
             "keys_20k": "Open with 20,000 option keys",
             "keys_1_5m": "Open with 1.5M option keys (33 MB)",
             "task_60mb": "Open naming a 60 MB task",
             "begin_16mib": "Begin of 16 MiB with a refused config",
             "begin_60mb": "Begin of 60 MB",
             "config_keys_10k": "Begin whose config has 10,000 keys"}


def recorded(paced: dict[str, Any], unpaced: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The result file of one sitting: each attack's worst control call and the healthy rate
    kept, paced (the goal's measure) and unpaced, in the ``benchmarks/tables.py`` format."""
    from benchmarks.common import result_file

    rows = []
    for key, hit in paced["attacks"].items():
        role, kind = key.split(".", 1)
        bare = unpaced["attacks"][key]
        rows.append([DESCRIBED[kind], f"{role} server",
                     f"{hit['attacked']['control_worst_during_ms'] or 0:.1f} ms",
                     f"{hit['rate_ratio']:.2f}", f"{bare['rate_ratio']:.2f}",
                     "yes" if hit["control_goal_met"] and hit["rate_goal_met"] else "no"])
    load = (f"{paced['load_average_before'][0]:.2f} before, "
            f"{unpaced['load_average_after'][0]:.2f} after")
    return result_file(
        "hostile", "Hostile requests beside a healthy session: the worst control call during "
        "a request, and the share of its step rate the healthy session kept",
        f"python -m benchmarks.hostile --seconds {seconds:g} --record", load,
        ["request", "server", "worst GetInfo during it",
         f"healthy rate kept, paced at {paced['healthy_rate_per_s']:g}/s",
         "healthy rate kept, unpaced", "goals met (paced)"], rows)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["attack"]:
        kind, target, seconds, pause = args[1], args[2], float(args[3]), float(args[4])
        print(json.dumps(aio.run(attack(kind, target, seconds, pause))))
        return 0
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hostile",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0,
                        help="length of each baseline and attacked window (default 5)")
    parser.add_argument("--healthy-rate", type=float, default=HEALTHY_RATE,
                        help="the healthy client's steps a second (default "
                        f"{HEALTHY_RATE:g}; 0: as fast as it can)")
    parser.add_argument("--flood", action="store_true",
                        help="the attacker sends back to back (no pause between requests)")
    parser.add_argument("--only", default="",
                        help="comma-separated attacks to run (default: all; not with --record): "
                        + ", ".join(ENV_ATTACKS + POLICY_ATTACKS))
    parser.add_argument("--record", action="store_true",
                        help="run paced and unpaced in one sitting and write the result file "
                        "benchmarks/results/hostile.json (docs/security.md's table)")
    parsed = parser.parse_args(args)
    only = frozenset(k for k in parsed.only.split(",") if k)
    unknown = sorted(only - set(ENV_ATTACKS + POLICY_ATTACKS))
    if unknown or (only and parsed.record):
        parser.error(f"--only: unknown attack {unknown[0]}" if unknown
                     else "--only and --record do not go together (a record has every attack)")
    if parsed.record:
        paced = run(parsed.seconds, False, parsed.healthy_rate or HEALTHY_RATE)
        unpaced = run(parsed.seconds, False, 0)
        result = recorded(paced, unpaced, parsed.seconds)
        RESULT.write_text(json.dumps(result, indent=2) + "\n")
        OUT.mkdir(exist_ok=True)
        (OUT / "hostile.json").write_text(json.dumps({"paced": paced, "unpaced": unpaced},
                                                     indent=2) + "\n")
        print(json.dumps(result, indent=2))
        return 0
    figures = run(parsed.seconds, parsed.flood, parsed.healthy_rate, only)
    OUT.mkdir(exist_ok=True)
    name = "hostile_flood.json" if parsed.flood else "hostile.json"
    (OUT / name).write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
