"""``moria compare RUN_A RUN_B`` and ``moria leaderboard RUN_DIR ...``: results of several runs
in the terminal (the statistics: ``orchestrator.report.paired`` and
``orchestrator.report.leaderboard``)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from moria.results import ResultsError, Run, load_run
from orchestrator.report.leaderboard import LeaderboardRow, leaderboard, leaderboard_envs
from orchestrator.report.paired import Comparison, PairedFigures, compare_runs


def add_arguments(sub: Any) -> None:
    """Register ``moria compare`` and ``moria leaderboard`` on the CLI's subparsers."""
    cp = sub.add_parser("compare", help="two runs side by side on the episodes they share "
                        "(same env, task and seed): paired differences, intervals, p-values")
    cp.add_argument("run_a", metavar="RUN_A", help="a results directory of moria eval")
    cp.add_argument("run_b", metavar="RUN_B", help="another, compared with RUN_A (B - A)")
    cp.add_argument("--allow-different", action="store_true",
                    help="compare runs whose protocol, step cap, run seed or env options "
                         "differ (the differences are printed)")
    cp.add_argument("--json", action="store_true", help="print the figures as JSON")
    cp.set_defaults(func=compare_main)

    lb = sub.add_parser("leaderboard", help="one row per run: progression per env with 95%% "
                        "intervals, tokens, cost, invalid actions, failed episodes")
    lb.add_argument("runs", nargs="+", metavar="RUN_DIR", help="results directories")
    lb.add_argument("--json", action="store_true", help="print the rows as JSON")
    lb.set_defaults(func=leaderboard_main)


def _load(paths: list[str], console: Console) -> list[Run] | None:
    runs = []
    for path in paths:
        try:
            run = load_run(path)
        except ResultsError as exc:
            console.print(f"error: {escape(str(exc))}")
            return None
        for warning in run.warnings:
            console.print(f"warning: {escape(warning)}", style="yellow")
        runs.append(run)
    return runs


def _num(value: float | None, fmt: str = "{:.1f}") -> str:
    return "-" if value is None else fmt.format(value)


def _p(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2g}" if value < 0.001 else f"{value:.3f}"


def _figures_row(figures: PairedFigures) -> list[str]:
    ci = figures.ci95
    return [figures.name, str(figures.n), _num(figures.mean_a), _num(figures.mean_b),
            _num(figures.mean_difference, "{:+.1f}"),
            "-" if ci is None else f"[{ci[0]:+.1f}, {ci[1]:+.1f}]", _p(figures.p_value),
            f"{figures.b_better}/{figures.ties}/{figures.a_better}"]


def comparison_table(comparison: Comparison) -> Table:
    """The rich table of a comparison: one row per env, then overall."""
    table = Table(title="B - A on the same episodes (env, task, seed), progression in %")
    for header in ("Env", "Pairs", "A %", "B %", "B - A", "95% CI", "p (signed-rank)",
                   "B better/tie/A better"):
        table.add_column(header, justify="left" if header == "Env" else "right")
    for figures in comparison.envs:
        table.add_row(*_figures_row(figures))
    table.add_section()
    table.add_row(*_figures_row(comparison.overall))
    return table


def _describe(label: str, run: Run) -> str:
    return (f"{label}: {escape(str(run.path))} ({escape(', '.join(run.models) or '?')}; "
            f"protocol {run.protocol}; {len(run.episodes)} episodes)")


def compare_main(args: argparse.Namespace) -> int:
    """``moria compare``: 0 when the runs were compared, 2 when they cannot be (not run
    directories, different settings without ``--allow-different``, no shared episode)."""
    console = Console(highlight=False, soft_wrap=True)
    runs = _load([args.run_a, args.run_b], console)
    if runs is None:
        return 2
    a, b = runs
    try:
        comparison = compare_runs(a, b)
    except ImportError as exc:
        console.print(f"error: moria compare needs scipy ({exc.name} is missing): pip install "
                      "'moria[results]'")
        return 2
    if comparison.differences and not args.allow_different:
        console.print("error: the runs do not measure the same thing; compare them anyway "
                      "with --allow-different:")
        for line in comparison.differences:
            console.print(f"  {escape(line)}")
        return 2
    if not comparison.overall.n:
        console.print("error: the runs share no scored episode (the same env, task and seed); "
                      "a paired comparison needs runs of the same tasks with the same eval.seed")
        return 2
    if args.json:
        print(json.dumps({"a": str(a.path), "b": str(b.path),
                          "envs": [f.as_json() for f in comparison.envs],
                          "overall": comparison.overall.as_json(),
                          "differences": comparison.differences,
                          "unpaired": {"a": comparison.unpaired_a, "b": comparison.unpaired_b}},
                         indent=2))
        return 0
    console.print(_describe("A", a))
    console.print(_describe("B", b))
    for line in comparison.differences:
        console.print(f"compared despite: {escape(line)}", style="yellow")
    console.print(comparison_table(comparison))
    if comparison.unpaired_a or comparison.unpaired_b:
        console.print(f"left out (no partner in the other run): {comparison.unpaired_a} of A's "
                      f"scored episodes, {comparison.unpaired_b} of B's")
    console.print("95% CI: percentile bootstrap of the mean difference (overall: each env "
                  "resampled apart); p: two-sided Wilcoxon signed-rank test")
    return 0


def leaderboard_table(rows: list[LeaderboardRow]) -> Table:
    """The rich table of the leaderboard rows."""
    envs = leaderboard_envs(rows)
    table = Table(title="Leaderboard: progression % ± 95% interval (n)")
    for header in ("Run / model", "Protocol", *envs, "Average", "Tokens", "Cost",
                   "Invalid", "Failed"):
        table.add_column(header, overflow="fold")
    for row in rows:
        average = _num(row.average) + (f" ± {row.average_half_width:.1f}"
                                       if row.average_half_width is not None else "")
        table.add_row(
            escape(row.name if row.published else f"{row.run_id}\n{row.name}"), row.protocol,
            *(row.envs[env].text() if env in row.envs else "-" for env in envs),
            average, "-" if row.published else f"{row.tokens:,}",
            "-" if row.cost_usd is None else f"${row.cost_usd:.2f}",
            "-" if row.invalid_action_rate is None else f"{100 * row.invalid_action_rate:.1f}%",
            "-" if row.published else str(row.failed))
    return table


def leaderboard_main(args: argparse.Namespace) -> int:
    """``moria leaderboard``: 0, or 2 when a path is no run directory."""
    console = Console(highlight=False, soft_wrap=True)
    runs = _load(args.runs, console)
    if runs is None:
        return 2
    rows = leaderboard(runs)
    if args.json:
        print(json.dumps([row.as_json() for row in rows], indent=2))
        return 0
    console.print(leaderboard_table(rows))
    if any(row.protocol != "balrog" for row in rows if not row.published):
        console.print("Runs under Moria's own protocol are not comparable with BALROG's "
                      "published numbers (shown only beside agent.protocol=balrog runs).")
    return 0
