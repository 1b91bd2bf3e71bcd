"""``progress.png`` and the per-env figures of a run, drawn from its ``summary.json``.

``progress.png`` (the run at a glance):

- the title names the prompting protocol (and, under BALROG's, the BALROG commit and the
  protocol-check status); its second line gives the scored episodes (``n=``) and who played (the
  models, and the agent types);
- *per environment* (single-agent envs): one bar per env, and their average when there are
  several: this run's progression %. Each bar is labelled with its value and its episodes
  (``n=``); its standard error is drawn (and written, ``± SE``) only when ``n >= 2`` (one
  episode has no spread: ``n=1, no SE``). A bar at 0 is drawn as a thick line on the axis and
  labelled, so a zero never looks like a missing bar; an env without a scored episode says so.
  Under BALROG's protocol, the published figures of the reference models in
  :data:`orchestrator.suites.balrog.PUBLISHED` (LLM mode, naive agent, 16-step history; their
  average recomputed over the same envs as the run) stand beside each bar; any other protocol
  (Moria's own, a mix, or a summary without the section) draws the run alone, titled as not
  comparable with BALROG's leaderboard;
- *per task*, beside it, while the run has at most ``MAX_INLINE_TASKS`` single-agent tasks: one
  horizontal bar per task with its full name, labelled like the env bars. With more (the BALROG
  suite has 55) this panel is left out, and the per-env figures carry the tasks;
- *multi-agent games* (envs with rows in the summary's ``matches``: team games such as
  MultiGrid Soccer, two-player board games): one panel per env, one stacked bar per team or
  seat and its players: wins, draws and losses, labelled with W/D/L, the win rate, ``n`` and
  the game's own figures (goals for and against per episode, illegal moves). Their
  progression (one seat's view) is not drawn, and they are left out of the average bar.

``<env>/<env>_progress.png`` (one per env, beside ``<env>_summary.json``): the per-task bars of
that env, one per task with its full name, the figure's height grown with the number of tasks;
or, for a multi-agent env, its W/D/L panel.

Drawn with matplotlib's non-interactive Agg backend.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from moria.files import atomic_path
from moria.records import DEFAULT_PROTOCOL
from orchestrator.report.tables import commit_label
from orchestrator.store.episodes import safe_name
from orchestrator.store.protocol_record import NOT_CHECKED
from orchestrator.suites.balrog import PUBLISHED

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

log = logging.getLogger(__name__)

RUN_COLOUR = "#1f4e79"
REFERENCE_COLOURS = ["#c9c9c9", "#b0b0b0", "#969696", "#7d7d7d", "#646464"]
#: Colours of wins, draws, losses and unfinished games (the step cap stopped them: no
#: result) in the multi-agent panels.
OUTCOME_COLOURS: Final[dict[str, str]] = {"wins": "#2e7d32", "draws": "#9e9e9e",
                                          "losses": "#c62828", "unfinished": "#ffffff"}
#: The letters of ``OUTCOME_COLOURS``'s outcomes in a bar's label.
_OUTCOME_LETTERS: Final[dict[str, str]] = {"wins": "W", "draws": "D", "losses": "L"}
#: Title of a plot whose run was not made under BALROG's protocol (``name`` is the protocol).
NOT_COMPARABLE = "{name} — not comparable with the BALROG leaderboard"
#: At most this many single-agent tasks get the per-task panel of ``progress.png``.
MAX_INLINE_TASKS: Final[int] = 20
#: Height per bar of a horizontal-bar panel (inches).
ROW_INCHES: Final[float] = 0.34
_PROTOCOL_WORDS = {"balrog": "BALROG protocol", "moria": "Moria protocol",
                   "mixed": "Mixed prompting protocols"}


@dataclass(frozen=True)
class ProgressLayout:
    """What the env panel of ``progress.png`` shows, decided from a summary alone.

    ``groups``: the single-agent env names (plus ``"average"`` for several); ``tick_labels``:
    the same with the episode count, e.g. ``"babyai\\n(n=50)"``; ``run_values``: (percent, SE)
    per group; ``references``: (model, {group: published percent}) pairs, empty unless
    ``comparable``; ``title``: the figure title naming the protocol; ``comparable``: True only
    for a run made under BALROG's protocol (``summary["protocol"]["name"] == "balrog"``);
    ``protocol``: the protocol in words for the run's legend entry (``"BALROG protocol"``,
    ``"Moria protocol"``, ``"Mixed prompting protocols"``); ``counts``: scored episodes behind
    each group; ``se_shown``: whether each group's standard error is drawn (every env behind it
    has ``n >= 2``); ``notes``: the label over each bar (``"50.0 ± 10.2\\nn=4"``,
    ``"0.0\\nn=1, no SE"``); ``match_envs``: the multi-agent envs drawn as W/D/L panels instead
    (left out of ``groups``); ``subtitle``: the title's second line (``n``, models, agents);
    ``one_line_notes``: the notes on one line (``"0.0 (n=1, no SE)"``), written upwards over
    the narrow bars beside BALROG's published ones.
    """

    groups: list[str]
    tick_labels: list[str]
    run_values: list[tuple[float, float]]
    references: list[tuple[str, dict[str, float | None]]]
    title: str
    comparable: bool
    protocol: str
    counts: list[int] = field(default_factory=list)
    se_shown: list[bool] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    match_envs: list[str] = field(default_factory=list)
    subtitle: str = ""
    one_line_notes: list[str] = field(default_factory=list)


def _value(figures: Mapping[str, Any]) -> tuple[float, float]:
    pct = figures.get("progression_percentage")
    se = figures.get("standard_error")
    return (float(pct) if pct is not None else 0.0, float(se) if se is not None else 0.0)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _played(figures: Mapping[str, Any]) -> int:
    return int(figures.get("episodes_played") or 0)


def episode_count(figures: Mapping[str, Any]) -> str:
    """``"n=<scored>"`` for a summary (or env/task figures), with ``" of <all>"`` when some of
    its episodes failed and are left out of the bar (``episodes_played``/``episodes_total``)."""
    played = _played(figures)
    total = int(figures.get("episodes_total") or played)
    return f"n={played}" if total <= played else f"n={played} of {total}"


def bar_note(figures: Mapping[str, Any], *, se_shown: bool | None = None,
             one_line: bool = False) -> str:
    """The label of one bar: ``"<pct> ± <SE>"`` and ``n``, or ``"<pct>"`` and ``"n=1, no SE"``
    when the SE is not shown (``se_shown``; default: ``n >= 2``), or ``"no scored episode"``.
    Two lines (for vertical bars), or one with ``one_line``: ``"50.0 ± 10.2 (n=4)"``."""
    pct, se = _value(figures)
    count = episode_count(figures)
    if _played(figures) == 0:
        return f"no scored episode ({count})" if one_line else f"no scored\nepisode\n({count})"
    shown = _played(figures) >= 2 if se_shown is None else se_shown
    value, tail = (f"{pct:.1f} ± {se:.1f}", count) if shown else (f"{pct:.1f}",
                                                                     f"{count}, no SE")
    return f"{value} ({tail})" if one_line else f"{value}\n{tail}"


def protocol_title(protocol: Mapping[str, Any] | None) -> str:
    """The plot title for a summary's ``protocol`` section (None or {}: Moria's own), e.g.
    ``"BALROG protocol, BALROG commit abc123def456; protocol-check: passed"`` or
    ``"Moria protocol — not comparable with the BALROG leaderboard"``."""
    protocol = protocol or {}
    name = str(protocol.get("name") or DEFAULT_PROTOCOL)
    if name == "balrog":
        status = (protocol.get("protocol_check") or {}).get("status") or NOT_CHECKED
        return (f"BALROG protocol, BALROG commit {commit_label(protocol.get('balrog_commit'))}; "
                f"protocol-check: {status}")
    return NOT_COMPARABLE.format(name=_protocol_words(name))


def _protocol_words(name: str) -> str:
    return _PROTOCOL_WORDS.get(name, f"{name} protocol")


def _agent_types(agent: Any) -> list[str]:
    configs = agent if isinstance(agent, list) else [agent]
    types: list[str] = []
    for config in configs:
        kind = config.get("type") if isinstance(config, Mapping) else None
        if kind and str(kind) not in types:
            types.append(str(kind))
    return types


def players_text(summary: Mapping[str, Any]) -> str:
    """Who played, from a summary: the seats' players of multi-agent games (``"players: rl,
    random, scripted"``), else ``"model: local/m (naive agent)"``, several models joined by
    ", ", or ``"player: dummy (no model)"`` when no model was called."""
    seats = [str(p) for p in (summary.get("seat_players") or [])]
    if seats:
        return f"player{'s' if len(seats) > 1 else ''}: {', '.join(seats)}"
    models = [str(m) for m in (summary.get("models") or {})]
    types = _agent_types(summary.get("agent"))
    agents = ", ".join(types)
    if models:
        return f"model: {', '.join(models)}" + (f" ({agents} agent)" if agents else "")
    return f"player: {agents or 'unknown'} (no model)"


def run_subtitle(summary: Mapping[str, Any]) -> str:
    """The title's second line: ``"n=<scored> episodes · <players_text>"``, or ``"n=<scored>
    scored episodes of <all> · ..."`` when some failed."""
    played = _played(summary)
    total = int(summary.get("episodes_total") or played)
    count = (f"n={played} episode{'' if played == 1 else 's'}" if total <= played
             else f"n={played} scored episode{'' if played == 1 else 's'} of {total}")
    return f"{count} · {players_text(summary)}"


