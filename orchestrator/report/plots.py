"""``progress.png``: a run's progression per env and per task, and, for runs made under BALROG's
prompting protocol only, BALROG's published numbers beside them.

Left panel: one group of bars per environment (and their average when there are several): this
run's progression % with its standard error as an error bar; every x label gives the episodes
behind the bar (``n=``). When the summary's ``protocol`` section names ``balrog``, the published
figures of the reference models in :data:`orchestrator.suites.balrog.PUBLISHED` (LLM mode, naive
agent,
16-step history; their average recomputed over the same envs as the run) stand beside each bar
and the title names the BALROG commit. Any other protocol (Moria's own, a mix, or a summary
without the section) draws the run alone, titled as not comparable with BALROG's leaderboard.
Right panel: this run's progression % ± SE per task, one horizontal bar per task. Drawn with
matplotlib's non-interactive Agg backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from moria.files import atomic_path
from orchestrator.report.tables import commit_label
from orchestrator.store.records import DEFAULT_PROTOCOL
from orchestrator.suites.balrog import PUBLISHED

if TYPE_CHECKING:
    from matplotlib.figure import Figure

RUN_COLOUR = "#1f4e79"
REFERENCE_COLOURS = ["#c9c9c9", "#b0b0b0", "#969696", "#7d7d7d", "#646464"]
#: Title of a plot whose run was not made under BALROG's protocol (``name`` is the protocol).
NOT_COMPARABLE = "{name} — not comparable with the BALROG leaderboard"
_PROTOCOL_WORDS = {"balrog": "BALROG protocol", "moria": "Moria protocol",
                   "mixed": "Mixed prompting protocols"}


@dataclass(frozen=True)
class ProgressLayout:
    """What the env panel of ``progress.png`` shows, decided from a summary alone.

    ``groups``: the env names (plus ``"average"`` for several envs); ``tick_labels``: the same
    with the episode count, e.g. ``"babyai\\n(n=50)"``; ``run_values``: (percent, SE) per group;
    ``references``: (model, {group: published percent}) pairs, empty unless ``comparable``;
    ``title``: the figure title naming the protocol; ``comparable``: True only for a run made
    under BALROG's protocol (``summary["protocol"]["name"] == "balrog"``); ``protocol``: the
    protocol in words for the run's legend entry (``"BALROG protocol"``, ``"Moria protocol"``,
    ``"Mixed prompting protocols"``).
    """

    groups: list[str]
    tick_labels: list[str]
    run_values: list[tuple[float, float]]
    references: list[tuple[str, dict[str, float | None]]]
    title: str
    comparable: bool
    protocol: str


def _value(figures: Mapping[str, Any]) -> tuple[float, float]:
    pct = figures.get("progression_percentage")
    se = figures.get("standard_error")
    return (float(pct) if pct is not None else 0.0, float(se) if se is not None else 0.0)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def episode_count(figures: Mapping[str, Any]) -> str:
    """``"n=<scored>"`` for a summary (or env/task figures), with ``" of <all>"`` when some of
    its episodes failed and are left out of the bar (``episodes_played``/``episodes_total``)."""
    played = int(figures.get("episodes_played") or 0)
    total = int(figures.get("episodes_total") or played)
    return f"n={played}" if total <= played else f"n={played} of {total}"


def protocol_title(protocol: Mapping[str, Any] | None) -> str:
    """The plot title for a summary's ``protocol`` section (None or {}: Moria's own), e.g.
    ``"BALROG protocol, BALROG commit abc123def456; protocol-check: passed"`` or
    ``"Moria protocol — not comparable with the BALROG leaderboard"``."""
    protocol = protocol or {}
    name = str(protocol.get("name") or DEFAULT_PROTOCOL)
    if name == "balrog":
        status = (protocol.get("protocol_check") or {}).get("status") or "not run"
        return (f"BALROG protocol, BALROG commit {commit_label(protocol.get('balrog_commit'))}; "
                f"protocol-check: {status}")
    return NOT_COMPARABLE.format(name=_protocol_words(name))


def _protocol_words(name: str) -> str:
    return _PROTOCOL_WORDS.get(name, f"{name} protocol")


def _references(envs: list[str]) -> list[tuple[str, dict[str, float | None]]]:
    # Published averages over the same envs as this run (the six-env average is only
    # comparable with a run of all six).
    return [(model, {**figures, "average": _mean([figures[e] for e in envs if e in figures])})
            for model, figures in PUBLISHED.items()]


def progress_layout(summary: Mapping[str, Any]) -> ProgressLayout:
    """Decide the env panel of ``progress.png`` for ``summary`` (the ``summary.json`` document):
    groups, ``n=`` labels, values, and BALROG's published series only when the summary's
    ``protocol.name`` is ``"balrog"``. Raises ``ValueError`` when there are no environments."""
    envs: dict[str, Any] = dict(summary.get("environments") or {})
    if not envs:
        raise ValueError("the summary has no environments to plot")
    groups = list(envs)
    labels = [f"{env}\n({episode_count(figures)})" for env, figures in envs.items()]
    values = [_value(figures) for figures in envs.values()]
    if len(envs) > 1:
        groups.append("average")
        labels.append(f"average\n({episode_count(summary)})")
        values.append((float(summary.get("average_progress") or 0.0),
                       float(summary.get("standard_error") or 0.0)))
    protocol = summary.get("protocol") or {}
    comparable = protocol.get("name") == "balrog"
    return ProgressLayout(groups, labels, values, _references(list(envs)) if comparable else [],
                          protocol_title(protocol), comparable,
                          _protocol_words(str(protocol.get("name") or DEFAULT_PROTOCOL)))


def progress_figure(summary: Mapping[str, Any], *, label: str = "this run") -> Figure:
    """The ``progress.png`` figure of ``summary`` (see the module docstring and
    ``progress_layout``); the caller closes it. Raises ``ValueError`` when the summary has no
    environments."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layout = progress_layout(summary)
    envs: dict[str, Any] = dict(summary["environments"])
    tasks = [(env, task, figures) for env, env_figures in envs.items()
             for task, figures in (env_figures.get("tasks") or {}).items()]
    height = max(4.5, 0.28 * len(tasks) + 1.5)
    fig, (ax_env, ax_task) = plt.subplots(
        1, 2, figsize=(15, height), gridspec_kw={"width_ratios": [3, 2]})
    fig.suptitle(layout.title)
    _draw_envs(ax_env, layout, label, len(envs))
    _draw_tasks(ax_task, tasks)
    fig.tight_layout()
    return fig


