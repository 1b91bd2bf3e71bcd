"""Unit tests of orchestrator.store.episodes and orchestrator.report.summary: layout, CSV,
summaries, report, resume."""

from __future__ import annotations

import csv
import io
import json
import logging
import math
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.table import Table

from moria.records import EpisodeRecord, StepRecord
from moria.results import scan_episodes
from orchestrator.report.summary import progression_stats, summarize
from orchestrator.report.tables import render_report
from orchestrator.store.episodes import (
    CSV_COLUMNS,
    completed_keys,
    episode_paths,
    load_episodes,
    safe_name,
    write_episode,
)

BABY_TASK = "BabyAI-MixedTrainLocal-v0/goto"
BABY_DIR = "BabyAI-MixedTrainLocal-v0__goto"


def make_episode(
    *,
    env: str = "babyai",
    task: str = BABY_TASK,
    index: int = 0,
    progression: float = 1.0,
    end_reason: str = "terminated",
    num_steps: int = 2,
    **overrides: Any,
) -> EpisodeRecord:
    steps = [
        StepRecord(
            step=i,
            agent_id="agent_0",
            observation=f'obs {i}\nwith, a comma and "quotes"',
            raw_completion="go forward" if i % 2 == 0 else "dance",
            action="go forward",
            valid=i % 2 == 0,
            feedback="" if i % 2 == 0 else "'dance' is not an action; turned left instead",
            reasoning=f"reason {i}",
            reward=1.0 if i == num_steps - 1 else 0.0,
            done=i == num_steps - 1,
            input_tokens=100,
            output_tokens=5,
            cached_input_tokens=10,
            reasoning_tokens=1,
            latency_s=0.25,
        )
        for i in range(num_steps)
    ]
    fields: dict[str, Any] = {
        "run_id": "run-1",
        "env": env,
        "task": task,
        "episode_index": index,
        "seed": 2**63 + 12345,
        "end_reason": end_reason,
        "done": True,
        "episode_return": 1.0,
        "num_steps": num_steps,
        "progression": progression,
        "stats": {"progression": progression, "achievements": 3},
        "failed_candidates": ["dance"],
        "action_frequency": {"go forward": num_steps},
        "input_tokens": 100 * num_steps,
        "output_tokens": 5 * num_steps,
        "cached_input_tokens": 10 * num_steps,
        "reasoning_tokens": num_steps,
        "agent_config": {"type": "naive", "max_text_history": 16},
        "client_config": {
            "client_name": "openai",
            "model_id": "gpt-4o",
            "max_tokens": 8192,
            "api_key": "sk-secret-123",
        },
        "versions": {"moria": "0.1.0"},
        "started_at": "2025-01-01T00:00:00+00:00",
        "ended_at": "2025-01-01T00:00:05+00:00",
        "wall_time_s": 5.0,
        "steps": steps,
    }
    fields.update(overrides)
    return EpisodeRecord(**fields)


# -- layout and files ------------------------------------------------------------------------
def test_safe_name_flattens_slashes() -> None:
    assert safe_name(BABY_TASK) == BABY_DIR
    assert safe_name("MiniHack-Corridor-R3-v0") == "MiniHack-Corridor-R3-v0"
    with pytest.raises(ValueError, match="not usable"):
        safe_name("..")


def test_write_episode_layout_and_names(tmp_path: Path) -> None:
    json_path, csv_path = write_episode(tmp_path, make_episode(index=3))
    assert json_path == tmp_path / "babyai" / BABY_DIR / f"{BABY_DIR}_run_03.json"
    assert csv_path == tmp_path / "babyai" / BABY_DIR / f"{BABY_DIR}_run_03.csv"
    assert json_path.is_file() and csv_path.is_file()
    assert episode_paths(tmp_path, "babyai", BABY_TASK, 12)[0].name == f"{BABY_DIR}_run_12.json"
    # No nested BALROG-style folder, and no temp files left behind anywhere.
    assert not (tmp_path / "babyai" / "BabyAI-MixedTrainLocal-v0").exists()
    all_files = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert all_files == [f"{BABY_DIR}_run_03.csv", f"{BABY_DIR}_run_03.json"]