def match_envs(summary: Mapping[str, Any]) -> list[str]:
    """The envs of ``summary`` drawn as W/D/L panels: those with rows in ``matches``."""
    matches = summary.get("matches") or {}
    return [env for env in (summary.get("environments") or {}) if matches.get(env)]


def _references(envs: list[str]) -> list[tuple[str, dict[str, float | None]]]:
    # Published averages over the same envs as this run (the six-env average is only
    # comparable with a run of all six).
    return [(model, {**figures, "average": _mean([figures[e] for e in envs if e in figures])})
            for model, figures in PUBLISHED.items()]


def _average(summary: Mapping[str, Any], envs: dict[str, Any], whole_run: bool
             ) -> dict[str, Any]:
    """The average group's figures: the summary's own when ``envs`` are all its envs, else
    recomputed over ``envs`` the same way (mean of the env percentages; sqrt(sum SE^2) / k)."""
    scored = [f for f in envs.values() if f.get("progression_percentage") is not None]
    figures: dict[str, Any] = {
        "episodes_played": sum(_played(f) for f in envs.values()),
        "episodes_total": sum(int(f.get("episodes_total") or _played(f)) for f in envs.values()),
    }
    if whole_run:
        figures["progression_percentage"] = summary.get("average_progress")
        figures["standard_error"] = summary.get("standard_error")
    elif scored:
        figures["progression_percentage"] = _mean([float(f["progression_percentage"])
                                                   for f in scored])
        figures["standard_error"] = math.sqrt(sum(float(f.get("standard_error") or 0.0) ** 2
                                                  for f in scored)) / len(scored)
    return figures