def _draw_envs(ax: Any, layout: ProgressLayout, label: str, env_count: int) -> None:
    width = 0.8 / (1 + len(layout.references))
    for g, group in enumerate(layout.groups):
        pct, se = layout.run_values[g]
        ax.bar(g, pct, width, yerr=se, capsize=3, color=RUN_COLOUR,
               label=f"{label} ({layout.protocol})" if g == 0 else None)
        ax.annotate(f"{pct:.1f}", (g, min(pct + se, 100)), ha="center", va="bottom",
                    fontsize=8, color=RUN_COLOUR)
        for r, (model, figures) in enumerate(layout.references):
            value = figures.get(group if g < env_count else "average")
            if value is None:
                continue
            ax.bar(g + (r + 1) * width, value, width,
                   color=REFERENCE_COLOURS[r % len(REFERENCE_COLOURS)],
                   label=f"{model} (published)" if g == 0 else None)
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(layout.groups))], layout.tick_labels)
    ax.set_ylabel("progression %")
    ax.set_ylim(0, 105)
    ax.set_title("Per environment (error bars: standard error)")
    ax.legend(fontsize=8, loc="upper center", ncol=3, bbox_to_anchor=(0.5, -0.14))
    ax.grid(axis="y", alpha=0.3)


def _draw_tasks(ax: Any, tasks: list[tuple[str, str, Mapping[str, Any]]]) -> None:
    if tasks:
        names = [f"{env}: {task} ({episode_count(figures)})" for env, task, figures in tasks]
        values = [_value(figures) for _, _, figures in tasks]
        positions = list(range(len(tasks)))[::-1]
        ax.barh(positions, [v[0] for v in values], xerr=[v[1] for v in values], capsize=2,
                color=RUN_COLOUR)
        ax.set_yticks(positions, names, fontsize=7)
        ax.set_xlim(0, 100)
    ax.set_xlabel("progression %")
    ax.set_title("Per task (this run)")
    ax.grid(axis="x", alpha=0.3)


def plot_progress(summary: Mapping[str, Any], path: str | Path, *, label: str = "this run",
                  ) -> Path:
    """Draw ``summary`` (the ``summary.json`` document) to ``path`` (PNG) and return the path.

    BALROG's published bars are drawn only for a run made under BALROG's protocol
    (``summary["protocol"]["name"] == "balrog"``; see ``progress_layout``). Environments without
    scored episodes are drawn as empty bars. The file is replaced atomically. Raises
    ``ValueError`` when the summary has no environments, ``OSError`` when it cannot be written.
    """
    fig = progress_figure(summary, label=label)
    import matplotlib.pyplot as plt

    out = Path(path)
    try:
        with atomic_path(out) as partial:  # a reader never sees half a picture
            fig.savefig(partial, dpi=100, format="png")  # the temp name's suffix is .tmp
    finally:
        plt.close(fig)
    return out
