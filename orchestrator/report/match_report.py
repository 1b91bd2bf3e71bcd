"""Per-side results of multi-agent games: who played each seat or team and how it fared.

The main report scores a run by ``progression`` (one number per episode, seen from one seat).
Multi-agent games need more: for every side, its players, wins/draws/losses and the game's own
figures. A registry maps each env family to the function that groups its episodes into sides:

- ``multigrid`` (Soccer, Collect): one row per team colour with its lineup (agent id and player
  of each member), W/D/L, goals for/against per episode, mean ball-possession share, passes and
  steals (from the env's ``stats["teams"]``, see env_server/families/multigrid/game.py);
- ``pettingzoo`` (board games): one row per seat with its player, W/D/L, unfinished games,
  win rate (a draw counts half), illegal moves and mean plies (from ``stats["outcome"]``,
  ``stats["illegal_moves"]``, ``stats["moves"]``).

A game the step cap stopped before it ended is ``unfinished``: neither a win, a draw nor a
loss. It is counted apart (``unfinished``) and left out of the win rate, which is over the
games that ended.

Only finished episodes (``EpisodeRecord.scored``) count. A seat's player is
``EpisodeRecord.players[agent_id]["player"]`` (the policy's own strategy and model names);
rows are grouped by (task, side, lineup), so runs that changed players are not mixed.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from typing import Any

from rich.table import Table

from moria.families import families
from moria.records import EpisodeRecord
from orchestrator.report.ratings import UNFINISHED

#: One row of a match table (JSON-able; ``side`` and ``lineup`` identify it).
Row = dict[str, Any]


def _player(record: EpisodeRecord, agent_id: str) -> str:
    return str(record.players.get(agent_id, {}).get("player", "")) or "?"


def _outcome_counts(outcomes: Iterable[str]) -> dict[str, int]:
    values = list(outcomes)
    return {"wins": values.count("win"), "draws": values.count("draw"),
            "losses": values.count("loss"), "unfinished": values.count(UNFINISHED)}


def _win_rate(counts: dict[str, int]) -> float | None:
    """Wins plus half the draws, over the games that ended (None when none did)."""
    games = counts["wins"] + counts["draws"] + counts["losses"]
    return (counts["wins"] + 0.5 * counts["draws"]) / games if games else None


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def multigrid_rows(episodes: list[EpisodeRecord]) -> list[Row]:
    """Team rows of Soccer/Collect episodes: per (task, team colour, lineup), ``episodes``,
    ``wins``/``draws``/``losses``, ``goals_for``/``goals_against`` (means per episode),
    ``possession_share`` (mean, 0..1), ``passes`` and ``steals`` (totals)."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for record in episodes:
        for colour, team in (record.stats.get("teams") or {}).items():
            members = [str(a) for a in team.get("agents", [])]
            lineup = ", ".join(f"{a}: {_player(record, a)}" for a in members)
            groups.setdefault((record.task, str(colour), lineup), []).append(team)
    rows: list[Row] = []
    for (task, colour, lineup), teams in sorted(groups.items()):
        counts = _outcome_counts(str(t.get("outcome", "")) for t in teams)
        rows.append({
            "task": task, "side": colour, "lineup": lineup, "episodes": len(teams), **counts,
            "win_rate": _win_rate(counts),
            "goals_for": _mean([float(t.get("goals_for", 0)) for t in teams]),
            "goals_against": _mean([float(t.get("goals_against", 0)) for t in teams]),
            "possession_share": _mean([float(t.get("possession_share", 0)) for t in teams]),
            "passes": int(sum(float(t.get("passes", 0)) for t in teams)),
            "steals": int(sum(float(t.get("steals", 0)) for t in teams)),
        })
    return rows


def pettingzoo_rows(episodes: list[EpisodeRecord]) -> list[Row]:
    """Seat rows of board-game episodes: per (task, agent id, player), ``episodes``,
    ``wins``/``draws``/``losses``/``unfinished``, ``win_rate`` (draws count half; over the
    games that ended), ``illegal_moves`` (total) and ``mean_moves`` (plies per game)."""
    groups: dict[tuple[str, str, str], list[tuple[str, int, float]]] = {}
    for record in episodes:
        outcome = record.stats.get("outcome") or {}
        illegal = record.stats.get("illegal_moves") or {}
        for agent_id, result in outcome.items():
            key = (record.task, str(agent_id), _player(record, str(agent_id)))
            groups.setdefault(key, []).append(
                (str(result), int(illegal.get(agent_id, 0)), float(record.stats.get("moves", 0))))
    rows: list[Row] = []
    for (task, agent_id, player), games in sorted(groups.items()):
        counts = _outcome_counts(g[0] for g in games)
        rows.append({
            "task": task, "side": agent_id, "lineup": player, "episodes": len(games), **counts,
            "win_rate": _win_rate(counts), "illegal_moves": sum(g[1] for g in games),
            "mean_moves": _mean([g[2] for g in games]),
        })
    return rows


#: report kind (a family manifest's ``report_kind``) -> the function that turns a family's
#: finished episodes into side rows.
MATCH_TABLES: dict[str, Callable[[list[EpisodeRecord]], list[Row]]] = {
    "team": multigrid_rows,
    "two_player": pettingzoo_rows,
}

#: Extra columns per report kind after the common ones: (row key, header, format).
_EXTRA_COLUMNS: dict[str, list[tuple[str, str, str]]] = {
    "team": [("goals_for", "Goals for/ep", "{:.2f}"),
                  ("goals_against", "Goals against/ep", "{:.2f}"),
                  ("possession_share", "Possession", "{:.0%}"),
                  ("passes", "Passes", "{}"), ("steals", "Steals", "{}")],
    "two_player": [("illegal_moves", "Illegal moves", "{}"),
                   ("mean_moves", "Plies/game", "{:.1f}")],
}


def match_summary(episodes: list[EpisodeRecord]) -> dict[str, list[Row]]:
    """``{env: rows}`` for every env of ``episodes`` that has a match table and finished
    episodes (the ``matches`` section of ``summary.json``)."""
    out: dict[str, list[Row]] = {}
    for env in sorted({e.env for e in episodes}):
        build = MATCH_TABLES.get(_kind(env))
        mine = [e for e in episodes if e.env == env and e.scored]
        if build is not None and mine:
            out[env] = build(mine)
    return out


def _kind(env: str) -> str:
    manifest = families().get(env)
    return manifest.report_kind if manifest is not None else "single_agent"


def _cell(value: Any, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def render_match_tables(matches: dict[str, list[Row]]) -> list[Table]:
    """One rich table per env of ``match_summary``'s output."""
    tables = []
    for env, rows in matches.items():
        kind = _kind(env)
        side = "Team" if kind == "team" else "Seat"
        table = Table(title=f"{env}: results per {side.lower()}")
        for header in ("Task", side, "Players", "Episodes", "W/D/L", "Unfinished", "Win rate"):
            table.add_column(header, overflow="fold")
        extra = _EXTRA_COLUMNS.get(kind, [])
        for _, header, _ in extra:
            table.add_column(header, justify="right")
        for row in rows:
            table.add_row(
                row["task"], row["side"], row["lineup"], str(row["episodes"]),
                f"{row['wins']}/{row['draws']}/{row['losses']}",
                str(row.get("unfinished", 0)), _cell(row["win_rate"], "{:.0%}"),
                *(_cell(row.get(key), fmt) for key, _, fmt in extra))
        tables.append(table)
    return tables
