"""Agent-server throughput: acts/s of one Policy server at 1, 16 and 256 concurrent Play
streams, and its overhead per act in milliseconds.

The server runs as its own process (``python -m benchmarks.policy --serve ADDR``), exactly the
production servicer, except that the backend factory of ``client_name=local`` is replaced by
``InstantBackend``: a zero-latency model that answers the first action name at once without
any I/O. Every act therefore costs only what Moria adds: the gRPC round trip, the Observe/Act
conversion, the naive strategy's prompt building (history of 16) and action extraction.

``overhead_ms`` is the mean wall time of one Observe -> Act round trip with one stream (the
backend takes 0 s), i.e. Moria's cost per act on top of the model's own latency. Acts/s at 16
and 256 streams show how many concurrent episodes one server process (one event loop) serves.

Run: ``python -m benchmarks.policy [--acts N]``; prints a table and returns the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agent_server.backends.base import Backend, ChatMessage, Completion, GenerateParams, TokenUsage
from moria import aio

#: The concurrency levels the issue asks for.
STREAMS = (1, 16, 256)
OBSERVATION = (
    "a wall is 3 steps forward\na red ball is 1 step left and 2 steps forward\n"
    "a grey key is 4 steps right"
)
ACTIONS = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]


class InstantBackend(Backend):
    """A zero-latency model: answers the first listed choice (or "go forward") at once."""

    name = "instant"

    async def complete(self, messages: list[ChatMessage], params: GenerateParams) -> Completion:
        """The answer, with token counts of the prompt's words (no I/O, no sleep)."""
        words = sum(len(m.content.split()) for m in messages)
        text = params.choices[0] if params.choices else "go forward"
        return Completion(text=text, usage=TokenUsage(input_tokens=words, output_tokens=2),
                          stop_reason="stop")


def serve(address: str) -> None:
    """Run the production Policy server with ``InstantBackend`` as the ``local`` backend."""
    import agent_server.__main__ as agent_main
    from agent_server import backends

    backends.FACTORIES["local"] = lambda _client: InstantBackend()
    agent_main.main(["--address", address, "--capacity", "1024"])


async def _stream(target: str, acts: int, seed: int) -> list[float]:
    from moria.clients import PolicyClient
    from moria.common.v1 import types_pb2
    from moria.config import AgentConfig, ClientConfig
    from moria.policy.v1 import policy_service_pb2 as pol_pb
    from moria.policy_config import agent_settings, client_settings

    agent = agent_settings(AgentConfig(type="naive"))
    client = client_settings(ClientConfig(client_name="local"))
    space = types_pb2.ActionSpace(actions=[types_pb2.NamedAction(name=a) for a in ACTIONS],
                                  default_action="go forward")
    stream = PolicyClient(target).play()
    await stream.begin(pol_pb.Begin(
        episode_id=f"bench/{seed}", agent_id="agent_0", instruction="Reach the goal.",
        action_space=space, agent=agent, client=client, seed=seed,
        env_name="babyai", task="bench"))
    times = []
    for step in range(acts):
        observe = pol_pb.Observe(step=step, observation=types_pb2.Observation(
            text={"long_term_context": OBSERVATION, "short_term_context": ""}))
        start = time.perf_counter()
        act = await stream.observe(observe)
        times.append(time.perf_counter() - start)
        if act.error.code:
            raise RuntimeError(act.error.message)
    await stream.end(types_pb2.EpisodeEnd())
    return times


async def _measure(target: str, streams: int, acts_per_stream: int) -> dict[str, float]:
    start = time.perf_counter()
    results = await asyncio.gather(*(_stream(target, acts_per_stream, i) for i in range(streams)))
    wall = time.perf_counter() - start
    latencies = sorted(t for r in results for t in r)
    total = len(latencies)
    return {
        "streams": streams,
        "acts": total,
        "acts_per_s": total / wall,
        "mean_latency_ms": 1000 * sum(latencies) / total,
        "p95_latency_ms": 1000 * latencies[int(0.95 * (total - 1))],
    }


async def run(acts: int = 4096) -> dict[str, Any]:
    """Start the server process, measure each concurrency level, stop it; return figures."""
    from moria.clients import PolicyClient, close_channels

    with tempfile.TemporaryDirectory() as tmp:
        address = f"unix://{tmp}/policy.sock"
        proc = subprocess.Popen([sys.executable, "-m", "benchmarks.policy", "--serve", address],
                                cwd=Path(__file__).resolve().parent.parent,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            for _ in range(200):
                try:
                    await asyncio.wait_for(PolicyClient(address).get_info(), 1.0)
                    break
                except Exception:  # noqa: BLE001 - not up yet
                    await asyncio.sleep(0.1)
            await _stream(address, 50, 0)  # warm up
            rows = []
            for streams in STREAMS:
                per_stream = max(16, acts // streams)
                rows.append(await _measure(address, streams, per_stream))
        finally:
            await close_channels()
            proc.terminate()
            proc.wait(timeout=15)
    return {"rows": rows, "overhead_ms": rows[0]["mean_latency_ms"]}


def main(argv: list[str] | None = None) -> None:
    """CLI: ``--serve ADDR`` runs the server; otherwise measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", metavar="ADDR", help=argparse.SUPPRESS)
    parser.add_argument("--acts", type=int, default=4096,
                        help="acts per concurrency level (at least 16 per stream)")
    args = parser.parse_args(argv)
    if args.serve:
        serve(args.serve)
        return
    figures = aio.run(run(args.acts))
    print(f"{'streams':>8} {'acts':>7} {'acts/s':>9} {'mean ms':>9} {'p95 ms':>8}")
    for row in figures["rows"]:
        print(f"{row['streams']:>8} {row['acts']:>7} {row['acts_per_s']:>9.0f} "
              f"{row['mean_latency_ms']:>9.2f} {row['p95_latency_ms']:>8.2f}")
    print(f"overhead per act (1 stream, zero-latency model): {figures['overhead_ms']:.2f} ms")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
