"""P2: many BabyAI episodes at once against chat-completions servers that answer after a fixed
latency, through the local stack as ``moria eval`` sizes it (``eval.local_servers=auto``:
``orchestrator.plan.spec.local_server_counts``), reported as wall / ideal.

The ideal is the longest episode's steps times the latency: what the run would take if nothing
but the model's answers took time. Each policy server of the stack calls its own fake
OpenAI-compatible server (``tests.support.fake_openai``, a process of its own), and
``client.max_concurrency`` is the episode count, so neither a fake server nor the backend's
cap on calls in flight is what is measured. The episodes are spread over the env servers and
the policy servers round robin; this process plays the orchestrator (``run_episode``).

``run(episodes, latency_s)`` is the figure ``make bench`` judges P2 by (64 episodes, 100 ms).
``python -m benchmarks.concurrent_episodes --episodes 64 256 1024 --record`` measures each
count once, in that order, and writes ``benchmarks/results/concurrent_episodes.json``; the
counts the issue asks for on a 16-core machine. Figures, never assertions.
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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks.common import announced_url, load_span, result_file, write_result
from moria import aio

TASK = "BabyAI-MixedTrainLocal-v0/goto"
#: What every fake server answers (a valid BabyAI action, so episodes run to their step limit
#: or their goal as the game decides).
REPLY = "turn left"


@contextlib.contextmanager
def fake_servers(count: int, latency_s: float) -> Iterator[list[str]]:
    """``count`` fake OpenAI-compatible server processes answering ``REPLY`` after
    ``latency_s`` seconds; their base URLs. Stopped on exit."""
    processes: list[subprocess.Popen[str]] = []
    try:
        for _ in range(count):
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "tests.support.fake_openai", "--port", "0",
                 "--latency", str(latency_s), "--reply", REPLY],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
        yield [announced_url(p) for p in processes]
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=10)


async def run(episodes: int, latency_s: float) -> dict[str, Any]:
    """``episodes`` concurrent episodes against ``latency_s``-second model servers through a
    local stack of ``local_server_counts`` servers: episodes, latency, cores counted, servers
    of each kind, model calls, longest episode's steps, wall and ideal seconds and their
    ratio."""
    from moria.cores import available_cores
    from orchestrator.core.episode import EpisodePlan, run_episode
    from orchestrator.core.episode_config import episode_config
    from orchestrator.core.stack import LocalStack
    from orchestrator.plan.spec import load_spec, local_server_counts

    def spec_for(base_url: str) -> Any:
        return load_spec(None, ["client.client_name=vllm", f"client.base_url={base_url}",
                                "client.model_id=fake", "client.max_retries=0",
                                f"client.max_concurrency={episodes}",
                                f"eval.num_workers={episodes}"])

    env_servers, policy_servers = local_server_counts(spec_for("http://127.0.0.1:1/v1"))
    with fake_servers(policy_servers, latency_s) as urls, \
            tempfile.TemporaryDirectory() as logs:
        specs = [spec_for(url) for url in urls]
        async with LocalStack(["babyai"], Path(logs), env_capacity=2 * episodes,
                              env_servers=env_servers, policy_servers=policy_servers) as stack:
            plans = [EpisodePlan(run_id="bench", env="babyai", task=TASK, episode_index=i,
                                 seed=i, env_target=stack.env_targets[i % env_servers],
                                 policy_target=stack.policy_targets[i % policy_servers])
                     for i in range(episodes)]
            configs = [episode_config(specs[i % policy_servers], p.env, p.task, p.seed)
                       for i, p in enumerate(plans)]
            slots = asyncio.Semaphore(episodes)
            start = time.perf_counter()
            outcomes = await asyncio.gather(*(run_episode(p, c, model_slots=slots)
                                              for p, c in zip(plans, configs, strict=True)),
                                            return_exceptions=True)
            wall = time.perf_counter() - start
    failed = [_failure(o) for o in outcomes
              if isinstance(o, BaseException) or o.end_reason not in ("terminated", "truncated")]
    if failed:
        raise RuntimeError(f"{len(failed)} of {episodes} episodes failed (the first: "
                           f"{failed[0]}): the figure would not be the stack's")
    records = [o for o in outcomes if not isinstance(o, BaseException)]
    calls = sum(r.num_steps for r in records)
    longest = max(r.num_steps for r in records)
    ideal = longest * latency_s
    return {"episodes": episodes, "latency_s": latency_s, "cores": available_cores(),
            "env_servers": env_servers, "policy_servers": policy_servers,
            "model_calls": calls, "longest_episode_steps": longest, "wall_s": round(wall, 3),
            "ideal_s": round(ideal, 3), "wall_over_ideal": round(wall / ideal, 3)}


def _failure(outcome: Any) -> str:
    """What went wrong with one episode: an exception (its type, the server it names when an
    ``InfrastructureFault``, its message) or a record's end reason and error."""
    if isinstance(outcome, BaseException):
        server = getattr(outcome, "server", "")
        where = f" from the {server} server" if server else ""
        return f"{type(outcome).__name__}{where}: {outcome}"
    return f"{outcome.end_reason}: {outcome.error}"


def record(counts: list[int], latency_s: float) -> Path:
    """Measure each of ``counts`` once, in order, and write
    ``benchmarks/results/concurrent_episodes.json``; its path."""
    before = os.getloadavg()[0]
    figures = [aio.run(run(n, latency_s)) for n in counts]
    rows = [[f"{f['episodes']:,}", f"{f['env_servers']} and {f['policy_servers']}",
             f"{f['model_calls']:,}", f"{f['wall_s']:.2f}", f"{f['ideal_s']:.2f}",
             f"{f['wall_over_ideal']:.2f}"] for f in figures]
    counted = ", ".join(str(n) for n in counts)
    return write_result(result_file(
        "concurrent_episodes",
        f"P2: concurrent BabyAI episodes against {latency_s * 1000:g} ms model servers, "
        f"eval.local_servers=auto on {figures[0]['cores']} core(s)",
        f"python -m benchmarks.concurrent_episodes --episodes {' '.join(map(str, counts))} "
        f"--latency {latency_s:g} --record (each count once: {counted})", load_span(before),
        ["episodes at once", "env servers and policy servers", "model calls", "wall s",
         "ideal s (longest episode x latency)", "wall / ideal"], rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.concurrent_episodes",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--episodes", type=int, nargs="+", default=[64],
                        help="episode counts, each measured once (default: 64)")
    parser.add_argument("--latency", type=float, default=0.1,
                        help="seconds each model answer takes (default: 0.1)")
    parser.add_argument("--record", action="store_true",
                        help="write benchmarks/results/concurrent_episodes.json")
    args = parser.parse_args(argv)
    if any(n < 1 for n in args.episodes):
        parser.error(f"--episodes must all be >= 1, got {args.episodes}")
    if not args.latency > 0:
        parser.error(f"--latency must be > 0, got {args.latency}")
    if args.record:
        print(f"wrote {record(args.episodes, args.latency)}")
    else:
        for n in args.episodes:
            print(json.dumps(aio.run(run(n, args.latency))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
