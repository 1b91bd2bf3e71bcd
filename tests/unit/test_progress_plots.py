"""``progress.png`` and the per-env figures (orchestrator.report.plots), checked on the figure's
matplotlib artists: zero bars are drawn, one episode says ``n=1, no SE`` and has no error bar,
every bar names its ``n``, a suite's tasks go to per-env figures with whole names, multi-agent
games show wins/draws/losses per side, and the title gives n, the players and the protocol."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest
from matplotlib.collections import LineCollection
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.figure import Figure

from moria.records import EpisodeRecord
from orchestrator.report.plots import (
    MAX_INLINE_TASKS,
    ROW_INCHES,
    env_figure,
    env_figure_path,
    plot_progress,
    progress_figure,
    progress_layout,
)
from orchestrator.report.summary import compute_summary

NAIVE = {"type": "naive"}
MODEL_USAGE = {"openai/gpt-4o": {"calls": 3, "input_tokens": 30, "output_tokens": 3,
                                 "cached_input_tokens": 0, "reasoning_tokens": 0,
                                 "latency_s": 1.0}}


def record(env: str, task: str, index: int, progression: float, **extra: Any) -> EpisodeRecord:
    return EpisodeRecord(run_id="r", env=env, task=task, episode_index=index, seed=index,
                         end_reason="terminated", progression=progression, num_steps=3,
                         agent_config=NAIVE, **extra)


@pytest.fixture
def figures() -> Iterator[list[Figure]]:
    """Figures a test makes; closed after it."""
    made: list[Figure] = []
    yield made
    for fig in made:
        plt.close(fig)


def texts(fig: Figure) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def _error_bars(ax: Any) -> list[ErrorbarContainer]:
    return [c for c in ax.containers if isinstance(c, ErrorbarContainer)]


def _bars(ax: Any) -> list[Any]:
    return [patch for c in ax.containers if isinstance(c, BarContainer) for patch in c]


def test_one_zero_episode_is_drawn_and_says_n1_no_se(figures: list[Figure]) -> None:
    summary = compute_summary([record("babyai", "BabyAI-MixedTrainLocal-v0/goto", 0, 0.0)])
    fig = progress_figure(summary)
    figures.append(fig)
    ax_env, ax_task = fig.axes
    assert len(_bars(ax_env)) == 1 and len(_bars(ax_task)) == 1
    assert _error_bars(ax_env) == [] and _error_bars(ax_task) == []  # no zero-width bar
    assert [t.get_text() for t in ax_env.texts] == ["0.0\nn=1, no SE"]
    assert [t.get_text() for t in ax_task.texts] == ["0.0 (n=1, no SE)"]
    # the zero bars are drawn as thick lines on the axis, outside the clip
    for ax in (ax_env, ax_task):
        marks = [c for c in ax.collections if isinstance(c, LineCollection)]
        assert marks and all(not m.get_clip_on() for m in marks)
    assert [t.get_text() for t in ax_task.get_yticklabels()] == [
        "BabyAI-MixedTrainLocal-v0/goto"]


def test_every_bar_names_its_n_and_se_only_from_two_episodes(figures: list[Figure]) -> None:
    episodes = [record("babyai", "goto", i, p) for i, p in enumerate([1.0, 0.0, 1.0, 0.5])]
    episodes += [record("crafter", "default", 0, 0.25)]
    summary = compute_summary(episodes)
    layout = progress_layout(summary)
    assert layout.groups == ["babyai", "crafter", "average"]
    assert layout.counts == [4, 1, 5]
    assert layout.se_shown == [True, False, False]  # the average leans on crafter's n=1
    assert layout.notes[0].startswith("62.5 ± ") and layout.notes[0].endswith("\nn=4")
    assert layout.notes[1:] == ["25.0\nn=1, no SE", "43.8\nn=5, no SE"]
    fig = progress_figure(summary)
    figures.append(fig)
    ax_env, ax_task = fig.axes
    assert len(_bars(ax_env)) == 3 and len(_error_bars(ax_env)) == 1
    assert [t.get_text() for t in ax_env.texts] == layout.notes
    assert len(_bars(ax_task)) == 2 and len(_error_bars(ax_task)) == 1
    babyai, crafter = (t.get_text() for t in ax_task.texts)
    assert babyai.startswith("62.5 ± ") and babyai.endswith(" (n=4)")
    assert crafter == "25.0 (n=1, no SE)"


def test_title_gives_protocol_n_model_and_agent(figures: list[Figure]) -> None:
    summary = compute_summary([record("babyai", "goto", 0, 1.0, usage_by_model=MODEL_USAGE)])
    fig = progress_figure(summary)
    figures.append(fig)
    assert fig.get_suptitle().splitlines() == [
        "Moria protocol — not comparable with the BALROG leaderboard",
        "n=1 episode · model: openai/gpt-4o (naive agent)"]


SUITE_TASKS = {"babyai": 5, "crafter": 1, "textworld": 3, "babaisai": 40, "minihack": 5,
               "nle": 1}


def suite_summary() -> dict[str, Any]:
    long = "-distr_obj-irrelevant_rule-and-a-long-tail-that-must-not-be-cut"
    return compute_summary([
        record(env, f"env/{env}_task_{n}{long if n % 7 == 0 else ''}", 0, (n % 3) / 2)
        for env, count in SUITE_TASKS.items() for n in range(count)])


def test_a_suite_moves_its_tasks_to_per_env_figures(figures: list[Figure]) -> None:
    summary = suite_summary()
    assert sum(SUITE_TASKS.values()) > MAX_INLINE_TASKS
    fig = progress_figure(summary)
    figures.append(fig)
    assert len(fig.axes) == 1  # the env panel alone, pointing at the per-env figures
    assert "<env>/<env>_progress.png" in fig.axes[0].get_title()
    assert len(_bars(fig.axes[0])) == len(SUITE_TASKS) + 1  # and the average
    babaisai = env_figure(summary, "babaisai")
    figures.append(babaisai)
    (ax,) = babaisai.axes
    names = [t.get_text() for t in ax.get_yticklabels()]
    assert names == list(summary["environments"]["babaisai"]["tasks"])  # whole, in order
    assert len(names) == 40 and len(_bars(ax)) == 40
    assert babaisai.get_figheight() >= 40 * ROW_INCHES
    babaisai.canvas.draw()
    renderer = babaisai.canvas.get_renderer()  # type: ignore[attr-defined]
    width = babaisai.bbox.width
    for label in ax.get_yticklabels():  # every name fits inside the picture
        box = label.get_window_extent(renderer)
        assert box.x0 >= 0 and box.x1 <= width, label.get_text()
    assert texts(babaisai).count("0.0 (n=1, no SE)") == 14


def teams(green: str, blue: str, goals: tuple[int, int]) -> dict[str, Any]:
    return {"green": {"agents": ["agent_0", "agent_1"], "outcome": green,
                      "goals_for": goals[0], "goals_against": goals[1]},
            "blue": {"agents": ["agent_2", "agent_3"], "outcome": blue,
                     "goals_for": goals[1], "goals_against": goals[0]}}


def multi_agent_summary() -> dict[str, Any]:
    players = {a: {"player": "naive/openai/gpt-4o" if a in ("agent_0", "agent_1") else "dummy"}
               for a in ("agent_0", "agent_1", "agent_2", "agent_3")}
    soccer = [record("multigrid", "MosaicMultiGrid-S-2v2-IndAgObs-v1", i, 0.5, players=players,
                     stats={"teams": teams(*result)})
              for i, result in enumerate([("win", "loss", (2, 1)), ("draw", "draw", (0, 0)),
                                          ("win", "loss", (1, 0))])]
    seats = {"player_1": {"player": "naive/openai/gpt-4o"}, "player_2": {"player": "dummy"}}
    board = [record("pettingzoo", "tictactoe_v3", i, 1.0, players=seats,
                    stats={"outcome": {"player_1": a, "player_2": b}, "moves": 7})
             for i, (a, b) in enumerate([("win", "loss"), ("loss", "win")])]
    return compute_summary(soccer + board + [record("babyai", "goto", 0, 1.0)])


def test_multi_agent_games_show_wins_draws_losses_per_side(figures: list[Figure]) -> None:
    summary = multi_agent_summary()
    layout = progress_layout(summary)
    assert layout.match_envs == ["multigrid", "pettingzoo"]
    assert layout.groups == ["babyai"]  # no seat's progression, no average over them
    fig = progress_figure(summary)
    figures.append(fig)
    _, _, ax_soccer, ax_board = fig.axes
    assert [t.get_text() for t in ax_soccer.get_yticklabels()] == [
        "blue (agent_2: dummy, agent_3: dummy)",
        "green (agent_0: naive/openai/gpt-4o, agent_1: naive/openai/gpt-4o)"]
    soccer = [t.get_text() for t in ax_soccer.texts]
    assert sorted(soccer) == [
        "W/D/L 0/1/2 · win rate 17% · n=3 · goals per episode: 0.33 for, 1.00 against",
        "W/D/L 2/1/0 · win rate 83% · n=3 · goals per episode: 1.00 for, 0.33 against"]
    assert "per team" in ax_soccer.get_title()
    assert [t.get_text() for t in ax_board.texts] == ["W/D/L 1/0/1 · win rate 50% · n=2"] * 2
    assert "per seat" in ax_board.get_title()
    legend = ax_soccer.get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == ["wins", "draws", "losses",
                                                          "unfinished"]
    soccer_fig = env_figure(summary, "multigrid")
    figures.append(soccer_fig)
    assert len(soccer_fig.axes) == 1 and "W/D/L 2/1/0" in texts(soccer_fig)[0] + texts(
        soccer_fig)[1]


def test_mixed_seats_are_named_and_unfinished_games_drawn_apart(figures: list[Figure]) -> None:
    seats = {"agent_0": {"player": "rl"}, "agent_1": {"player": "scripted"},
             "agent_2": {"player": "random"}, "agent_3": {"player": "random"}}
    soccer = [record("multigrid", "MosaicMultiGrid-S-2v2-IndAgObs-v1", 0, 0.5, players=seats,
                     stats={"teams": teams("win", "loss", (1, 0))})]
    pair = {"player_0": {"player": "rl"}, "player_1": {"player": "random"}}
    board = [record("pettingzoo", "connect_four_v3", i, 0.0, players=pair,
                    stats={"outcome": {"player_0": "unfinished", "player_1": "unfinished"}})
             for i in range(2)]
    summary = compute_summary(soccer + board)
    fig = env_figure(summary, "multigrid")
    figures.append(fig)
    subtitle = fig.axes[0].get_title()
    assert subtitle.endswith("players: random, rl, scripted"), subtitle
    assert "no model" not in subtitle and "naive" not in subtitle
    board_fig = env_figure(summary, "pettingzoo")
    figures.append(board_fig)
    assert texts(board_fig) == ["W/D/L 0/0/0 · 2 unfinished · n=2"] * 2


def test_plot_progress_writes_the_summary_and_each_env_figure(tmp_path: Path) -> None:
    summary = multi_agent_summary()
    path = plot_progress(summary, tmp_path / "progress.png")
    written = [path, *(env_figure_path(tmp_path, env) for env in summary["environments"])]
    assert [p.relative_to(tmp_path).as_posix() for p in written] == [
        "progress.png", "babyai/babyai_progress.png", "multigrid/multigrid_progress.png",
        "pettingzoo/pettingzoo_progress.png"]
    for picture in written:
        assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.rglob("*.tmp"))


def test_plot_warmup_starts_once_at_run_start() -> None:
    from types import SimpleNamespace

    from orchestrator.report.plots import PlotWarmup

    warmup = PlotWarmup()
    warmup(SimpleNamespace(kind="step"))
    assert warmup._thread is None  # only the run's start starts it
    warmup(SimpleNamespace(kind="run_started"))
    thread = warmup._thread
    assert thread is not None
    warmup(SimpleNamespace(kind="run_started"))
    assert warmup._thread is thread  # once per run
    warmup.wait()
    assert not thread.is_alive()


@pytest.mark.slow
def test_a_process_that_exits_while_the_warmup_draws_keeps_its_exit_code() -> None:
    """A run stopped right after its start (a local server killed) ends its process while the
    warm-up may still be inside matplotlib's C++ code: the process must still exit with its own
    code (1 here), not abort with -6 ("terminate called without an active exception"), which a
    daemon warm-up thread caused in 2 of 4 runs and again in 2 of 6 of this same script."""
    import subprocess
    import sys

    script = (
        "import sys, threading, time\n"
        "from types import SimpleNamespace\n"
        "from orchestrator.report import plots\n"
        "warmed, real = threading.Event(), plots.warm_up\n"
        "def drawing():\n"
        "    real()  # matplotlib imported: what follows is drawing, much of it in C++\n"
        "    warmed.set()\n"
        "    for _ in range(6):\n"
        "        real()\n"
        "plots.warm_up = drawing\n"
        "plots.PlotWarmup()(SimpleNamespace(kind='run_started'))\n"
        "warmed.wait()\n"
        "time.sleep(0.3)  # into the next draw (no outcome depends on how far)\n"
        "sys.exit(1)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 1, done.stderr[-2000:]
    assert "terminate called" not in done.stderr
