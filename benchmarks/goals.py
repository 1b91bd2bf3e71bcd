"""The performance goals of ``make bench`` (issues 17 and 40), read off the suite's figures.

Each goal is a ratio or a per-step cost measured in one run of ``benchmarks.run``; this module
only looks the figures up, compares them with their targets and prints one table. It asserts
nothing: a missed goal is reported, never raised.

- P1: Env server overhead. BabyAI through the Env server at least 0.5x in-process with one
  session; MiniHack and NLE at least 0.3x with one session and 0.5x with eight (judged on the
  server's default, a worker process per game); with ``--isolate ''``, as the local stack of
  ``moria eval`` runs them, at least 0.5x with one session.
- P2: 64 concurrent episodes against a 100 ms model (a self-hosted OpenAI-compatible server)
  at most 1.3x the ideal wall time (on 2 cores).
- P3: workload A (``benchmarks.workload_a``, Moria's side): wall time over the ideal, CPU per
  step of all Moria processes at most 2.5 ms, the orchestrator's at most 1 ms, and, when
  BALROG ran in the same sitting (``--balrog-checkout``), CPU per step at most 1/8 of
  BALROG's; when BALROG's best wall time of the sitting is known (its rows, or else
  ``--balrog-best-wall-s``), wall time at most a third of it.
- P6: the local model under BALROG's history window (``benchmarks.local_model``): prompt
  tokens served from the KV cache vs evaluated, per step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Goal:
    """One goal: its id, what is measured, the figure (None when that suite did not run), the
    target as text and whether it is met (None when it cannot be told)."""

    goal: str
    measure: str
    value: float | None
    target: str
    met: bool | None


def _dig(results: dict[str, Any], *path: str) -> float | None:
    node: Any = results
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return None
        node = node[key]
    return float(node) if isinstance(node, int | float) else None


def _at_least(goal: str, measure: str, value: float | None, target: float) -> Goal:
    return Goal(goal, measure, value, f">= {target:g}", None if value is None else value >= target)


def _at_most(goal: str, measure: str, value: float | None, target: float,
             shown: str | None = None) -> Goal:
    """``value`` judged against ``target`` (printed as ``shown``, e.g. ``1/3``, when given)."""
    return Goal(goal, measure, value, f"<= {shown or format(target, 'g')}",
                None if value is None else value <= target)


def _per_step(row: dict[str, Any], role: str) -> float | None:
    """CPU milliseconds per step of one role (``benchmarks.process_tree.role_of``) in a
    workload A row, or None when the row lacks it."""
    cpu = row.get("cpu_s_by_process", {}).get(role)
    steps = row.get("steps")
    return None if cpu is None or not steps else round(1000 * float(cpu) / float(steps), 3)


def best_row(rows: list[dict[str, Any]], system: str) -> dict[str, Any] | None:
    """The workload A row of ``system`` (``moria`` or ``balrog``; rows without a ``system``
    are Moria's, as written before BALROG ran beside it) with the least wall time, or None."""
    mine = [r for r in rows if r.get("system", "moria") == system]
    return min(mine, key=lambda r: r["wall_s"]) if mine else None


def evaluate(results: dict[str, Any], balrog_best_wall_s: float | None = None) -> list[Goal]:
    """The goals, from the ``results`` dict that ``benchmarks.run`` writes; P3's ratio uses
    ``balrog_best_wall_s`` when given, else the best of BALROG's workload A rows in
    ``results`` (none: the ratio is left out)."""
    goals = [_at_least("P1", "BabyAI Env server / in-process, 1 session",
                       _dig(results, "babyai_oracle_steps_per_s", "remote_1_over_in_process"),
                       0.5)]
    nethack = results.get("nethack_steps_per_s_and_memory", {})
    for task, family in (("MiniHack-MazeWalk-9x9-v0", "MiniHack"), ("NetHackChallenge-v0", "NLE")):
        goals.append(_at_least("P1", f"{family} Env server / in-process, 1 session",
                               _dig(nethack, task, "server_1_over_in_process"), 0.3))
        goals.append(_at_least("P1", f"{family} Env server / in-process, 8 sessions",
                               _dig(nethack, task, "server_8_over_in_process"), 0.5))
        inline = "no worker processes (--isolate '', the local stack's)"
        goals.append(_at_least("P1", f"{family}, 1 session, {inline}",
                               _dig(nethack, task, "without_workers", "server_1_over_in_process"),
                               0.5))
        goals.append(Goal("P1", f"{family}, 8 sessions, {inline}",
                          _dig(nethack, task, "without_workers", "server_8_over_in_process"),
                          "report", None))
    goals.append(_at_most("P2", "64 episodes vs a 100 ms model: wall / ideal",
                          _dig(results, "concurrent_episodes_fixed_latency", "wall_over_ideal"),
                          1.3))
    rows = [r for r in results.get("workload_a", []) if isinstance(r, dict)]
    best, balrog = best_row(rows, "moria"), best_row(rows, "balrog")
    balrog_best_wall_s = balrog_best_wall_s or (None if balrog is None
                                                else float(balrog["wall_s"]))
    workers = f" ({best['num_workers']} workers)" if best else ""
    goals.append(Goal("P3", f"workload A wall / ideal{workers}",
                      None if best is None else float(best["wall_over_ideal"]),
                      "report (ideal = longest episode x latency)", None))
    goals.append(_at_most("P3", f"workload A CPU ms per step, all processes{workers}",
                          None if best is None else float(best["cpu_ms_per_step"]), 2.5))
    goals.append(_at_most("P3", f"workload A CPU ms per step, the orchestrator{workers}",
                          None if best is None else _per_step(best, "orchestrator"), 1.0))
    if balrog is not None:
        ratio = (None if best is None
                 else float(best["cpu_ms_per_step"]) / float(balrog["cpu_ms_per_step"]))
        goals.append(_at_most("P3", "workload A CPU per step / BALROG's (same sitting)",
                              ratio, 1 / 8, "1/8"))
    if balrog_best_wall_s:
        ratio = None if best is None else float(best["wall_s"]) / balrog_best_wall_s
        goals.append(_at_most("P3", "workload A wall / BALROG's best wall (same sitting)",
                              ratio, 1 / 3, "1/3"))
    local = results.get("local_model", {})
    goals.append(Goal("P6", "local model: cached / all prompt tokens, BALROG window",
                      _dig(local, "totals", "cached_fraction"), "report", None))
    goals.append(Goal("P6", "local model: seconds per step",
                      _dig(local, "totals", "seconds_per_step"), "report", None))
    return goals


def print_table(goals: list[Goal]) -> None:
    """Print the goals as a table (rich) on stdout."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Performance goals (issues 17 and 40)")
    for column in ("goal", "measure", "value", "target", "met"):
        table.add_column(column)
    for g in goals:
        value = "not run" if g.value is None else f"{g.value:.3g}"
        met = "-" if g.met is None else ("yes" if g.met else "NO")
        table.add_row(g.goal, g.measure, value, g.target, met)
    Console().print(table)