def progress_layout(summary: Mapping[str, Any]) -> ProgressLayout:
    """Decide the env panel of ``progress.png`` for ``summary`` (the ``summary.json`` document):
    groups (single-agent envs; multi-agent ones go to ``match_envs``), ``n=`` labels, values,
    bar notes, and BALROG's published series only when the summary's ``protocol.name`` is
    ``"balrog"``. Raises ``ValueError`` when there are no environments."""
    all_envs: dict[str, Any] = dict(summary.get("environments") or {})
    if not all_envs:
        raise ValueError("the summary has no environments to plot")
    matched = match_envs(summary)
    envs = {env: figures for env, figures in all_envs.items() if env not in matched}
    groups = list(envs)
    figures_of = list(envs.values())
    se_shown = [_played(f) >= 2 for f in figures_of]
    if len(envs) > 1:
        groups.append("average")
        figures_of.append(_average(summary, envs, whole_run=not matched))
        scored = [f for f in envs.values() if _played(f) > 0]
        se_shown.append(bool(scored) and all(_played(f) >= 2 for f in scored))
    protocol = summary.get("protocol") or {}
    comparable = protocol.get("name") == "balrog"
    return ProgressLayout(
        groups, [f"{group}\n({episode_count(f)})" for group, f in zip(groups, figures_of,
                                                                     strict=True)],
        [_value(f) for f in figures_of], _references(list(envs)) if comparable else [],
        protocol_title(protocol), comparable,
        _protocol_words(str(protocol.get("name") or DEFAULT_PROTOCOL)),
        counts=[_played(f) for f in figures_of], se_shown=se_shown,
        notes=[bar_note(f, se_shown=shown) for f, shown in zip(figures_of, se_shown,
                                                               strict=True)],
        match_envs=matched, subtitle=run_subtitle(summary),
        one_line_notes=[bar_note(f, se_shown=shown, one_line=True)
                        for f, shown in zip(figures_of, se_shown, strict=True)])


