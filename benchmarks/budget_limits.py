"""The cost cap and the shared rate limits against a server that bills and throttles by its own
count (``tests.support.metered_openai``), over two Policy servers on loopback, one sitting:

- **cap**: a BabyAI run (4 episodes x 6 steps, ``max_tokens`` 16) priced at $1,000 per million
  tokens under ``eval.max_cost_usd``; the server's billed dollars beside the ledger's spent and
  reserved, the calls granted and refused, the episodes cut;
- **rate**: 4 episodes x 4 steps against a server limited to ``TOKENS_PER_MINUTE``, run
  without a client limit and with ``client.max_tokens_per_minute`` at the server's limit: 429s
  answered, wall seconds and their ratio.

Run: ``python -m benchmarks.budget_limits [--cap 5]``; writes ``benchmarks/out/budget_limits.json``
with the load average before and after. Figures, never assertions.
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

import yaml
from rich.console import Console

from moria import aio

OUT = Path(__file__).resolve().parent / "out"
PRICE = 1000.0
TOKENS_PER_MINUTE = 4800
COMMON = ("envs.names=babyai", "eval.num_episodes.babyai=1", "eval.num_samples=4",
          "eval.num_workers=4", "client.client_name=openai", "client.model_id=fake-model",
          "client.delay=0.01", "client.generate_kwargs.max_tokens=16")


async def _run(out: Path, base_url: str, *overrides: str) -> tuple[dict[str, Any], float]:
    from orchestrator.core.runner import run_evaluation
    from orchestrator.plan.spec import load_spec
    from tests.support.servers import env_server, policy_server

    async with env_server() as env, policy_server() as first, policy_server() as second:
        spec = load_spec(None, [
            *COMMON, f"eval.output_dir={out}", f"client.base_url={base_url}",
            f"endpoints.env.babyai=[{env.target}]",
            f"endpoints.policy=[{first.target},{second.target}]", *overrides])
        started = time.perf_counter()
        outcome = await run_evaluation(spec, console=Console(quiet=True), show_progress=False)
        return outcome.summary, time.perf_counter() - started


async def measure(cap: float) -> dict[str, Any]:
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
        rate: dict[str, Any] = {"server_tokens_per_minute": TOKENS_PER_MINUTE}
        for name, extra in (("without_limit", ()),
                            ("with_limit", (f"client.max_tokens_per_minute={TOKENS_PER_MINUTE}",))):
            with MeteredOpenAI("go forward", tokens_per_minute=TOKENS_PER_MINUTE) as fake:
                summary, wall = await _run(root / name, fake.base_url, "client.max_retries=50",
                                           "eval.max_steps_per_episode=4", *extra)
                rate[name] = {"http_429": fake.throttled, "calls": fake.billed()["calls"],
                              "wall_s": round(wall, 2),
                              "episodes_scored": summary["episodes_played"]}
        rate["wall_ratio_with_over_without"] = round(
            rate["with_limit"]["wall_s"] / rate["without_limit"]["wall_s"], 3)
        figures["rate"] = rate
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.budget_limits",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--cap", type=float, default=5.0, help="eval.max_cost_usd (default 5)")
    args = parser.parse_args(argv)
    before = [round(x, 2) for x in os.getloadavg()]
    figures = aio.run(measure(args.cap))
    result = {"load_average_before": before,
              "load_average_after": [round(x, 2) for x in os.getloadavg()], **figures}
    OUT.mkdir(exist_ok=True)
    (OUT / "budget_limits.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
