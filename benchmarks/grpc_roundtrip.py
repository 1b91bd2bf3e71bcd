"""The cost of one gRPC message round trip between Moria processes, under Moria's gRPC core
settings (``moria.grpc_defaults``) and under gRPC's own defaults.

For each setting of ``GRPC_EXPERIMENTS`` (Moria's, then empty: gRPC's defaults) a BabyAI Env
server process starts with it, and a client process started with the same value opens
``streams`` sessions and sends ``pings`` ``ping`` requests on each, one at a time per stream
(the lockstep every Moria client uses); a ping is a real round trip through the Env server's
session handler with no game work. Reported per setting and stream count: wall microseconds per
round trip, and CPU microseconds per round trip of the client process and of the server process
(user + system, all threads).

Both sides must start with the value: gRPC core reads it when ``grpc`` is first imported, which
is why the client is a child process.

Run: ``python -m benchmarks.grpc_roundtrip [--pings 2000] [--streams 1 16]``. Figures, never
assertions: ratios from one run on one machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from typing import Any

from moria import aio, grpc_defaults

TASK = "babyai:BabyAI-MixedTrainLocal-v0/goto"


def _cpu_s() -> float:
    times = os.times()
    return times.user + times.system


async def _client(target: str, streams: int, pings: int) -> None:
    """This process as the client: ``streams`` sessions opened, then (after printing
    ``opened`` and reading a line from stdin, so that the parent can read the server's CPU
    time) ``pings`` pings on each, all streams at once; prints its wall and CPU seconds over
    the pings as one JSON line."""
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

    start_cpu, start = _cpu_s(), time.perf_counter()
    await asyncio.gather(*(pinging(s) for s in sessions))
    wall, cpu = time.perf_counter() - start, _cpu_s() - start_cpu
    print(json.dumps({"wall_s": wall, "cpu_s": cpu}), flush=True)
    for session in sessions:
        await session.close()


async def _measure(experiments: str, streams: int, pings: int) -> dict[str, Any]:
    """One setting, one stream count: the server and client processes both started with
    ``GRPC_EXPERIMENTS=experiments``."""
    import psutil

    from benchmarks.env_load import env_server_process

    environ = {**os.environ, grpc_defaults.EXPERIMENTS_VAR: experiments}
    async with env_server_process(max(64, streams), environ) as (target, pid):
        server = psutil.Process(pid)
        with subprocess.Popen([sys.executable, "-m", "benchmarks.grpc_roundtrip", "--client",
                               target, "--streams", str(streams), "--pings", str(pings)],
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
            "round_trips": trips, "wall_us": round(1e6 * client["wall_s"] / trips, 1),
            "client_cpu_us": round(1e6 * client["cpu_s"] / trips, 1),
            "server_cpu_us": round(1e6 * server_cpu / trips, 1)}


def run(pings: int = 2000, streams: tuple[int, ...] = (1, 16)) -> list[dict[str, Any]]:
    """Every (setting, stream count) row, Moria's setting first; printed as JSON lines as
    they come. Raises RuntimeError when a client process fails."""
    rows = []
    for experiments in (grpc_defaults.default_experiments(), ""):
        for count in streams:
            row = aio.run(_measure(experiments, count, pings))
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.grpc_roundtrip",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pings", type=int, default=2000, help="round trips per stream")
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--client", metavar="TARGET", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.client:  # the child: one stream count against a running server
        aio.run(_client(args.client, args.streams[0], args.pings))
        return 0
    run(args.pings, tuple(args.streams))
    return 0


if __name__ == "__main__":
    sys.exit(main())