def test_episode_json_has_balrog_and_extra_keys(tmp_path: Path) -> None:
    record = make_episode(progression=0.5)
    json_path, _ = write_episode(tmp_path, record)
    doc = json.loads(json_path.read_text(encoding="utf-8"))
    balrog_keys = {
        "task",
        "action_frequency",
        "input_tokens",
        "output_tokens",
        "done",
        "episode_return",
        "num_steps",
        "failed_candidates",
        "progression",
        "stats",
        "seed",
        "agent",
        "client",
    }
    assert balrog_keys <= doc.keys()
    assert doc["task"] == BABY_TASK  # original name kept inside the file
    assert doc["task_dir"] == BABY_DIR
    assert doc["progression"] == 0.5 and doc["stats"]["progression"] == 0.5
    assert doc["seed"] == 2**63 + 12345
    assert doc["agent"] == {"type": "naive", "max_text_history": 16}
    assert doc["end_reason"] == "terminated"
    assert doc["cached_input_tokens"] == 20 and doc["reasoning_tokens"] == 2
    assert len(doc["steps"]) == 2 and doc["steps"][1]["raw_completion"] == "dance"
    # Secrets are scrubbed from the client config; numeric token settings are kept.
    assert "api_key" not in doc["client"]
    assert doc["client"]["max_tokens"] == 8192
    assert "sk-secret-123" not in json_path.read_text(encoding="utf-8")


def test_episode_csv_columns_and_rows(tmp_path: Path) -> None:
    record = make_episode(num_steps=3)
    record.stats["mission"] = "go to the red ball"
    _, csv_path = write_episode(tmp_path, record)
    with csv_path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert tuple(rows[0]) == CSV_COLUMNS
    assert rows[0] == [
        "Step",
        "Action",
        "Reasoning",
        "Observation",
        "Reward",
        "Done",
        "RawCompletion",
        "Valid",
        "Feedback",
        "Goal",
    ]
    assert len(rows) == 4
    assert rows[1] == [
        "0",
        "go forward",
        "reason 0",
        'obs 0\nwith, a comma and "quotes"',
        "0.0",
        "False",
        "go forward",
        "True",
        "",
        "go to the red ball",
    ]
    assert rows[2][6] == "dance" and rows[2][7] == "False"
    assert rows[2][8] == "'dance' is not an action; turned left instead"
    assert rows[3][5] == "True"


def test_write_then_load_round_trip(tmp_path: Path) -> None:
    record = make_episode()
    write_episode(tmp_path, record)
    (loaded,) = load_episodes(tmp_path)
    expected = record.model_copy(
        update={"client_config": {k: v for k, v in record.client_config.items() if k != "api_key"}}
    )
    assert loaded == expected


# -- resume ----------------------------------------------------------------------------------
def test_completed_keys_excludes_failures_and_ignores_corrupt_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_episode(tmp_path, make_episode(index=0, end_reason="terminated"))
    write_episode(tmp_path, make_episode(index=1, end_reason="truncated", progression=0.0))
    write_episode(tmp_path, make_episode(index=2, end_reason="agent_error", error="HTTP 500"))
    write_episode(tmp_path, make_episode(index=3, end_reason="env_error", error="crash"))
    write_episode(tmp_path, make_episode(index=4, end_reason="cancelled"))
    corrupt, _ = episode_paths(tmp_path, "babyai", BABY_TASK, 5)
    corrupt.write_text('{"task": "BabyAI-MixedTrainLocal-v0/goto", "episode_ind', encoding="utf-8")
    invalid, _ = episode_paths(tmp_path, "babyai", BABY_TASK, 6)
    invalid.write_text(json.dumps({"task": BABY_TASK, "env": "babyai"}), encoding="utf-8")

    with caplog.at_level(logging.WARNING, logger="orchestrator.store.episodes"):
        keys = completed_keys(tmp_path)
    assert keys == {("babyai", BABY_TASK, 0), ("babyai", BABY_TASK, 1)}
    assert "run_05.json" in caplog.text and "run_06.json" in caplog.text

    episodes, warnings = scan_episodes(tmp_path)
    assert [e.episode_index for e in episodes] == [0, 1, 2, 3, 4]
    assert len(warnings) == 2


