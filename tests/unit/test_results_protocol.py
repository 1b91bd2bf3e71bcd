"""Unit tests of the prompting protocol in results: the episode field, the summary's
``protocol`` section, the report line and the leaderboard rule of ``progress.png``."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest
from rich.console import Console

from moria.records import EndReason, EpisodeRecord
from orchestrator.report.plots import (
    ProgressLayout,
    plot_progress,
    progress_figure,
    progress_layout,
    protocol_title,
)
from orchestrator.report.summary import compute_summary, protocol_summary, summarize
from orchestrator.report.tables import print_report, protocol_line
from orchestrator.store.episodes import episode_document, load_episodes, write_episode
from orchestrator.suites.balrog import PUBLISHED

COMMIT = "abc123def4567890abc123def4567890abc12345"
OTHER_COMMIT = "0123456789ab0123456789ab0123456789ab0123"
CHECK = {"balrog_commit": COMMIT, "status": "passed",
         "envs": {"babyai": {"requests_equal": 3, "requests": 3, "actions_equal": 3,
                             "actions": 3}}}
GENERATION = {"temperature": 1.0, "max_tokens": 4096}


def balrog_protocol(env: str = "babyai", commit: str = COMMIT, **extra: Any) -> dict[str, Any]:
    return {"name": "balrog", "balrog_commit": commit, "balrog_source": "/src/balrog",
            "instruction_sha256": f"{env}-hash", "generation": GENERATION,
            "protocol_check": CHECK, **extra}


def moria_protocol(env: str = "babyai") -> dict[str, Any]:
    return {"name": "moria", "instruction_sha256": f"moria-{env}-hash",
            "generation": {"temperature": None, "max_tokens": 4096}}


def episode(env: str = "babyai", index: int = 0, protocol: dict[str, Any] | None = None,
            *, end_reason: EndReason = "terminated", progression: float = 0.5) -> EpisodeRecord:
    return EpisodeRecord(run_id="run-1", env=env, task=f"{env}-task", episode_index=index,
                         seed=index, end_reason=end_reason, progression=progression,
                         num_steps=3, protocol=protocol or {})


# -- records and episode files ---------------------------------------------------------------
def test_episode_document_writes_protocol_after_balrog_keys() -> None:
    doc = episode_document(episode(protocol=balrog_protocol()))
    keys = list(doc)
    assert doc["protocol"] == balrog_protocol()
    assert keys.index("protocol") > keys.index("client")  # after BALROG's keys
    assert keys.index("protocol") < keys.index("steps")


def test_old_episode_json_without_protocol_loads_as_moria(tmp_path: Path) -> None:
    json_path, _ = write_episode(tmp_path, episode())
    doc = json.loads(json_path.read_text(encoding="utf-8"))
    del doc["protocol"]  # a file written before the field existed
    json_path.write_text(json.dumps(doc), encoding="utf-8")
    (loaded,) = load_episodes(tmp_path)
    assert loaded.protocol == {}
    assert loaded.protocol_name == "moria"
    assert protocol_summary([loaded])["name"] == "moria"


def test_protocol_round_trips_through_episode_files(tmp_path: Path) -> None:
    write_episode(tmp_path, episode(protocol=balrog_protocol()))
    (loaded,) = load_episodes(tmp_path)
    assert loaded.protocol == balrog_protocol()
    assert loaded.protocol_name == "balrog"


def test_protocol_without_name_is_moria() -> None:
    assert episode(protocol={"instruction_sha256": "x"}).protocol_name == "moria"


# -- summary.json ----------------------------------------------------------------------------
def test_summary_protocol_of_moria_records() -> None:
    episodes = [episode("babyai", 0, moria_protocol()), episode("babyai", 1),
                episode("crafter", 0, moria_protocol("crafter"))]
    assert compute_summary(episodes)["protocol"] == {
        "name": "moria",
        "balrog_commit": None,
        "instruction_sha256": {"babyai": ["moria-babyai-hash"],
                               "crafter": ["moria-crafter-hash"]},
        "generation": {"temperature": None, "max_tokens": 4096},
        "protocol_check": {},
    }


def test_summary_protocol_of_balrog_records() -> None:
    episodes = [episode("babyai", 0, balrog_protocol()),
                episode("babyai", 1, balrog_protocol(instruction_sha256="babyai-hash-2")),
                episode("textworld", 0, balrog_protocol("textworld", protocol_check={}))]
    assert compute_summary(episodes)["protocol"] == {
        "name": "balrog",
        "balrog_commit": COMMIT,
        "instruction_sha256": {"babyai": ["babyai-hash", "babyai-hash-2"],
                               "textworld": ["textworld-hash"]},
        "generation": GENERATION,
        "protocol_check": CHECK,
    }


def test_summary_protocol_of_mixed_records_lists_what_differs() -> None:
    other = balrog_protocol(commit=OTHER_COMMIT,
                            generation={"temperature": None, "max_tokens": 4096})
    episodes = [episode("babyai", 0, balrog_protocol()), episode("babyai", 1, other),
                episode("babyai", 2, moria_protocol())]
    section = protocol_summary(episodes)
    assert section["name"] == "mixed"
    assert section["balrog_commit"] == [COMMIT, OTHER_COMMIT]
    assert section["generation"] == [GENERATION, {"temperature": None, "max_tokens": 4096}]
    assert section["instruction_sha256"] == {"babyai": ["babyai-hash", "moria-babyai-hash"]}
    # only a balrog run is ever drawn against the leaderboard
    assert not progress_layout(compute_summary(episodes)).comparable


def test_summary_protocol_without_episodes_and_episode_counts(tmp_path: Path) -> None:
    assert compute_summary([])["protocol"]["name"] == "moria"
    reasons: list[EndReason] = ["terminated", "truncated", "agent_error"]
    for i, reason in enumerate(reasons):
        write_episode(tmp_path, episode("babyai", i, balrog_protocol(), end_reason=reason))
    summary = summarize(tmp_path)
    written = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert written["protocol"] == summary["protocol"]
    assert written["protocol"]["name"] == "balrog"
    assert written["protocol"]["balrog_commit"] == COMMIT
    babyai = written["environments"]["babyai"]
    assert (babyai["episodes_total"], babyai["episodes_played"]) == (3, 2)


# -- moria report ------------------------------------------------------------------------------
def test_protocol_line_texts() -> None:
    balrog = protocol_summary([episode(protocol=balrog_protocol())])
    assert protocol_line(balrog) == ("Protocol: balrog (BALROG commit abc123def456; "
                                     "protocol-check: passed)")
    unchecked = {**balrog, "protocol_check": {}}
    assert protocol_line(unchecked).endswith("protocol-check: not checked)")
    moria = ("Protocol: moria (Moria's own prompts; not comparable with BALROG's "
             "leaderboard)")
    assert protocol_line(protocol_summary([episode()])) == moria
    assert protocol_line(None) == moria
    mixed = protocol_line({"name": "mixed"})
    assert mixed.startswith("Protocol: mixed - WARNING:")
    assert "different prompting protocols" in mixed


@pytest.mark.parametrize(
    ("protocols", "line"),
    [
        ([balrog_protocol(), balrog_protocol()],
         "Protocol: balrog (BALROG commit abc123def456; protocol-check: passed)"),
        ([{}, moria_protocol()], "Protocol: moria (Moria's own prompts;"),
        ([balrog_protocol(), {}], "Protocol: mixed - WARNING:"),
    ],
)
def test_print_report_prints_protocol_line_and_episode_counts(
    tmp_path: Path, protocols: list[dict[str, Any]], line: str
) -> None:
    for i, protocol in enumerate(protocols):
        write_episode(tmp_path, episode("babyai", i, protocol))
    console = Console(file=io.StringIO(), width=250, color_system=None)
    print_report(tmp_path, console)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    table, _, after = text.partition("Protocol: ")
    assert "Episodes" in table and "babyai" in table
    assert ("Protocol: " + after).startswith(line)
    assert text.count("Protocol: ") == 1


# -- progress.png ----------------------------------------------------------------------------
def two_env_summary(protocols: list[dict[str, Any]]) -> dict[str, Any]:
    episodes = [episode(env, i, protocols[i % len(protocols)],
                        end_reason="agent_error" if (env, i) == ("crafter", 2) else "terminated")
                for env in ("babyai", "crafter") for i in range(3)]
    return compute_summary(episodes)


def test_layout_of_balrog_summary_has_leaderboard_and_commit() -> None:
    layout = progress_layout(two_env_summary([balrog_protocol()]))
    assert isinstance(layout, ProgressLayout) and layout.comparable
    assert [model for model, _ in layout.references] == list(PUBLISHED)
    assert layout.references[0][1]["babyai"] == PUBLISHED["Grok-4"]["babyai"]
    assert layout.title == "BALROG protocol, BALROG commit abc123def456; protocol-check: passed"
    assert layout.groups == ["babyai", "crafter", "average"]
    assert layout.tick_labels == ["babyai\n(n=3)", "crafter\n(n=2 of 3)", "average\n(n=5 of 6)"]


@pytest.mark.parametrize("protocols", [[moria_protocol()], [{}], [balrog_protocol(), {}]])
def test_layout_of_other_summaries_draws_the_run_alone(protocols: list[dict[str, Any]]) -> None:
    layout = progress_layout(two_env_summary(protocols))
    assert not layout.comparable and layout.references == []
    assert "not comparable with the BALROG leaderboard" in layout.title
    assert "commit" not in layout.title
    assert layout.tick_labels[0] == "babyai\n(n=3)"


def test_protocol_title_of_a_summary_without_section() -> None:
    assert protocol_title(None) == "Moria protocol — not comparable with the BALROG leaderboard"
    assert protocol_title({"name": "mixed"}).startswith("Mixed prompting protocols —")
    assert "abc123def456, 0123456789ab" in protocol_title(
        {"name": "balrog", "balrog_commit": [COMMIT, OTHER_COMMIT]})


def _legend_and_title(summary: dict[str, Any]) -> tuple[list[str], str, list[str]]:
    fig = progress_figure(summary)
    try:
        ax_env = fig.axes[0]
        legend_box = ax_env.get_legend()
        assert legend_box is not None
        legend = [t.get_text() for t in legend_box.get_texts()]
        ticks = [t.get_text() for t in ax_env.get_xticklabels()]
        return legend, fig.get_suptitle(), ticks
    finally:
        plt.close(fig)


def test_figure_of_balrog_summary_draws_published_series() -> None:
    legend, title, ticks = _legend_and_title(two_env_summary([balrog_protocol()]))
    assert legend == ["this run (BALROG protocol)", *(f"{m} (published)" for m in PUBLISHED)]
    assert "BALROG commit abc123def456" in title
    assert ticks == ["babyai\n(n=3)", "crafter\n(n=2 of 3)", "average\n(n=5 of 6)"]


def test_figure_of_moria_summary_draws_the_run_alone() -> None:
    legend, title, ticks = _legend_and_title(two_env_summary([moria_protocol()]))
    assert legend == ["this run (Moria protocol)"]
    assert title.splitlines() == ["Moria protocol — not comparable with the BALROG leaderboard",
                                  "n=5 scored episodes of 6 · player: unknown (no model)"]
    assert ticks[0] == "babyai\n(n=3)"


def test_plot_progress_writes_png_for_both_protocols(tmp_path: Path) -> None:
    cases: list[tuple[str, list[dict[str, Any]]]] = [("balrog", [balrog_protocol()]),
                                                     ("moria", [{}])]
    for name, protocols in cases:
        path = plot_progress(two_env_summary(protocols), tmp_path / name / "progress.png")
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert not list(path.parent.glob(".*.tmp"))
    with pytest.raises(ValueError, match="no environments"):
        plot_progress({"environments": {}}, tmp_path / "empty.png")


def test_plot_progress_failure_keeps_old_picture_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from matplotlib.figure import Figure

    path = tmp_path / "progress.png"
    path.write_bytes(b"old picture")

    def broken_savefig(self: Figure, fname: Any, **kwargs: Any) -> None:
        Path(fname).write_bytes(b"half a pic")
        raise OSError("disk full")

    monkeypatch.setattr(Figure, "savefig", broken_savefig)
    with pytest.raises(OSError, match="disk full"):
        plot_progress(two_env_summary([{}]), path)
    assert path.read_bytes() == b"old picture"
    assert [p.name for p in tmp_path.iterdir()] == ["progress.png"]


def test_a_dirty_checkout_keeps_its_mark_in_the_console_line() -> None:
    from orchestrator.report.tables import commit_label

    sha = "af7d1f1" + "0" * 33
    assert commit_label(sha) == sha[:12]
    assert commit_label(f"{sha}-dirty") == f"{sha[:12]}-dirty"
    assert commit_label([sha, f"{sha}-dirty"]) == f"{sha[:12]}, {sha[:12]}-dirty"
    assert commit_label(None) == "unknown"
