"""The CPU one chat-completions call costs the Policy server's process, layer by layer.

A fake OpenAI-compatible server (``tests.support.fake_openai``, its own process) answers at
once, so each call's cost is only the client's work. This process makes ``calls`` calls,
``in_flight`` at a time, of a workload-A-sized chat (an instruction of about 3 KB, then 16 past
steps: 34 messages), through these layers, alternating them ``rounds`` times:

- ``aiohttp``: one ``aiohttp`` POST of the JSON body and the decoding of the JSON reply; the
  least a Python HTTP/JSON client does, for reference only;
- ``openai_sdk``: the official SDK's ``AsyncOpenAI.post`` with its aiohttp transport, as
  Moria's OpenAI-compatible backend sends each request with ``client.http_client=sdk``;
- ``moria_backend``: ``OpenAICompatBackend.complete`` with ``http_client=sdk``, the whole
  backend: the request body built from chat messages, the SDK call, the retry policy
  (tenacity) and the reply parsed;
- ``moria_backend_lean`` (``lean=True``; the CLI's default): the same backend with
  ``http_client=lean`` (``auto`` for vllm and llamacpp servers): the same body, retry policy and
  parsing, sent by ``agent_server/backends/lean_http.py`` over one aiohttp session.

Reported per layer: CPU microseconds per call of this process (user + system, all threads;
the median over the rounds, with the lowest and highest) and wall microseconds per call; and
the differences between layers: with ``lean``, the whole backend's CPU per call through the
SDK and through the lean client in milliseconds, their difference and ratio
(``transports``). The event loop is Moria's (``moria.aio``: uvloop).

Run: ``python -m benchmarks.model_client [--calls 2000] [--in-flight 16] [--rounds 3]
[--no-lean] [--write]``; ``--write`` also saves the backend comparison as
``benchmarks/results/model_client_transports.json`` (a table: ``benchmarks.tables``).
Figures, never assertions: one run on one machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from moria import aio

#: A workload-A-sized chat: BabyAI's instruction is about 3 KB, a step's text about 240 bytes.
INSTRUCTION = "You are playing BabyAI. " * 125
STEP_TEXT = "a wall 2 steps forward\na red key 1 step left and 2 steps forward\n" * 4
PAST_STEPS = 16
ANSWER = "toggle"


def chat_messages() -> list[dict[str, str]]:
    """The chat of every call, as chat-completions messages (system, then user/assistant)."""
    messages = [{"role": "system", "content": INSTRUCTION}]
    for step in range(PAST_STEPS):
        messages.append({"role": "user", "content": f"Observation (step {step}):\n{STEP_TEXT}"})
        messages.append({"role": "assistant", "content": ANSWER})
    messages.append({"role": "user", "content": f"Observation (step {PAST_STEPS}):\n{STEP_TEXT}"})
    return messages


def _cpu_s() -> float:
    times = os.times()
    return times.user + times.system


async def _time_calls(call: Callable[[], Awaitable[Any]], calls: int,
                      in_flight: int) -> tuple[float, float]:
    """(CPU us, wall us) per call of ``calls`` calls, ``in_flight`` at a time."""
    slots = asyncio.Semaphore(in_flight)

    async def one() -> None:
        async with slots:
            await call()

    start_cpu, start = _cpu_s(), time.perf_counter()
    await asyncio.gather(*(one() for _ in range(calls)))
    return (1e6 * (_cpu_s() - start_cpu) / calls, 1e6 * (time.perf_counter() - start) / calls)


Call = Callable[[], Awaitable[Any]]


async def _layers(base_url: str, lean: bool = False) -> tuple[dict[str, Call], list[Call]]:
    """The layers' calls (see the module docstring; ``moria_backend_lean`` only with ``lean``),
    each against ``base_url`` (an OpenAI base URL, ``http://127.0.0.1:<port>/v1``), and the
    closers of the clients they use."""
    import aiohttp
    from openai import AsyncOpenAI, DefaultAioHttpClient

    from agent_server.backends.base import ChatMessage, GenerateParams
    from agent_server.backends.openai_compat import OpenAICompatBackend
    from moria.config import ClientConfig

    messages = chat_messages()
    body = {"model": "fake", "messages": messages, "max_tokens": 64}
    session = aiohttp.ClientSession()
    sdk = AsyncOpenAI(api_key="EMPTY", base_url=base_url, max_retries=0,
                      http_client=DefaultAioHttpClient())
    backend = OpenAICompatBackend(
        ClientConfig(client_name="vllm", model_id="fake", base_url=base_url, http_client="sdk"),
        api_key="EMPTY", base_url=base_url)
    lean_backend = OpenAICompatBackend(
        ClientConfig(client_name="vllm", model_id="fake", base_url=base_url, http_client="lean"),
        api_key="EMPTY", base_url=base_url)
    chat = [ChatMessage(role=m["role"], content=m["content"]) for m in messages]  # type: ignore[arg-type]
    params = GenerateParams(temperature=None, max_tokens=64)

    async def direct() -> Any:
        async with session.post(f"{base_url}/chat/completions", json=body,
                                headers={"Authorization": "Bearer EMPTY"}) as reply:
            reply.raise_for_status()
            return await reply.json()

    async def through_sdk() -> Any:
        return await sdk.post("/chat/completions", body=body, cast_to=object)

    async def through_backend() -> Any:
        return await backend.complete(chat, params)

    async def through_lean_backend() -> Any:
        return await lean_backend.complete(chat, params)

    layers: dict[str, Call] = {"aiohttp": direct, "openai_sdk": through_sdk,
                               "moria_backend": through_backend}
    if lean:
        layers["moria_backend_lean"] = through_lean_backend
    return layers, [session.close, sdk.close, backend.aclose, lean_backend.aclose]


async def measure(base_url: str, calls: int, in_flight: int, rounds: int,
                  lean: bool = False) -> dict[str, Any]:
    """Every layer ``rounds`` times, alternated; figures per layer and the differences (with
    ``lean``, also the backend through each HTTP client: ``transports``)."""
    layers, closers = await _layers(base_url, lean)
    cpu: dict[str, list[float]] = {name: [] for name in layers}
    wall: dict[str, list[float]] = {name: [] for name in layers}
    try:
        for call in layers.values():  # warm up: connections, first-call imports
            for _ in range(50):
                await call()
        for _ in range(rounds):
            for name, call in layers.items():
                cpu_us, wall_us = await _time_calls(call, calls, in_flight)
                cpu[name].append(cpu_us)
                wall[name].append(wall_us)
    finally:
        for close in closers:
            await close()
    figures: dict[str, Any] = {
        name: {"cpu_us_per_call": round(statistics.median(cpu[name]), 1),
               "cpu_us_low_high": [round(min(cpu[name]), 1), round(max(cpu[name]), 1)],
               "wall_us_per_call": round(statistics.median(wall[name]), 1)}
        for name in layers}
    median = {name: figures[name]["cpu_us_per_call"] for name in layers}
    figures["sdk_over_aiohttp_cpu_us"] = round(median["openai_sdk"] - median["aiohttp"], 1)
    figures["backend_over_sdk_cpu_us"] = round(median["moria_backend"] - median["openai_sdk"], 1)
    if lean:
        sdk_ms, lean_ms = median["moria_backend"] / 1000, median["moria_backend_lean"] / 1000
        figures["transports"] = {
            "sdk_cpu_ms_per_call": round(sdk_ms, 3),
            "lean_cpu_ms_per_call": round(lean_ms, 3),
            "sdk_minus_lean_cpu_ms": round(sdk_ms - lean_ms, 3),
            "sdk_over_lean_ratio": round(sdk_ms / lean_ms, 2) if lean_ms > 0 else None,
            "sdk_cpu_ms_low_high": [round(x / 1000, 3) for x in
                                    figures["moria_backend"]["cpu_us_low_high"]],
            "lean_cpu_ms_low_high": [round(x / 1000, 3) for x in
                                     figures["moria_backend_lean"]["cpu_us_low_high"]],
        }
    return figures


def run(calls: int = 2000, in_flight: int = 16, rounds: int = 3,
        lean: bool = True) -> dict[str, Any]:
    """Start the fake server, measure (``lean``: the lean backend too), stop it; the figures
    with the load average before and after. Raises RuntimeError when the fake server does not
    start."""
    from benchmarks.common import announced_url

    load = [round(x, 2) for x in os.getloadavg()]
    fake = subprocess.Popen([sys.executable, "-m", "tests.support.fake_openai", "--port", "0",
                             "--latency", "0", "--reply", ANSWER],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        base_url = announced_url(fake)
        figures = aio.run(measure(base_url, calls, in_flight, rounds, lean))
    finally:
        fake.terminate()
        fake.wait(timeout=10)
    return {"calls": calls, "in_flight": in_flight, "rounds": rounds,
            "messages": len(chat_messages()), "load_average_before": load,
            "load_average_after": [round(x, 2) for x in os.getloadavg()], **figures}


#: The result file of the backend's two HTTP clients (``--write``), a ``benchmarks.tables`` table.
TRANSPORTS_RESULT = Path(__file__).resolve().parent / "results" / "model_client_transports.json"


def transports_result(figures: dict[str, Any], commit: str | None = None) -> dict[str, Any]:
    """The result file of ``run``'s figures (with the lean layer): one row per HTTP client,
    CPU ms per call (median, lowest-highest over the rounds) and the ratio to lean."""
    t = figures["transports"]
    ratio = t["sdk_over_lean_ratio"]

    def span(low_high: list[float]) -> str:
        return f"{low_high[0]:.3f}-{low_high[1]:.3f}"

    before = ", ".join(f"{x:g}" for x in figures["load_average_before"])
    after = ", ".join(f"{x:g}" for x in figures["load_average_after"])
    return {
        "name": "model_client_transports",
        "title": "The OpenAI-compatible backend's CPU per call, through each HTTP client",
        "command": (f"python -m benchmarks.model_client --calls {figures['calls']} --in-flight "
                    f"{figures['in_flight']} --rounds {figures['rounds']} --write"),
        "commit": commit,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "machine": f"{os.cpu_count()}-core machine",
        "load": f"1/5/15-min load average {before} before, {after} after",
        "columns": ["client.http_client", "CPU ms per call (median)", "lowest-highest",
                    "ratio to lean"],
        "rows": [
            ["sdk (the openai SDK, aiohttp transport)", f"{t['sdk_cpu_ms_per_call']:.3f}",
             span(t["sdk_cpu_ms_low_high"]), f"{ratio:.2f}" if ratio else "n/a"],
            ["lean (lean_http.py, one aiohttp session)", f"{t['lean_cpu_ms_per_call']:.3f}",
             span(t["lean_cpu_ms_low_high"]), "1.00"],
            ["sdk minus lean", f"{t['sdk_minus_lean_cpu_ms']:.3f}", "", ""],
        ],
        "figures": figures,
    }


def _commit() -> str | None:
    try:
        done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True, cwd=Path(__file__).resolve().parents[1])
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.strip() or None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.model_client",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--in-flight", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-lean", action="store_true",
                        help="leave out the backend through the lean HTTP client")
    parser.add_argument("--write", action="store_true",
                        help=f"save the HTTP clients' comparison as {TRANSPORTS_RESULT.name}")
    args = parser.parse_args(argv)
    figures = run(args.calls, args.in_flight, args.rounds, lean=not args.no_lean)
    print(json.dumps(figures, indent=2))
    if args.write and "transports" in figures:
        TRANSPORTS_RESULT.write_text(json.dumps(transports_result(figures, _commit()), indent=2)
                                     + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