def test_completed_keys_of_missing_dir_is_empty(tmp_path: Path) -> None:
    assert completed_keys(tmp_path / "nope") == set()


def test_rewrite_after_error_marks_completed(tmp_path: Path) -> None:
    write_episode(tmp_path, make_episode(index=0, end_reason="agent_error"))
    assert completed_keys(tmp_path) == set()
    write_episode(tmp_path, make_episode(index=0, end_reason="terminated"))
    assert completed_keys(tmp_path) == {("babyai", BABY_TASK, 0)}


# -- formulas and summaries -------------------------------------------------------------------
def test_progression_stats_hand_computed() -> None:
    pct, se = progression_stats([1, 0, 1, 1])
    assert pct == pytest.approx(75.0)
    # population std = sqrt(0.1875) = 0.4330; / sqrt(4) = 0.2165 -> 21.65 %
    assert se == pytest.approx(21.650635, abs=1e-5)
    assert progression_stats([0.5]) == (50.0, 0.0)
    assert progression_stats([]) == (None, None)


def _write_two_envs(out: Path) -> None:
    # babyai: goto [1, 0] + pickup [1, 1] -> pooled [1, 0, 1, 1]; plus one agent_error (excluded)
    for i, p in enumerate([1.0, 0.0]):
        write_episode(out, make_episode(index=i, progression=p, num_steps=2))
    for i, p in enumerate([1.0, 1.0]):
        write_episode(
            out,
            make_episode(
                task="BabyAI-MixedTrainLocal-v0/pickup", index=i, progression=p, num_steps=4
            ),
        )
    write_episode(
        out, make_episode(index=2, progression=1.0, end_reason="agent_error", num_steps=1)
    )
    # crafter: [0.5, 0.25]
    for i, p in enumerate([0.5, 0.25]):
        write_episode(
            out, make_episode(env="crafter", task="default", index=i, progression=p, num_steps=10)
        )


def test_env_summary_figures(tmp_path: Path) -> None:
    _write_two_envs(tmp_path)
    summarize(tmp_path)
    baby = json.loads((tmp_path / "babyai" / "babyai_summary.json").read_text(encoding="utf-8"))
    assert baby["progression_percentage"] == pytest.approx(75.0)
    assert baby["standard_error"] == pytest.approx(21.650635, abs=1e-5)
    assert baby["episodes_played"] == 4  # the agent_error episode is not played/scored
    assert baby["average_steps"] == pytest.approx(3.0)  # (2+2+4+4)/4
    assert baby["end_reasons"]["agent_error"] == 1 and baby["agent_error_episodes"] == 1
    assert baby["end_reasons"]["terminated"] == 4
    assert baby["input_tokens"] == 100 * (2 + 2 + 4 + 4 + 1)  # spent tokens include errors
    assert baby["output_tokens"] == 5 * 13
    assert baby["cached_input_tokens"] == 10 * 13 and baby["reasoning_tokens"] == 13
    goto = baby["tasks"][BABY_TASK]
    assert goto["progression_percentage"] == pytest.approx(50.0)
    assert goto["standard_error"] == pytest.approx(35.355339, abs=1e-5)  # 0.5 / sqrt(2)
    assert goto["episodes_played"] == 2
    pickup = baby["tasks"]["BabyAI-MixedTrainLocal-v0/pickup"]
    assert pickup["progression_percentage"] == pytest.approx(100.0)
    assert pickup["standard_error"] == pytest.approx(0.0)