def _single_tasks(summary: Mapping[str, Any], envs: list[str]
                  ) -> list[tuple[str, str, Mapping[str, Any]]]:
    environments = summary.get("environments") or {}
    return [(env, task, figures) for env in envs
            for task, figures in ((environments.get(env) or {}).get("tasks") or {}).items()]


def _new_figure(**kwargs: Any) -> Figure:
    """A matplotlib Figure of its own, outside pyplot (no GUI backend, no global figure list:
    importing pyplot took longer than drawing a figure), drawn on an Agg canvas."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(**kwargs)
    FigureCanvasAgg(figure)  # attaches itself as figure.canvas
    return figure


def warm_up() -> None:
    """Import matplotlib and load its fonts by drawing a tiny figure (no file written): the
    first figure of a process pays about 0.4 s for these, a run's end then draws in a third of
    the time. Safe to run in a thread beside a run: it shares no figure."""
    fig = _new_figure(figsize=(2, 1), layout="constrained")
    ax = fig.add_subplot()
    ax.set_title("warm-up")
    ax.barh([0], [1.0])
    ax.text(0.0, 0.0, "n=1")
    fig.canvas.draw()


class PlotWarmup:
    """An event sink (``orchestrator.core.events.EventSink``) that runs ``warm_up`` in a thread
    once the run has started (its ``run_started`` event, after the preflight), while the
    episodes play. Call ``wait`` before drawing the run's figures; a failed warm-up is logged
    at debug level and changes nothing else.

    The thread is not a daemon: a process that ends while it draws (a run stopped by a failed
    local server a moment after its start) waits for it, about a second. A daemon thread would
    be ended inside matplotlib's C++ code at interpreter exit, which aborts the process
    ("terminate called without an active exception", exit -6) instead of its own exit code."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None

    def __call__(self, event: Any) -> None:
        if event.kind == "run_started" and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="moria-plot-warmup",
                                            daemon=False)
            self._thread.start()

    @staticmethod
    def _run() -> None:
        try:
            warm_up()
        except Exception:  # a warm-up only saves time; drawing reports errors
            log.debug("plot warm-up failed", exc_info=True)

    def wait(self, timeout_s: float = 30.0) -> None:
        """Return once the warm-up thread (if one started) has ended, or after ``timeout_s``."""
        if self._thread is not None:
            self._thread.join(timeout_s)


