"""The cost of one gRPC message round trip between Moria processes, under Moria's gRPC core
settings (``moria.grpc_defaults``) and under gRPC's own defaults.

For each setting of ``GRPC_EXPERIMENTS`` (Moria's, then empty: gRPC's defaults) a BabyAI Env
server process starts with it, and a client process started with the same value opens
``streams`` sessions and sends ``pings`` ``ping`` requests on each, one at a time per stream
(the lockstep every Moria client uses); a ping is a real round trip through the Env server's
session handler with no game work. Reported per setting and stream count: wall microseconds per
round trip, and CPU microseconds per round trip of the client process and of the server process
(user + system, all threads).

With ``--pause-ms`` each stream waits that long between its round trips, as an episode's
stream waits on the model between steps: the processes then sleep between messages and every
message wakes one, which is the cadence of workload A (``--streams 40 --pause-ms 100``), not
that of back-to-back pings.

Both sides must start with the value: gRPC core reads it when ``grpc`` is first imported, which
is why the client is a child process.

Run: ``python -m benchmarks.grpc_roundtrip [--pings 2000] [--streams 1 16] [--pause-ms 0]``;
``--record`` measures the rows of ``benchmarks/results/grpc_roundtrip.json`` instead (both
settings at 1 and 16 streams back to back, then Moria's at 40 streams 100 ms apart) and writes
that file. Figures, never assertions: ratios from one run on one machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from moria import aio, grpc_defaults

TASK = "babyai:BabyAI-MixedTrainLocal-v0/goto"


def _cpu_s() -> float:
    times = os.times()
    return times.user + times.system


async def _client(target: str, streams: int, pings: int, pause_s: float = 0.0) -> None:
    """This process as the client: ``streams`` sessions opened, then (after printing
    ``opened`` and reading a line from stdin, so that the parent can read the server's CPU
    time) ``pings`` pings on each, all streams at once, each stream waiting ``pause_s``
    seconds after each of its pings; prints its wall and CPU seconds over the pings as one
    JSON line."""
    from moria.clients import EnvClient
    from moria.env.v1 import env_service_pb2 as env_pb

    client = EnvClient(target)
    sessions = [client.session() for _ in range(streams)]
    for index, session in enumerate(sessions):
        await session.open(env_pb.OpenRequest(task=TASK, seed=index + 1))
    print("opened", flush=True)
    await asyncio.to_thread(sys.stdin.readline)

    async def pinging(session: Any) -> None:
        for _ in range(pings):
            await session.ping()
            if pause_s:
                await asyncio.sleep(pause_s)

    start_cpu, start = _cpu_s(), time.perf_counter()
    await asyncio.gather(*(pinging(s) for s in sessions))
    wall, cpu = time.perf_counter() - start, _cpu_s() - start_cpu
    print(json.dumps({"wall_s": wall, "cpu_s": cpu}), flush=True)
    for session in sessions:
        await session.close()


async def _measure(experiments: str, streams: int, pings: int,
                   pause_ms: float = 0.0) -> dict[str, Any]:
    """One setting, one stream count, one pause: the server and client processes both started
    with ``GRPC_EXPERIMENTS=experiments``."""
    import psutil

    from benchmarks.env_load import env_server_process

    environ = {**os.environ, grpc_defaults.EXPERIMENTS_VAR: experiments}
    async with env_server_process(max(64, streams), environ) as (target, pid):
        server = psutil.Process(pid)
        with subprocess.Popen([sys.executable, "-m", "benchmarks.grpc_roundtrip", "--client",
                               target, "--streams", str(streams), "--pings", str(pings),
                               "--pause-ms", str(pause_ms)],
                              env=environ, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True) as child:
            assert child.stdin is not None and child.stdout is not None
            if child.stdout.readline().strip() != "opened":
                raise RuntimeError("the client process did not open its sessions")
            before = sum(server.cpu_times()[:2])
            child.stdin.write("go\n")
            child.stdin.flush()
            figures = child.stdout.readline()  # printed as soon as the pings are done
            server_cpu = sum(server.cpu_times()[:2]) - before
            child.wait(timeout=60)
        if child.returncode != 0 or not figures:
            raise RuntimeError(f"the client process failed (exit code {child.returncode})")
    client = json.loads(figures)
    trips = streams * pings
    return {"grpc_experiments": experiments or "(gRPC's defaults)", "streams": streams,
            "pause_ms": pause_ms, "round_trips": trips,
            "wall_us": round(1e6 * client["wall_s"] / trips, 1),
            "client_cpu_us": round(1e6 * client["cpu_s"] / trips, 1),
            "server_cpu_us": round(1e6 * server_cpu / trips, 1)}


def run(pings: int = 2000, streams: tuple[int, ...] = (1, 16),
        pause_ms: float = 0.0) -> list[dict[str, Any]]:
    """Every (setting, stream count) row, Moria's setting first, each stream pausing
    ``pause_ms`` between round trips; printed as JSON lines as they come. Raises RuntimeError
    when a client process fails."""
    rows = []
    for experiments in (grpc_defaults.default_experiments(), ""):
        for count in streams:
            row = aio.run(_measure(experiments, count, pings, pause_ms))
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


#: The paced row of ``--record``: workload A's cadence (50 episodes, one step per 100 ms
#: each; 40 streams, the most one client may hold on the benchmark's server).
PACED_STREAMS, PACED_PAUSE_MS, PACED_PINGS = 40, 100.0, 60


def record(pings: int = 2000) -> Path:
    """Measure the rows of ``benchmarks/results/grpc_roundtrip.json`` (both settings at 1 and
    16 streams back to back, then Moria's setting at ``PACED_STREAMS`` streams
    ``PACED_PAUSE_MS`` apart) and write that file; its path."""
    from benchmarks.common import load_span, result_file, write_result

    before = os.getloadavg()[0]
    rows = run(pings, (1, 16))
    paced = aio.run(_measure(grpc_defaults.default_experiments(), PACED_STREAMS, PACED_PINGS,
                             PACED_PAUSE_MS))
    print(json.dumps(paced), flush=True)
    rows.append(paced)
    load = load_span(before)
    table = [["Moria's" if r["grpc_experiments"] != "(gRPC's defaults)" else "gRPC's defaults",
              str(r["streams"]), "none" if not r["pause_ms"] else f"{r['pause_ms']:g} ms",
              f"{r['wall_us']:.1f}", f"{r['client_cpu_us']:.1f}", f"{r['server_cpu_us']:.1f}"]
             for r in rows]
    path = write_result(result_file(
        "grpc_roundtrip", "One Env server ping round trip", "python -m benchmarks.grpc_roundtrip "
        f"--record (pings {pings} per stream back to back, {PACED_PINGS} paced)", load,
        ["`GRPC_EXPERIMENTS`", "streams", "pause between a stream's round trips",
         "wall us per round trip", "client CPU us", "server CPU us"], table))
    print(f"wrote {path}")
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.grpc_roundtrip",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pings", type=int, default=2000, help="round trips per stream")
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--pause-ms", type=float, default=0.0,
                        help="each stream waits this long between its round trips")
    parser.add_argument("--record", action="store_true",
                        help="measure the result file's rows and write "
                             "benchmarks/results/grpc_roundtrip.json")
    parser.add_argument("--client", metavar="TARGET", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.client:  # the child: one stream count against a running server
        aio.run(_client(args.client, args.streams[0], args.pings, args.pause_ms / 1000))
        return 0
    if args.record:
        record(args.pings)
        return 0
    run(args.pings, tuple(args.streams), args.pause_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
