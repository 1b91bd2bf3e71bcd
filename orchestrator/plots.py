"""``progress.png``: a run's progression per env and per task, next to BALROG's published numbers.

Left panel: one group of bars per environment (and their average when there are several): this
run's progression % with its standard error as an error bar, beside the published figures of the
reference models in :data:`orchestrator.balrog.PUBLISHED` (LLM mode, naive agent, 16-step
history; their average is recomputed over the same envs as the run). Right panel:
this run's progression % ± SE per task, one horizontal bar per task. Drawn with matplotlib's
non-interactive Agg backend.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.balrog import PUBLISHED

RUN_COLOUR = "#1f4e79"
REFERENCE_COLOURS = ["#c9c9c9", "#b0b0b0", "#969696", "#7d7d7d", "#646464"]


def _value(figures: Mapping[str, Any]) -> tuple[float, float]:
    pct = figures.get("progression_percentage")
    se = figures.get("standard_error")
    return (float(pct) if pct is not None else 0.0, float(se) if se is not None else 0.0)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def plot_progress(summary: Mapping[str, Any], path: str | Path, *, label: str = "this run",
                  ) -> Path:
    """Draw ``summary`` (the ``summary.json`` document) to ``path`` (PNG) and return the path.

    Environments without scored episodes are drawn as empty bars. Raises ``ValueError`` when
    the summary has no environments.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs: dict[str, Any] = dict(summary.get("environments") or {})
    if not envs:
        raise ValueError("the summary has no environments to plot")
    groups = [*envs, "average"] if len(envs) > 1 else list(envs)
    run_values = [_value(envs[env]) for env in envs]
    if len(envs) > 1:
        run_values.append((float(summary.get("average_progress") or 0.0),
                           float(summary.get("standard_error") or 0.0)))

    tasks = [(env, task, _value(figures)) for env, env_figures in envs.items()
             for task, figures in (env_figures.get("tasks") or {}).items()]
    height = max(4.5, 0.28 * len(tasks) + 1.5)
    fig, (ax_env, ax_task) = plt.subplots(
        1, 2, figsize=(15, height), gridspec_kw={"width_ratios": [3, 2]})

    # Published averages over the same envs as this run (the six-env average is only
    # comparable with a run of all six).
    references = [(model, {**figures, "average": _mean([figures[e] for e in envs
                                                         if e in figures])})
                  for model, figures in PUBLISHED.items()]
    width = 0.8 / (1 + len(references))
    for g, group in enumerate(groups):
        pct, se = run_values[g]
        ax_env.bar(g, pct, width, yerr=se, capsize=3, color=RUN_COLOUR,
                   label=label if g == 0 else None)
        ax_env.annotate(f"{pct:.1f}", (g, min(pct + se, 100)), ha="center", va="bottom",
                        fontsize=8, color=RUN_COLOUR)
        for r, (model, figures) in enumerate(references):
            value = figures.get(group if g < len(envs) else "average")
            if value is None:
                continue
            ax_env.bar(g + (r + 1) * width, value, width,
                       color=REFERENCE_COLOURS[r % len(REFERENCE_COLOURS)],
                       label=f"{model} (published)" if g == 0 else None)
    ax_env.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))], groups)
    ax_env.set_ylabel("progression %")
    ax_env.set_ylim(0, 105)
    ax_env.set_title("Per environment (error bars: standard error)")
    ax_env.legend(fontsize=8, loc="upper center", ncol=3, bbox_to_anchor=(0.5, -0.08))
    ax_env.grid(axis="y", alpha=0.3)

    if tasks:
        names = [f"{env}: {task}" for env, task, _ in tasks]
        values = [v[0] for _, _, v in tasks]
        errors = [v[1] for _, _, v in tasks]
        positions = list(range(len(tasks)))[::-1]
        ax_task.barh(positions, values, xerr=errors, capsize=2, color=RUN_COLOUR)
        ax_task.set_yticks(positions, names, fontsize=7)
        ax_task.set_xlim(0, 100)
    ax_task.set_xlabel("progression %")
    ax_task.set_title("Per task (this run)")
    ax_task.grid(axis="x", alpha=0.3)

    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial.png")
    fig.savefig(partial, dpi=100)
    plt.close(fig)
    os.replace(partial, out)  # a reader never sees half a picture
    return out
