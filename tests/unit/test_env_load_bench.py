"""Smoke test of the env load benchmark (benchmarks/env_load.py): a real env server process
with 5 sessions x 3 steps. Checks the report's fields and counts, never its speed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import env_load


@pytest.mark.slow
def test_env_load_reports_every_figure(tmp_path: Path) -> None:
    out = tmp_path / "env_load.json"
    figures = env_load.main(["--sessions", "5", "--steps", "3", "--out", str(out)])
    assert json.loads(out.read_text()) == figures
    for name, sessions in (("one_session", 1), ("5_sessions", 5)):
        load = figures[name]
        assert load["sessions"] == sessions
        assert load["peak_active_sessions"] == sessions  # all held open at once
        assert load["total_steps"] == sessions * 3
        assert load["errors"] == 0 and load["errors_by_code"] == {}
        assert load["steps_per_s"] > 0
        assert 0 < load["p50_step_ms"] <= load["p99_step_ms"]
        assert load["peak_rss_mb"] >= load["rss_before_mb"] > 0
    assert figures["steps_per_s_ratio"] > 0
