"""The cost cap and the shared rate limits against a server that bills and throttles by its own
count (``tests.support.metered_openai``), over two Policy servers on loopback, one sitting:

- **cap**: a BabyAI run (4 episodes x 6 steps, ``max_tokens`` 16) priced at $1,000 per million
  tokens under ``eval.max_cost_usd``; the server's billed dollars beside the ledger's spent and
  reserved, the calls granted and refused, the episodes cut;
- **rate**: ``--rate-episodes`` BabyAI episodes of ``--rate-steps`` steps against a server
  limited to ``TOKENS_PER_MINUTE``, run without a client limit and with
  ``client.max_tokens_per_minute`` at the server's limit, over each number of Policy servers in
  ``--replicas``: 429s answered, wall seconds and the ratio with/without.

Run: ``python -m benchmarks.budget_limits [--cap 5] [--rate-episodes 4] [--rate-steps 4]
[--replicas 2]``; writes ``benchmarks/out/budget_limits.json`` with the load average before and
after. Figures, never assertions.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from moria import aio

OUT = Path(__file__).resolve().parent / "out"
PRICE = 1000.0
TOKENS_PER_MINUTE = 4800
COMMON = ("envs.names=babyai", "eval.num_episodes.babyai=1", "client.client_name=openai",
          "client.model_id=fake-model", "client.delay=0.01",
          "client.generate_kwargs.max_tokens=16")


async def _run(out: Path, base_url: str, *overrides: str, episodes: int = 4,
               replicas: int = 2) -> tuple[dict[str, Any], float]:
    from orchestrator.core.runner import run_evaluation
    from orchestrator.plan.spec import load_spec
    from tests.support.servers import env_server, policy_server

    async with contextlib.AsyncExitStack() as stack:
        env = await stack.enter_async_context(env_server())
        policies = [await stack.enter_async_context(policy_server()) for _ in range(replicas)]
        spec = load_spec(None, [
            *COMMON, f"eval.num_samples={episodes}", f"eval.num_workers={episodes}",
            f"eval.output_dir={out}", f"client.base_url={base_url}",
            f"endpoints.env.babyai=[{env.target}]",
            f"endpoints.policy=[{','.join(p.target for p in policies)}]", *overrides])
        started = time.perf_counter()
        outcome = await run_evaluation(spec, console=Console(quiet=True), show_progress=False)
        return outcome.summary, time.perf_counter() - started


async def measure(cap: float, rate_episodes: int = 4, rate_steps: int = 4,
                  replicas: tuple[int, ...] = (2,)) -> dict[str, Any]:
    """Both scenarios (module docstring)."""
    from tests.support.metered_openai import MeteredOpenAI

    os.environ.setdefault("OPENAI_API_KEY", "sk-benchmark-not-a-real-key")
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        prices = root / "prices.yaml"
        prices.write_text(yaml.safe_dump({"as_of": "benchmark", "currency": "USD", "models": {
            "openai/fake-model": {"input": PRICE, "output": PRICE}}}))
        with MeteredOpenAI("go forward") as fake:
            summary, wall = await _run(root / "cap", fake.base_url, f"eval.max_cost_usd={cap}",
                                       f"eval.prices={prices}", "eval.max_steps_per_episode=6")
            billed = fake.billed()
        figures["cap"] = {
            "max_cost_usd": cap,
            "server_billed_usd": round((billed["input_tokens"] + billed["output_tokens"])
                                       * PRICE / 1e6, 6),
            "server_calls": billed["calls"], "ledger": summary.get("budget"),
            "episodes_cut": summary["end_reasons"]["budget_exhausted"],
            "episodes_scored": summary["episodes_played"], "wall_s": round(wall, 2)}
        figures["rate"] = {"server_tokens_per_minute": TOKENS_PER_MINUTE,
                           "episodes": rate_episodes, "steps_per_episode": rate_steps}
        for count in replicas:
            rate: dict[str, Any] = {}
            for name, extra in (("without_limit", ()), ("with_limit", (
                    f"client.max_tokens_per_minute={TOKENS_PER_MINUTE}",))):
                with MeteredOpenAI("go forward", tokens_per_minute=TOKENS_PER_MINUTE) as fake:
                    summary, wall = await _run(
                        root / f"{name}-{count}", fake.base_url, "client.max_retries=50",
                        f"eval.max_steps_per_episode={rate_steps}", *extra,
                        episodes=rate_episodes, replicas=count)
                    rate[name] = {"http_429": fake.throttled, "calls": fake.billed()["calls"],
                                  "wall_s": round(wall, 2),
                                  "episodes_scored": summary["episodes_played"]}
            rate["wall_ratio_with_over_without"] = round(
                rate["with_limit"]["wall_s"] / rate["without_limit"]["wall_s"], 3)
            figures["rate"][f"policy_servers_{count}"] = rate
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.budget_limits",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cap", type=float, default=5.0, help="eval.max_cost_usd (default 5)")
    parser.add_argument("--rate-episodes", type=int, default=4,
                        help="episodes of the rate-limit workload (default 4)")
    parser.add_argument("--rate-steps", type=int, default=4,
                        help="steps per episode of the rate-limit workload (default 4)")
    parser.add_argument("--replicas", type=int, nargs="+", default=[2],
                        help="numbers of Policy servers to measure the rate limits over "
                             "(default 2)")
    args = parser.parse_args(argv)
    before = [round(x, 2) for x in os.getloadavg()]
    figures = aio.run(measure(args.cap, args.rate_episodes, args.rate_steps,
                              tuple(args.replicas)))
    result = {"load_average_before": before,
              "load_average_after": [round(x, 2) for x in os.getloadavg()], **figures}
    OUT.mkdir(exist_ok=True)
    (OUT / "budget_limits.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
