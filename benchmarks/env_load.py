"""Load on one BabyAI env server: many concurrent sessions, each stepping random actions.

One env server runs as a real process (``python -m env_server serve --families babyai
--capacity C`` on a unix socket); this process is the single ``grpc.aio`` client. Each of the
``sessions`` sessions is one ``Session`` stream: all are opened first (so the server really
holds them at once), then every session steps ``steps`` random actions concurrently (an episode
that ends is reset and goes on). Reported:

- ``steps_per_s``: total steps / wall time of the stepping phase;
- ``p50_step_ms`` / ``p99_step_ms``: latency of one Step round trip as this client sees it;
- ``peak_rss_mb``: the server process's peak resident memory (psutil, sampled every 50 ms
  through the run, worker children included), and ``rss_before_mb`` before any session;
- ``peak_active_sessions`` (from ``GetInfo``), ``errors`` (failed RPCs, by status code).

The same load with 1 session gives the ratio ``steps_per_s(N) / steps_per_s(1)``.

Run: ``python -m benchmarks.env_load [--sessions 500] [--steps 20]``; prints a table and
writes ``benchmarks/out/env_load.json``. Figures, never assertions: one run, one machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from moria import aio

OUT = Path(__file__).resolve().parent / "out"
TASK = "babyai:BabyAI-MixedTrainLocal-v0/goto"
ACTIONS = ("turn left", "turn right", "go forward", "pick up", "drop", "toggle")
#: How often the server's memory is sampled (seconds).
RSS_PERIOD_S = 0.05


@contextlib.asynccontextmanager
async def env_server_process(capacity: int, environ: Mapping[str, str] | None = None,
                             ) -> AsyncIterator[tuple[str, int]]:
    """A BabyAI env server process on a unix socket (``environ``: its environment, default
    this process's); yields ``(target, pid)`` once healthy.

    Raises RuntimeError when it does not become healthy within 60 s."""
    from moria.clients import check_health

    with tempfile.TemporaryDirectory() as tmp:
        target = f"unix://{tmp}/env.sock"
        log = open(Path(tmp) / "env.log", "wb")  # noqa: SIM115 (closed below)
        proc = subprocess.Popen(
            [sys.executable, "-m", "env_server", "serve", "--families", "babyai",
             "--capacity", str(capacity), "--address", target, "--log-level", "WARNING"],
            stdout=log, stderr=subprocess.STDOUT, env=None if environ is None else dict(environ))
        try:
            deadline = time.monotonic() + 60
            while not await check_health(target, timeout=1.0):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the env server did not start: "
                                       + (Path(tmp) / "env.log").read_text()[-2000:])
                await asyncio.sleep(0.1)
            yield target, proc.pid
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()


def _rss_bytes(pid: int) -> int:
    import psutil

    try:
        proc = psutil.Process(pid)
        total = proc.memory_info().rss
        for child in proc.children(recursive=True):
            with contextlib.suppress(psutil.Error):
                total += child.memory_info().rss
        return int(total)
    except psutil.Error:
        return 0


async def _sample_rss(pid: int, peak: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], _rss_bytes(pid))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), RSS_PERIOD_S)


class _Session:
    """One Session stream: open, then random steps (reset when the episode ends)."""

    def __init__(self, stub: Any, index: int):
        self.stub = stub
        self.index = index
        self.rng = random.Random(index)
        self.call: Any = None
        self.latencies: list[float] = []
        self.error: str | None = None

    async def open(self) -> None:
        from moria.env.v1 import env_service_pb2 as env_pb

        self.call = self.stub.Session()
        await self.call.write(env_pb.SessionRequest(open=env_pb.OpenRequest(
            task=TASK, seed=self.index)))
        await self.call.read()

    async def play(self, steps: int) -> None:
        from moria.common.v1 import types_pb2
        from moria.env.v1 import env_service_pb2 as env_pb

        for _ in range(steps):
            action = types_pb2.Action(text=self.rng.choice(ACTIONS))
            started = time.perf_counter()
            await self.call.write(env_pb.SessionRequest(step=env_pb.StepRequest(
                actions={"agent_0": action})))
            answer = await self.call.read()
            self.latencies.append(time.perf_counter() - started)
            if answer.step.HasField("episode_end"):
                await self.call.write(env_pb.SessionRequest(reset=env_pb.ResetRequest()))
                await self.call.read()
        await self.call.write(env_pb.SessionRequest(close=env_pb.CloseRequest()))
        await self.call.read()
        await self.call.done_writing()


async def _guarded(session: _Session, coro: Any) -> None:
    import grpc

    try:
        await coro
    except grpc.aio.AioRpcError as err:
        session.error = err.code().name
        if session.call is not None:
            session.call.cancel()


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run_load(sessions: int, steps: int, *, capacity: int | None = None,
                   ) -> dict[str, Any]:
    """Open ``sessions`` concurrent sessions on a fresh server process, step each ``steps``
    times; return the figures (see the module docstring; times in ms, memory in MiB).
    ``capacity`` defaults to ``sessions + 100``."""
    from moria.clients import channel_for, close_channels
    from moria.env.v1 import env_service_pb2 as env_pb
    from moria.env.v1 import env_service_pb2_grpc as env_grpc

    async with env_server_process(capacity or sessions + 100) as (target, pid):
        stub = env_grpc.EnvServiceStub(channel_for(target))
        rss_before = _rss_bytes(pid)
        peak = [rss_before]
        stop = asyncio.Event()
        sampler = asyncio.create_task(_sample_rss(pid, peak, stop))
        try:
            players = [_Session(stub, i) for i in range(sessions)]
            opened_at = time.perf_counter()
            await asyncio.gather(*(_guarded(p, p.open()) for p in players))
            open_s = time.perf_counter() - opened_at
            info = await stub.GetInfo(env_pb.GetInfoRequest())
            live = [p for p in players if p.error is None]
            started = time.perf_counter()
            await asyncio.gather(*(_guarded(p, p.play(steps)) for p in live))
            wall = time.perf_counter() - started
        finally:
            stop.set()
            await sampler
            await close_channels()
    latencies = [x for p in players for x in p.latencies]
    errors = Counter(p.error for p in players if p.error is not None)
    mib = 1024 * 1024
    p50, p99 = _percentile(latencies, 0.50), _percentile(latencies, 0.99)
    return {
        "sessions": sessions,
        "steps_per_session": steps,
        "total_steps": len(latencies),
        "wall_s": round(wall, 3),
        "steps_per_s": round(len(latencies) / wall, 1) if wall > 0 else None,
        "p50_step_ms": round(p50 * 1000, 2) if p50 is not None else None,
        "p99_step_ms": round(p99 * 1000, 2) if p99 is not None else None,
        "mean_step_ms": round(statistics.fmean(latencies) * 1000, 2) if latencies else None,
        "open_all_s": round(open_s, 3),
        "peak_active_sessions": int(info.active_sessions),
        "rss_before_mb": round(rss_before / mib, 1),
        "peak_rss_mb": round(peak[0] / mib, 1),
        "errors": sum(errors.values()),
        "errors_by_code": dict(errors),
    }


async def run(sessions: int = 500, steps: int = 20) -> dict[str, Any]:
    """The load with 1 session and with ``sessions`` sessions, and their throughput ratio."""
    single = await run_load(1, steps)
    many = await run_load(sessions, steps)
    ratio = (many["steps_per_s"] / single["steps_per_s"]
             if many["steps_per_s"] and single["steps_per_s"] else None)
    return {"task": TASK, "cpus": os.cpu_count(), "one_session": single,
            f"{sessions}_sessions": many,
            "steps_per_s_ratio": round(ratio, 3) if ratio is not None else None}


def print_table(figures: dict[str, Any]) -> None:
    """Print the figures as a table, one column per load."""
    loads = [(k, v) for k, v in figures.items() if isinstance(v, dict)]
    keys = ["sessions", "total_steps", "steps_per_s", "p50_step_ms", "p99_step_ms",
            "peak_active_sessions", "rss_before_mb", "peak_rss_mb", "errors"]
    print(f"{'':22}" + "".join(f"{name:>16}" for name, _ in loads))
    for key in keys:
        print(f"{key:22}" + "".join(f"{v.get(key)!s:>16}" for _, v in loads))
    print(f"{'steps_per_s_ratio':22}{figures['steps_per_s_ratio']!s:>16}")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the table and write ``benchmarks/out/env_load.json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--steps", type=int, default=20, help="steps per session")
    parser.add_argument("--out", type=Path, default=OUT / "env_load.json")
    args = parser.parse_args(argv)
    figures = aio.run(run(args.sessions, args.steps))
    print_table(figures)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(figures, indent=2) + "\n")
    return figures


if __name__ == "__main__":
    main()
