"""The embedded local model under BALROG's history window: KV-cache reuse and time per step.

    python -m benchmarks.local_model [--env E --task T] [--steps 24] [--window 16] [--model M]

Runs the real ``moria eval`` (local stack, ``client.client_name=local``, one episode of
``--task`` of ``--env``, at most ``--steps`` steps, ``agent.max_text_history=--window``, one
worker) and reads the episode's step records: per model call, the prompt tokens whose KV state
the llama.cpp context reused (``cached_input_tokens``) and those it evaluated (``input_tokens``
minus those), and the call's seconds. While fewer than ``window`` past steps exist the history
only grows and each call evaluates just its new messages; once the window is full the oldest
past step leaves the prompt on every step, so only the tokens before it (the instruction) can
be reused. The totals give both phases apart. Prints one JSON document and writes it to
``benchmarks/out/local_model.json``; asserts nothing about speed (figures vary with the load,
reported before and after).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "out"
#: BALROG's default text history window (past steps whose text the prompt keeps).
BALROG_WINDOW = 16
TASK = "BabyAI-MixedTrainLocal-v0/goto"


def _phase(steps: list[dict[str, Any]]) -> dict[str, Any]:
    """Means per step of one phase's step rows (``{}`` when it has none)."""
    if not steps:
        return {}
    n = len(steps)
    return {"steps": n,
            "cached_per_step": round(sum(s["cached"] for s in steps) / n, 1),
            "evaluated_per_step": round(sum(s["evaluated"] for s in steps) / n, 1),
            "seconds_per_step": round(sum(s["seconds"] for s in steps) / n, 3)}


def summarize(steps: list[dict[str, Any]], window: int) -> dict[str, Any]:
    """Totals of the per-step rows (each ``{step, input, cached, evaluated, seconds}``): token
    sums, the cached fraction of all prompt tokens, mean seconds per step, evaluated tokens per
    model-call second, and the same means for the steps before the window is full
    (``growing``: step < window + 1) and after (``window_full``)."""
    prompt = sum(s["input"] for s in steps)
    cached = sum(s["cached"] for s in steps)
    seconds = sum(s["seconds"] for s in steps)
    return {
        "steps": len(steps),
        "input_tokens": prompt,
        "cached_input_tokens": cached,
        "evaluated_tokens": prompt - cached,
        "cached_fraction": round(cached / prompt, 4) if prompt else None,
        "model_seconds": round(seconds, 2),
        "seconds_per_step": round(seconds / len(steps), 3) if steps else None,
        "evaluated_tokens_per_model_second": round((prompt - cached) / seconds, 1)
        if seconds else None,
        "growing": _phase([s for s in steps if s["step"] <= window]),
        "window_full": _phase([s for s in steps if s["step"] > window]),
    }


def run(task: str = TASK, steps: int = 24, window: int = BALROG_WINDOW,
        model: str | None = None, seed: int = 0, env: str = "babyai") -> dict[str, Any]:
    """One local-model episode of ``task`` of ``env`` capped at ``steps`` steps with a
    ``window``-step history; returns the per-step rows, their totals (``summarize``), the
    eval's wall seconds and the load average before and after. Raises RuntimeError when
    ``moria eval`` fails or writes no episode."""
    from benchmarks.common import eval_command, read_episodes, run_timed

    load_before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="moria-local-model-") as out:
        command = eval_command(out, f"envs.names={env}", f"tasks.{env}_tasks=[{task}]",
                               f"eval.num_episodes.{env}=1",
                               f"eval.max_steps_per_episode={steps}",
                               f"agent.max_text_history={window}", "eval.num_workers=1",
                               "client.client_name=local", f"eval.seed={seed}")
        if model:
            command.append(f"client.model_id={model}")
        wall = run_timed(command)
        episodes = read_episodes(out)
    rows = [{"step": s.step, "input": s.input_tokens, "cached": s.cached_input_tokens,
             "evaluated": s.input_tokens - s.cached_input_tokens,
             "seconds": round(s.latency_s, 3)}
            for s in episodes[0].steps]
    return {"env": env, "task": task, "window": window, "max_steps": steps,
            "model": model or "default",
            "progression": episodes[0].progression, "eval_wall_s": round(wall, 1),
            "load_average_before": load_before,
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "totals": summarize(rows, window), "per_step": rows}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print its JSON and write it to ``benchmarks/out/local_model.json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="babyai", help="env family (default: %(default)s)")
    parser.add_argument("--task", default=TASK, help="a task of --env (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=24,
                        help="step cap; above --window so the window fills (%(default)s)")
    parser.add_argument("--window", type=int, default=BALROG_WINDOW,
                        help="agent.max_text_history (BALROG's default: %(default)s)")
    parser.add_argument("--model", default=None, help="client.model_id (default: built-in)")
    parser.add_argument("--seed", type=int, default=0, help="eval.seed (%(default)s)")
    args = parser.parse_args(argv)
    figures = run(args.task, args.steps, args.window, args.model, args.seed, args.env)
    OUT.mkdir(exist_ok=True)
    text = json.dumps(figures, indent=2)
    (OUT / "local_model.json").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