def _bars_height(rows: int) -> float:
    return ROW_INCHES * max(rows, 1) + 1.6


def progress_figure(summary: Mapping[str, Any], *, label: str = "this run") -> Figure:
    """The ``progress.png`` figure of ``summary`` (see the module docstring and
    ``progress_layout``). The first axes is the env panel when the run
    has a single-agent env. Raises ``ValueError`` when the summary has no environments."""
    layout = progress_layout(summary)
    single = [g for g in layout.groups if g != "average"]
    tasks = _single_tasks(summary, single)
    inline = 0 < len(tasks) <= MAX_INLINE_TASKS
    matches = summary.get("matches") or {}
    heights: list[float] = []
    if single:
        heights.append(max(4.8, _bars_height(len(tasks)) if inline else 0.0))
    heights += [max(2.4, _bars_height(len(matches[env])) + 0.4) for env in layout.match_envs]
    fig = _new_figure(figsize=(15, sum(heights) + 1.0), layout="constrained")
    fig.suptitle(f"{layout.title}\n{layout.subtitle}")
    grid = fig.add_gridspec(len(heights), 2, height_ratios=heights, width_ratios=[2, 3])
    row = 0
    if single:
        ax_env = fig.add_subplot(grid[0, 0] if inline else grid[0, :])
        _draw_envs(ax_env, layout, label, len(single))
        if inline:
            _draw_tasks(fig.add_subplot(grid[0, 1]), tasks, with_env=len(single) > 1)
            ax_env.set_title("Per environment (error bars: standard error, when n ≥ 2)")
        else:
            ax_env.set_title(f"Per environment (error bars: standard error, when n ≥ 2). "
                             f"{len(tasks)} tasks: see <env>/<env>_progress.png for each env")
        row = 1
    for env in layout.match_envs:
        _draw_matches(fig.add_subplot(grid[row, :]), env, matches[env])
        row += 1
    return fig


def env_figure(summary: Mapping[str, Any], env: str) -> Figure:
    """The ``<env>/<env>_progress.png`` figure of ``env`` in ``summary``: its per-task bars
    (full task names, the height grown with their number), or its W/D/L panel when ``env`` is a
    multi-agent env with match rows. Raises ``ValueError`` when the
    summary has no such env."""
    figures = (summary.get("environments") or {}).get(env)
    if figures is None:
        raise ValueError(f"the summary has no environment {env!r}")
    rows = (summary.get("matches") or {}).get(env) or []
    count = len(rows) if rows else len(figures.get("tasks") or {})
    fig = _new_figure(figsize=(12, _bars_height(count) + 1.2), layout="constrained")
    protocol = protocol_title(summary.get("protocol"))
    env_summary = {**summary, **{k: figures.get(k) for k in ("episodes_played", "episodes_total",
                                                             "models", "seat_players")}}
    fig.suptitle(f"{env}: wins, draws and losses" if rows else
                 f"{env}: progression % per task (the env: {bar_note(figures, one_line=True)})",
                 fontsize=12)
    ax = fig.add_subplot()
    if rows:
        _draw_matches(ax, env, rows)
    else:
        _draw_tasks(ax, _single_tasks(summary, [env]), with_env=False)
    ax.set_title(f"{protocol}\n{run_subtitle(env_summary)}", fontsize=9)
    return fig


