"""The result files a ``make bench`` sitting writes with ``--record`` (``benchmarks/tables.py``
renders them in the docs): ``goals.json`` (every goal of ``benchmarks/goals.py`` with its
figure, target and verdict) and ``side_by_side.json`` (workload A's rows, Moria's and, when
BALROG ran beside it, BALROG's: wall time, CPU per step and by process, peak memory).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.common import RESULTS, result_file, write_result
from benchmarks.goals import Goal


def goal_rows(goals: list[Goal]) -> list[list[str]]:
    """One row per goal: id, measure, figure (``not run`` when its suite did not run),
    target, verdict (``yes``, ``NO`` or ``-`` when it is only reported)."""
    return [[g.goal, g.measure, "not run" if g.value is None else f"{g.value:.3g}", g.target,
             "-" if g.met is None else ("yes" if g.met else "NO")] for g in goals]


def side_by_side_rows(rows: list[dict[str, Any]]) -> list[list[str]]:
    """Workload A's rows of one sitting, in the order they ran."""
    out = []
    for row in rows:
        system = "BALROG" if row.get("system") == "balrog" else "Moria"
        steps = row.get("steps") or 0
        by_process = row.get("cpu_s_by_process") or {}
        split = ", ".join(f"{role.replace('_', ' ')} {1000 * cpu / steps:.2f}"
                          for role, cpu in sorted(by_process.items()) if steps)
        out.append([f"{system}, {row['num_workers']} workers", f"{row['wall_s']:.1f}",
                    f"{row['wall_over_ideal']:.2f}", f"{row['cpu_ms_per_step']:.2f}",
                    split or "-", f"{row['peak_pss_mb']:,} MB",
                    f"{row['load_average_before'][0]:.2f}"])
    return out


def write(results: dict[str, Any], goals: list[Goal], command: str,
          folder: Path = RESULTS) -> list[Path]:
    """Write ``goals.json`` and, when workload A ran, ``side_by_side.json`` into ``folder``
    from one sitting's ``results`` (``benchmarks.run``'s) and its ``goals``; their paths."""
    load = (f"{results['load_average_before'][0]:.2f} before, "
            f"{results['load_average_after'][0]:.2f} after")
    files = {"goals": result_file(
        "goals", "Performance goals, one sitting of make bench", command, load,
        ["goal", "measure", "measured", "target", "met"], goal_rows(goals))}
    rows = [r for r in results.get("workload_a", []) if isinstance(r, dict)]
    if rows:
        files["side_by_side"] = result_file(
            "side_by_side", "Workload A: 50 BabyAI episodes against a 100 ms model, Moria's "
            "moria eval beside BALROG's own evaluator", command, "in each row",
            ["system", "wall s", "wall / ideal", "CPU ms per step", "CPU ms per step by process",
             "peak PSS", "load before"], side_by_side_rows(rows))
    return [write_result(data, folder) for data in files.values()]