def test_run_summary_and_report_across_two_envs(tmp_path: Path) -> None:
    _write_two_envs(tmp_path)
    returned = summarize(tmp_path, extra={"run_seed": 7, "versions": {"moria": "0.1.0"}})
    summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    assert summary == returned

    baby_pct, baby_se = 75.0, 100 * math.sqrt(0.1875) / 2
    crafter_pct = 37.5
    crafter_se = 100 * 0.125 / math.sqrt(2)  # pstdev([0.5, 0.25]) = 0.125
    assert summary["environments"]["crafter"]["standard_error"] == pytest.approx(crafter_se)
    assert summary["average_progress"] == pytest.approx((baby_pct + crafter_pct) / 2)
    assert summary["standard_error"] == pytest.approx(math.sqrt(baby_se**2 + crafter_se**2) / 2)
    assert summary["average_progress"] == pytest.approx(56.25)
    # sqrt(21.6506^2 + 8.8388^2) / 2 = sqrt(468.75 + 78.125) / 2
    assert summary["standard_error"] == pytest.approx(11.692679, abs=1e-5)
    assert summary["run_seed"] == 7 and summary["versions"] == {"moria": "0.1.0"}
    assert summary["input_tokens"] == 100 * (13 + 20)
    assert summary["agent"] == {"type": "naive", "max_text_history": 16}
    assert "api_key" not in summary["client"] and summary["client"]["model_id"] == "gpt-4o"

    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert set(report) == {"average_progress", "standard_error", "environments"}
    assert set(report["environments"]) == {"babyai", "crafter"}
    for figures in report["environments"].values():
        assert set(figures) == {"progression_percentage", "standard_error", "episodes_played"}
    assert report["environments"]["babyai"]["episodes_played"] == 4
    assert report["average_progress"] == pytest.approx(56.25)

    # No temp files left by any write.
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]


def test_summarize_env_filter_and_unscored_env(tmp_path: Path) -> None:
    _write_two_envs(tmp_path)
    summary = summarize(tmp_path, envs=["crafter", "nle"])
    assert list(summary["environments"]) == ["crafter", "nle"]
    assert summary["average_progress"] == pytest.approx(37.5)  # nle has no scored episodes
    assert summary["environments"]["nle"]["progression_percentage"] is None
    assert summary["environments_without_scores"] == ["nle"]
    assert (tmp_path / "nle" / "nle_summary.json").is_file()


def test_summarize_rejects_overriding_scores_and_missing_dir(tmp_path: Path) -> None:
    _write_two_envs(tmp_path)
    with pytest.raises(ValueError, match="average_progress"):
        summarize(tmp_path, extra={"average_progress": 100.0})
    with pytest.raises(FileNotFoundError):
        summarize(tmp_path / "missing")


# -- console report --------------------------------------------------------------------------
def test_render_report_on_written_dir(tmp_path: Path) -> None:
    _write_two_envs(tmp_path)
    table = render_report(tmp_path)
    assert isinstance(table, Table)
    console = Console(file=io.StringIO(), width=200, color_system=None)
    console.print(table)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "babyai" in text and "crafter" in text and BABY_TASK in text
    assert "75.0 ± 21.7" in text and "56.2 ± 11.7" in text
    assert "Overall" in text


def test_render_report_shows_cached_input_tokens_next_to_input(tmp_path: Path) -> None:
    """The prompt tokens served from a KV/prompt cache get their own column, right after the
    input tokens they are part of (crafter: 2 episodes x 10 steps x 100 input, 10 cached)."""
    _write_two_envs(tmp_path)
    console = Console(file=io.StringIO(), width=240, color_system=None)
    console.print(render_report(tmp_path))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    header = next(line for line in text.splitlines() if "Input tokens" in line)
    assert header.index("Input tokens") < header.index("Cached input") < header.index("Output")
    crafter = next(line for line in text.splitlines() if "crafter" in line)
    cells = [c.strip() for c in crafter.split("│") if c.strip()]
    assert cells[cells.index("2,000") + 1] == "200"


def test_render_report_missing_or_empty_dir(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no results directory"):
        render_report(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="no episode files"):
        render_report(tmp_path)