def _draw_envs(ax: Axes, layout: ProgressLayout, label: str, env_count: int) -> None:
    width = 0.8 / (1 + len(layout.references))
    labelled = False
    # beside published bars a run's bar is narrow: its label is written upwards on one line
    upright = {"rotation": 90, "fontsize": 7.5} if layout.references else {"fontsize": 8}
    notes = layout.one_line_notes if layout.references else layout.notes
    for g, group in enumerate(layout.groups):
        pct, se = layout.run_values[g]
        shown = layout.se_shown[g]
        if layout.counts[g] == 0:
            ax.annotate(notes[g], (g, 0), xytext=(0, 3), textcoords="offset points",
                        ha="center", va="bottom", color="dimgray", **upright)
        else:
            ax.bar(g, pct, width, yerr=se if shown else None, capsize=3, color=RUN_COLOUR,
                   label=None if labelled else f"{label} ({layout.protocol})")
            labelled = True
            if pct == 0:  # a zero bar: a thick line on the axis, so it is seen
                ax.hlines(0, g - width / 2, g + width / 2, colors=RUN_COLOUR, linewidth=4,
                          clip_on=False, zorder=3)
            ax.annotate(notes[g], (g, min(pct + (se if shown else 0.0), 100)),
                        xytext=(0, 3), textcoords="offset points", ha="center", va="bottom",
                        color=RUN_COLOUR, **upright)
        for r, (model, figures) in enumerate(layout.references):
            value = figures.get(group if g < env_count else "average")
            if value is None:
                continue
            ax.bar(g + (r + 1) * width, value, width,
                   color=REFERENCE_COLOURS[r % len(REFERENCE_COLOURS)],
                   label=f"{model} (published)" if g == 0 else None)
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(layout.groups))], layout.tick_labels)
    ax.set_xlim(-0.6, len(layout.groups) - 0.4 + (0.8 - width if layout.references else 0))
    ax.set_ylabel("progression %")
    ax.set_ylim(0, 145 if layout.references else 118)  # room for the labels over 100
    ax.set_yticks(range(0, 101, 20))
    if labelled or layout.references:
        ax.legend(fontsize=8, loc="upper center", ncol=3, bbox_to_anchor=(0.5, -0.16))
    ax.grid(axis="y", alpha=0.3)


def _draw_tasks(ax: Axes, tasks: list[tuple[str, str, Mapping[str, Any]]], *,
                with_env: bool) -> None:
    """One horizontal bar per task, top to bottom in the summary's order, with its full name
    (``env: task`` when ``with_env``) and its label (``bar_note``)."""
    names = [f"{env}: {task}" if with_env else task for env, task, _ in tasks]
    positions = list(range(len(tasks)))[::-1]
    for position, (_, _, figures) in zip(positions, tasks, strict=True):
        pct, se = _value(figures)
        shown = _played(figures) >= 2
        note = bar_note(figures, one_line=True)
        if _played(figures) == 0:
            ax.text(1, position, note, va="center", fontsize=8, color="dimgray")
            continue
        ax.barh(position, pct, height=0.7, xerr=se if shown else None, capsize=2,
                color=RUN_COLOUR)
        if pct == 0:  # a zero bar: a thick line on the axis, so it is seen
            ax.vlines(0, position - 0.35, position + 0.35, colors=RUN_COLOUR, linewidth=4,
                      clip_on=False, zorder=3)
        ax.text(pct + (se if shown else 0.0) + 1.5, position, note, va="center", fontsize=8,
                color=RUN_COLOUR)
    ax.set_yticks(positions, names, fontsize=8)
    ax.set_ylim(-0.6, max(len(tasks), 1) - 0.4)
    ax.set_xlim(0, 135)
    ax.set_xticks(range(0, 101, 20))
    ax.set_xlabel("progression %")
    ax.set_title("Per task (this run)")
    ax.grid(axis="x", alpha=0.3)


