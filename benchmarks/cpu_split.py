"""Workload A's CPU split in two: what a run costs whatever its length (imports, server
starts, the preflight, the figures at its end) and what each step adds, by process.

``moria eval`` runs workload A's kind of run (BALROG's five BabyAI tasks against a fake model
server answering "toggle" after 100 ms, ``eval.num_workers=50``; ``benchmarks.workload_a``)
with ``SHORT`` and with ``LONG`` episodes per task, alternated over ``--rounds`` rounds. For
each process (``benchmarks.process_tree.role_of``) and for all together, from the medians of
the two lengths' CPU seconds and steps:

- CPU per step = (CPU of the long run - CPU of the short run) / (their difference in steps);
- fixed CPU = CPU of the short run - its steps x CPU per step.

Workload A's CPU per step is then (fixed / its steps) + CPU per step: the first part shrinks
with a longer run, the second does not. Figures, never assertions: one sitting, one machine.

Run: ``python -m benchmarks.cpu_split [--rounds 2] [--record]``; ``--record`` writes
``benchmarks/results/cpu_split.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from typing import Any

from benchmarks.common import announced_url, load_span, result_file, write_result
from benchmarks.workload_a import EPISODES_PER_TASK, run_once

#: Episodes per task of the short and the long run (the long one is workload A itself).
SHORT, LONG = 1, EPISODES_PER_TASK
#: Workload A's workers and model latency.
WORKERS, LATENCY_S = 50, 0.1


def measure(rounds: int) -> list[dict[str, Any]]:
    """``rounds`` rounds, each a short and a long run against one fake model server; each
    run's ``run_once`` figures plus ``episodes_per_task``, printed as JSON lines as they come.
    Raises RuntimeError when a run fails."""
    fake = subprocess.Popen([sys.executable, "-m", "tests.support.fake_openai", "--port", "0",
                             "--latency", str(LATENCY_S), "--reply", "toggle"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    runs = []
    try:
        base_url = announced_url(fake)
        for _ in range(rounds):
            for per_task in (SHORT, LONG):
                row = {"episodes_per_task": per_task, **run_once(base_url, WORKERS, per_task)}
                print(json.dumps(row), flush=True)
                runs.append(row)
    finally:
        fake.terminate()
        fake.wait(timeout=10)
    return runs


def split(runs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per process role (the runs' ``cpu_s_by_process`` keys, sorted) and ``all``:
    ``fixed_s`` and ``per_step_ms`` from the medians of the short and the long runs, and
    ``steps`` (the long run's). Raises ValueError without both."""
    by_length = {n: [r for r in runs if r["episodes_per_task"] == n] for n in (SHORT, LONG)}
    if not all(by_length.values()):
        raise ValueError("needs at least one short and one long run")
    steps = {n: statistics.median(r["steps"] for r in rows) for n, rows in by_length.items()}
    roles = sorted({role for r in runs for role in r["cpu_s_by_process"]})
    figures = {}
    for role in (*roles, "all"):
        cpu = {n: statistics.median(r["cpu_s"] if role == "all"
                                    else r["cpu_s_by_process"].get(role, 0.0) for r in rows)
               for n, rows in by_length.items()}
        per_step = (cpu[LONG] - cpu[SHORT]) / (steps[LONG] - steps[SHORT])
        figures[role] = {"fixed_s": round(cpu[SHORT] - steps[SHORT] * per_step, 2),
                         "per_step_ms": round(1000 * per_step, 3), "steps": steps[LONG]}
    return figures


def record(rounds: int) -> None:
    """Measure and write ``benchmarks/results/cpu_split.json``."""
    before = os.getloadavg()[0]
    figures = split(measure(rounds))
    load = load_span(before)
    rows = []
    for role, f in figures.items():
        name = "**all processes**" if role == "all" else role.replace("_", " ")
        spread = 1000 * f["fixed_s"] / f["steps"]
        rows.append([name, f"{f['fixed_s']:.2f}", f"{f['per_step_ms']:.2f}",
                     f"{spread:.2f}", f"{spread + f['per_step_ms']:.2f}"])
    path = write_result(result_file(
        "cpu_split", "Workload A's CPU: a run's fixed cost and each step's",
        f"python -m benchmarks.cpu_split --rounds {rounds} --record (runs of {SHORT} and "
        f"{LONG} episodes per task alternated, medians)", load,
        ["process", "fixed CPU s per run", "CPU ms per step",
         f"fixed over workload A's {int(figures['all']['steps']):,} steps, ms", "together, ms"],
        rows))
    print(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cpu_split",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=2, help="short and long runs each")
    parser.add_argument("--record", action="store_true",
                        help="write benchmarks/results/cpu_split.json")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    if args.record:
        record(args.rounds)
    else:
        print(json.dumps(split(measure(args.rounds)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
