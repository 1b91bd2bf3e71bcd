"""The run report printed at the end of ``moria eval`` and by ``moria report``: rich tables
of a run's summary (``orchestrator.report.summary``), per env and task, with the prompting
protocol line."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from moria.balrog_source import DIRTY
from moria.records import (
    DEFAULT_PROTOCOL,
    FAILED_END_REASONS,
)
from orchestrator.report.accounting import PriceTable
from orchestrator.report.match_report import match_summary, render_match_tables
from orchestrator.report.summary import (
    compute_summary,
    protocol_summary,
)
from orchestrator.store.episodes import (
    load_episodes,
)
from orchestrator.store.protocol_record import NOT_CHECKED

logger = logging.getLogger(__name__)


# -- console report ----------------------------------------------------------------------------
def _pct(figures: Mapping[str, Any]) -> str:
    pct, se = figures["progression_percentage"], figures["standard_error"]
    return "-" if pct is None else f"{pct:.1f} ± {se:.1f}"


def _steps(figures: Mapping[str, Any]) -> str:
    steps = figures.get("average_steps")
    return "-" if steps is None else f"{steps:.1f}"


def _errors(figures: Mapping[str, Any]) -> str:
    reasons = figures["end_reasons"]
    return str(sum(reasons.get(r, 0) for r in FAILED_END_REASONS))


def _invalid(figures: Mapping[str, Any]) -> str:
    rate = figures.get("invalid_action_rate")
    if rate is None:
        return "-"
    return f"{figures['invalid_actions']:,} ({100 * rate:.1f}%)"


def _row(name: str, task: str, figures: Mapping[str, Any]) -> list[str]:
    return [
        name,
        task,
        str(figures["episodes_played"]),
        _pct(figures),
        _steps(figures),
        f"{figures['input_tokens']:,}",
        f"{figures.get('cached_input_tokens', 0):,}",
        f"{figures['output_tokens']:,}",
        _invalid(figures),
        _cost(figures),
        _errors(figures),
    ]


def _cost(figures: Mapping[str, Any]) -> str:
    if not figures.get("models"):
        return "-"  # no model call was made (dummy, oracle)
    cost = figures.get("cost_usd")
    return "unpriced" if cost is None else f"${cost:,.4f}"


def commit_label(commit: Any) -> str:
    """A ``balrog_commit`` value of a summary's ``protocol`` section as short text: the first
    12 characters of the commit, with its ``-dirty`` mark kept (a checkout with local edits),
    each commit joined by ", " for a list, ``"unknown"`` for None or an empty value."""
    commits = commit if isinstance(commit, list) else [commit]
    return ", ".join(str(c)[:12] + (DIRTY if str(c).endswith(DIRTY) else "")
                     for c in commits if c) or "unknown"


def protocol_line(protocol: Mapping[str, Any] | None) -> str:
    """The one line ``moria report`` prints under its table about the run's protocol (the
    ``protocol`` section of ``summary.json``; None or {} is Moria's own protocol)::

        Protocol: balrog (BALROG commit <12 hex>; protocol-check: <status>)
        Protocol: moria (Moria's own prompts; not comparable with BALROG's leaderboard)
        Protocol: mixed - WARNING: ...

    ``<status>`` is ``protocol_check["status"]``, ``not checked`` when there is none.
    """
    protocol = protocol or {}
    name = protocol.get("name") or DEFAULT_PROTOCOL
    if name == "balrog":
        status = (protocol.get("protocol_check") or {}).get("status") or NOT_CHECKED
        return (f"Protocol: balrog (BALROG commit {commit_label(protocol.get('balrog_commit'))}; "
                f"protocol-check: {status})")
    if name == "moria":
        return "Protocol: moria (Moria's own prompts; not comparable with BALROG's leaderboard)"
    return (f"Protocol: {name} - WARNING: the episodes were played under different prompting "
            "protocols; these numbers are comparable with neither BALROG's leaderboard nor a "
            "single-protocol run")


def render_report(out_dir: str | Path, prices: PriceTable | None = None) -> Table:
    """A rich ``Table`` of a results directory: per env, per task and overall.

    Columns: environment, task, scored episodes, progression % ± SE, average steps, input
    tokens, the input tokens served from a prompt/KV cache, output tokens, invalid actions
    (count and share of turns), estimated cost (``prices``; default the shipped table), and
    failed (agent/env error or cancelled) episodes. Figures
    are recomputed from the episode files. Raises ``FileNotFoundError`` (with a hint) when
    ``out_dir`` is missing or holds no readable episode files.
    """
    root = Path(out_dir)
    if not root.is_dir():
        raise FileNotFoundError(
            f"no results directory at {root}; pass the --output dir of a run (moria eval)"
        )
    episodes = load_episodes(root)
    if not episodes:
        raise FileNotFoundError(
            f"no episode files under {root} (expected <env>/<task>/<task>_run_<NN>.json)"
        )
    summary = compute_summary(episodes, prices=prices)
    # a Text title: the folder is shown as written, never read as rich markup
    table = Table(title=Text(f"Moria results: {root}", style="table.title"))
    table.add_column("Environment", no_wrap=True)
    table.add_column("Task", overflow="fold")
    table.add_column("Episodes", justify="right")
    table.add_column("Progression %", justify="right", no_wrap=True)
    for column in ("Avg steps", "Input tokens", "Cached input", "Output tokens", "Invalid",
                   "Cost", "Failed"):
        table.add_column(column, justify="right")
    for env, figures in summary["environments"].items():
        table.add_row(*_row(env, "(all)", figures), style="bold")
        for task, task_figures in figures["tasks"].items():
            table.add_row(*_row("", task, task_figures))
        table.add_section()
    overall = {
        "progression_percentage": summary["average_progress"],
        "standard_error": summary["standard_error"],
        "episodes_played": summary["episodes_played"],
        "average_steps": summary["average_steps"],
        "input_tokens": summary["input_tokens"],
        "cached_input_tokens": summary["cached_input_tokens"],
        "output_tokens": summary["output_tokens"],
        "cost_usd": summary["cost_usd"],
        "models": summary["models"],
        "end_reasons": summary["end_reasons"],
        "invalid_actions": summary["invalid_actions"],
        "invalid_action_rate": summary["invalid_action_rate"],
    }
    table.add_row(*_row("Overall", "(mean of envs)", overall), style="bold")
    return table


def print_report(
    out_dir: str | Path, console: Console | None = None, prices: PriceTable | None = None
) -> None:
    """Print ``render_report(out_dir, prices)`` to ``console`` (default: a new stdout Console),
    the run's ``protocol_line`` under it, then the per-team/per-seat tables of multi-agent
    games (``orchestrator.report.match_report``). Raises as ``render_report`` does."""
    console = console or Console()
    console.print(render_report(out_dir, prices))
    episodes = load_episodes(out_dir)
    console.print(protocol_line(protocol_summary(episodes)), markup=False, highlight=False)
    for table in render_match_tables(match_summary(episodes)):
        console.print(table)
