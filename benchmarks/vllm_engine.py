"""Throughput of vLLM's in-process engine behind Moria's batcher (needs vllm and a CUDA GPU).

    python -m benchmarks.vllm_engine [--model Qwen/Qwen2.5-0.5B-Instruct] [--requests 128]
                                     [--max-tokens 32] [--concurrency 1 16 64]

For each concurrency level, that many "episodes" each send completions one after another until
``--requests`` completions are done in all; the table gives completions/s, output tokens/s, the
mean batch size the engine saw, and the mean latency per call. The model must be in the local
Hugging Face cache (or be a local folder): GPU machines may have no internet. Engine options come
from the ``MORIA_VLLM_*`` variables (see ``agent_server/backends/vllm_engine.py``).

Exits with status 2 and a message when vllm or a GPU is missing. Figures vary with the GPU and
load; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from dataclasses import dataclass

from moria import aio

DEFAULT_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
OBJECTS = ["red ball", "blue key", "green box", "yellow door", "purple ball", "grey key"]


@dataclass
class Row:
    """One concurrency level's figures."""

    concurrency: int
    completions: int
    seconds: float
    output_tokens: int
    batches: int
    mean_latency_s: float

    @property
    def per_s(self) -> float:
        return self.completions / self.seconds

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.seconds

    @property
    def mean_batch(self) -> float:
        return self.completions / self.batches if self.batches else 0.0


async def measure(backend: object, concurrency: int, total: int, max_tokens: int) -> Row:
    """Run ``total`` completions from ``concurrency`` concurrent callers."""
    from agent_server.backends.base import ChatMessage, GenerateParams
    from agent_server.backends.vllm_engine import VLLMEngineBackend

    assert isinstance(backend, VLLMEngineBackend)
    counter = iter(range(total))
    tokens = 0
    latencies: list[float] = []

    async def episode() -> None:
        nonlocal tokens
        for i in counter:
            thing = OBJECTS[i % len(OBJECTS)]
            messages = [
                ChatMessage("system", "You play BabyAI. Think briefly, then name one action."),
                ChatMessage("user", f"Turn {i}: the {thing} is {i % 7 + 1} steps ahead."),
            ]
            out = await backend.complete(
                messages,
                GenerateParams(temperature=0.7, max_tokens=max_tokens, extra={"seed": i}),
            )
            tokens += out.usage.output_tokens
            latencies.append(out.latency_s)

    batches_before = backend.stats.batches
    start = time.perf_counter()
    await asyncio.gather(*(episode() for _ in range(concurrency)))
    seconds = time.perf_counter() - start
    return Row(concurrency, total, seconds, tokens, backend.stats.batches - batches_before,
               sum(latencies) / len(latencies))


async def run(model: str, concurrencies: list[int], total: int, max_tokens: int) -> list[Row]:
    from agent_server.backends import create_backend
    from agent_server.backends.vllm_engine import VLLMEngineBackend
    from moria.config import ClientConfig

    backend = create_backend(ClientConfig(client_name="vllm", model_id=model))
    assert isinstance(backend, VLLMEngineBackend)
    start = time.perf_counter()
    await backend.load()
    print(f"engine for {model} ready in {time.perf_counter() - start:.1f}s", flush=True)
    await measure(backend, 8, 16, max_tokens)  # warm-up (CUDA graphs, caches)
    rows = []
    for concurrency in concurrencies:
        rows.append(await measure(backend, concurrency, max(total, concurrency), max_tokens))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=os.environ.get("MORIA_VLLM_TEST_MODEL",
                                                          DEFAULT_MODEL))
    parser.add_argument("--requests", type=int, default=128,
                        help="completions per concurrency level (at least the concurrency)")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    args = parser.parse_args(argv)

    from agent_server.backends.vllm_engine import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        print(f"benchmarks.vllm_engine: no GPU here ({reason}); nothing measured. Run it on a "
              "machine with a CUDA GPU and `pip install vllm`.", file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    rows = aio.run(run(args.model, args.concurrency, args.requests, args.max_tokens))
    print(f"\n{'concurrent':>10} {'calls':>6} {'calls/s':>8} {'out tok/s':>10} "
          f"{'mean batch':>10} {'latency ms':>10}")
    for r in rows:
        print(f"{r.concurrency:>10} {r.completions:>6} {r.per_s:>8.1f} {r.tokens_per_s:>10.0f} "
              f"{r.mean_batch:>10.1f} {r.mean_latency_s * 1000:>10.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