def match_note(row: Mapping[str, Any]) -> str:
    """The label of one team's or seat's bar: ``"W/D/L 2/0/2 · win rate 50% · n=4"`` (with
    ``· 1 unfinished`` when the step cap stopped games), then the game's figures when the row
    has them (goals for and against per episode, illegal moves)."""
    parts = ["W/D/L " + "/".join(str(int(row.get(k) or 0)) for k in _OUTCOME_LETTERS)]
    if row.get("unfinished"):
        parts.append(f"{int(row['unfinished'])} unfinished")
    if row.get("win_rate") is not None:
        parts.append(f"win rate {float(row['win_rate']):.0%}")
    parts.append(f"n={int(row.get('episodes') or 0)}")
    if row.get("goals_for") is not None:
        against = float(row.get("goals_against") or 0.0)
        parts.append(f"goals per episode: {float(row['goals_for']):.2f} for, {against:.2f} "
                     "against")
    if row.get("illegal_moves"):
        parts.append(f"illegal moves {row['illegal_moves']}")
    return " · ".join(parts)


def _draw_matches(ax: Axes, env: str, rows: list[Mapping[str, Any]]) -> None:
    """One stacked horizontal bar per team or seat (``orchestrator.report.match_report`` rows):
    wins, draws, losses, labelled with ``match_note``."""
    from matplotlib.patches import Patch

    several_tasks = len({row.get("task") for row in rows}) > 1
    names = [(f"{row.get('task')} · " if several_tasks else "")
             + f"{row.get('side', '?')} ({row.get('lineup', '?')})" for row in rows]
    positions = list(range(len(rows)))[::-1]
    most = max([int(row.get("episodes") or 0) for row in rows] + [1])
    for position, row in zip(positions, rows, strict=True):
        left = 0.0
        for outcome, colour in OUTCOME_COLOURS.items():
            count = int(row.get(outcome) or 0)
            if count:
                ax.barh(position, count, left=left, height=0.6, color=colour,
                        edgecolor="#616161", hatch="//" if outcome == "unfinished" else None)
            left += count
        ax.text(left + most * 0.02, position, match_note(row), va="center", fontsize=8)
    ax.set_yticks(positions, names, fontsize=8)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlim(0, most * 2.2)
    ax.set_xticks(range(0, most + 1, max(1, math.ceil(most / 10))))
    ax.set_xlabel("episodes")
    team = any("goals_for" in row for row in rows)
    ax.set_title(f"{env}: wins, draws and losses per {'team' if team else 'seat'} "
                 "(progression not drawn: it is one seat's view)")
    ax.legend([Patch(facecolor=colour, edgecolor="#616161",
                     hatch="//" if outcome == "unfinished" else None)
               for outcome, colour in OUTCOME_COLOURS.items()],
              list(OUTCOME_COLOURS), fontsize=8, loc="lower right")
    ax.grid(axis="x", alpha=0.3)


def _save(fig: Figure, out: Path) -> None:
    with atomic_path(out) as partial:  # a reader never sees half a picture
        fig.savefig(partial, dpi=100, format="png")  # the temp name's suffix is .tmp


def env_figure_path(out_dir: str | Path, env: str) -> Path:
    """Where ``plot_progress`` writes ``env``'s figure: ``<out_dir>/<env>/<env>_progress.png``
    (names flattened as the result files are, ``orchestrator.store.episodes.safe_name``)."""
    return Path(out_dir) / safe_name(env) / f"{safe_name(env)}_progress.png"


def plot_progress(summary: Mapping[str, Any], path: str | Path, *, label: str = "this run",
                  per_env: bool = True) -> Path:
    """Draw ``summary`` (the ``summary.json`` document) to ``path`` (PNG) and return the path;
    with ``per_env``, also each env's figure (``env_figure``) to ``env_figure_path(<path's
    folder>, env)``, after ``path``.

    BALROG's published bars are drawn only for a run made under BALROG's protocol
    (``summary["protocol"]["name"] == "balrog"``; see ``progress_layout``). Every file is
    replaced atomically. Raises ``ValueError`` when the summary has no environments,
    ``OSError`` when a file cannot be written.
    """
    out = Path(path)
    _save(progress_figure(summary, label=label), out)
    if per_env:
        for env in summary.get("environments") or {}:
            _save(env_figure(summary, env), env_figure_path(out.parent, env))
    return out
