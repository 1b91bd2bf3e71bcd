"""The cost of the ``GetInfo`` call the orchestrator sends to every replica before each episode.

The runner chooses each episode's Env server and Policy server by asking every replica for its
load (``orchestrator.core.replicas``), so each episode costs one ``GetInfo`` on each server
besides its steps. This starts the local stack (a BabyAI Env server and a Policy server, as
``moria eval`` does) and times ``calls`` ``GetInfo`` calls on each, one at a time: wall
milliseconds per call, and the server process's CPU milliseconds per call (user + system, all
threads).

Run: ``python -m benchmarks.server_info [--calls 200]``. Figures, never assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from moria import aio


async def measure(calls: int) -> dict[str, Any]:
    """Per server (``env_server``, ``policy_server``): wall and server CPU ms per GetInfo."""
    import psutil

    from moria.clients import EnvClient, PolicyClient
    from orchestrator.core.stack import LocalStack

    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as logs:
        async with LocalStack(["babyai"], Path(logs)) as stack:
            servers = (("env_server", EnvClient(stack.env_target), stack.children[0]),
                       ("policy_server", PolicyClient(stack.policy_target), stack.children[1]))
            for name, client, child in servers:
                await client.get_info(timeout=10.0)  # the channel, first-call imports
                process = psutil.Process(child.process.pid)
                cpu = sum(process.cpu_times()[:2])
                start = time.perf_counter()
                for _ in range(calls):
                    await client.get_info(timeout=10.0)
                wall = time.perf_counter() - start
                cpu = sum(process.cpu_times()[:2]) - cpu
                figures[name] = {"wall_ms_per_call": round(1000 * wall / calls, 3),
                                 "server_cpu_ms_per_call": round(1000 * cpu / calls, 3)}
    return figures


def run(calls: int = 200) -> dict[str, Any]:
    """``measure`` on a new event loop, with the load average before."""
    load = [round(x, 2) for x in os.getloadavg()]
    return {"calls": calls, "load_average_before": load, **aio.run(measure(calls))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.server_info",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args(argv)
    print(json.dumps(run(args.calls), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
