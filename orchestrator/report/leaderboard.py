"""The leaderboard over several runs (``moria leaderboard``, the viewer's front page).

One row per run: its models (or players), protocol, each env's progression with its 95%
interval and n, the average over the envs, tokens, cost, invalid-action rate and failed
episodes. Figures are computed from the episode files (``orchestrator.report.summary.
compute_summary``, BALROG's averaging and standard error), so a run still playing shows what
it has finished. The interval is the progression ± 1.96 standard errors (BALROG's SE: the
population standard deviation over sqrt(n)); one episode has none.

Runs are ranked by average progression, best first, within each protocol; a run played
under Moria's own protocol is never ranked beside BALROG's published numbers: those rows
(``orchestrator.suites.balrog.PUBLISHED``) are listed only beside ``balrog``-protocol runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from moria.records import FAILED_END_REASONS
from moria.results import Run
from orchestrator.report.summary import compute_summary
from orchestrator.suites.balrog import PUBLISHED

#: The z of a 95% normal interval.
Z_95: Final = 1.959963984540054
#: The end reasons counted as failed episodes.
FAILED_REASONS: Final = FAILED_END_REASONS


@dataclass
class EnvCell:
    """One env's figures in a leaderboard row: progression % (None: no scored episode), the
    half-width of its 95% interval (None for n < 2) and n."""

    progression: float | None
    half_width: float | None
    n: int

    def text(self) -> str:
        """``"62.5 ± 8.1 (n=16)"``, ``"100.0 (n=1)"`` or ``"-"``."""
        if self.progression is None:
            return "-"
        spread = f" ± {self.half_width:.1f}" if self.half_width is not None else ""
        return f"{self.progression:.1f}{spread} (n={self.n})"


@dataclass
class LeaderboardRow:
    """One run (``published`` False) or one of BALROG's published models (True)."""

    name: str
    protocol: str
    envs: dict[str, EnvCell]
    average: float | None
    average_half_width: float | None = None
    path: str = ""
    run_id: str = ""
    tokens: int = 0
    cost_usd: float | None = None
    invalid_action_rate: float | None = None
    failed: int = 0
    episodes: int = 0
    published: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        """A JSON-able dict of the row."""
        return {"name": self.name, "protocol": self.protocol, "run_id": self.run_id,
                "path": self.path, "published": self.published,
                "envs": {env: {"progression": c.progression, "ci95_half_width": c.half_width,
                               "n": c.n} for env, c in self.envs.items()},
                "average": self.average, "average_ci95_half_width": self.average_half_width,
                "tokens": self.tokens, "cost_usd": self.cost_usd,
                "invalid_action_rate": self.invalid_action_rate, "failed": self.failed,
                "episodes": self.episodes}


def _half_width(se: float | None, n: int) -> float | None:
    return Z_95 * se if se is not None and n >= 2 else None


def run_row(run: Run) -> LeaderboardRow:
    """The leaderboard row of one run."""
    summary = compute_summary(run.episodes)
    envs = {env: EnvCell(figures["progression_percentage"],
                         _half_width(figures["standard_error"], figures["episodes_played"]),
                         figures["episodes_played"])
            for env, figures in summary["environments"].items()}
    played = sum(cell.n for cell in envs.values())
    return LeaderboardRow(
        name=", ".join(run.models) or "?", protocol=run.protocol, envs=envs,
        average=summary["average_progress"],
        average_half_width=_half_width(summary["standard_error"], played),
        path=str(run.path), run_id=run.run_id, tokens=int(summary["total_tokens"]),
        cost_usd=summary["cost_usd"], invalid_action_rate=summary["invalid_action_rate"],
        failed=sum(int(summary["end_reasons"].get(r, 0)) for r in FAILED_REASONS),
        episodes=int(summary["episodes_total"]))


def published_rows(envs: list[str]) -> list[LeaderboardRow]:
    """BALROG's published models, over ``envs`` (their average over those envs only)."""
    rows = []
    for model, figures in PUBLISHED.items():
        cells = {env: EnvCell(figures.get(env), None, 0) for env in envs}
        known = [c.progression for c in cells.values() if c.progression is not None]
        rows.append(LeaderboardRow(
            name=f"{model} (BALROG, published)", protocol="balrog", envs=cells,
            average=sum(known) / len(known) if known and len(known) == len(envs) else None,
            published=True))
    return rows


def leaderboard(runs: list[Run]) -> list[LeaderboardRow]:
    """The rows of ``runs``, ranked by average progression within each protocol (balrog
    first), BALROG's published rows among the balrog ones when there is any."""
    rows = [run_row(run) for run in runs]
    envs = sorted({env for row in rows for env in row.envs})
    if any(row.protocol == "balrog" for row in rows):
        rows += published_rows(envs)
    order = {"balrog": 0, "moria": 1}
    return sorted(rows, key=lambda r: (order.get(r.protocol, 2), r.protocol,
                                       -(r.average if r.average is not None else -1.0), r.name))


def leaderboard_envs(rows: list[LeaderboardRow]) -> list[str]:
    """The envs of ``rows``' runs (published rows add none), sorted."""
    return sorted({env for row in rows if not row.published for env in row.envs})
