"""benchmarks/record.py: a sitting's goals and workload A rows become result files that
benchmarks/tables.py renders."""

from __future__ import annotations

from pathlib import Path

from benchmarks import record, tables
from benchmarks.goals import evaluate


def test_a_sitting_becomes_the_goals_and_side_by_side_tables(tmp_path: Path) -> None:
    results = {
        "load_average_before": [0.5, 0.4, 0.3], "load_average_after": [1.25, 0.9, 0.5],
        "concurrent_episodes_fixed_latency": {"wall_over_ideal": 1.17},
        "workload_a": [
            {"num_workers": 50, "wall_s": 16.07, "wall_over_ideal": 1.26, "steps": 5120,
             "cpu_ms_per_step": 2.44, "peak_pss_mb": 236, "load_average_before": [2.04],
             "cpu_s_by_process": {"orchestrator": 4.68, "env_server": 2.97,
                                  "policy_server": 4.57}},
            {"system": "balrog", "num_workers": 32, "wall_s": 72.55, "wall_over_ideal": 5.67,
             "steps": 5120, "cpu_ms_per_step": 24.56, "peak_pss_mb": 1173,
             "load_average_before": [1.5]}]}
    written = record.write(results, evaluate(results), "python -m benchmarks.run --record",
                           tmp_path)
    assert [p.name for p in written] == ["goals.json", "side_by_side.json"]
    goals = tables.load("goals", tmp_path)
    assert goals["load"] == "0.50 before, 1.25 after"
    by_measure = {row[1]: row for row in goals["rows"]}
    assert by_measure["64 episodes vs a 100 ms model: wall / ideal"][2:] == [
        "1.17", "<= 1.3", "yes"]
    assert by_measure["workload A CPU ms per step, the orchestrator (50 workers)"][2:] == [
        "0.914", "<= 1", "yes"]
    assert by_measure["workload A CPU per step / BALROG's (same sitting)"][2:] == [
        "0.0993", "<= 1/8", "yes"]
    assert by_measure["BabyAI Env server / in-process, 1 session"][2:] == [
        "not run", ">= 0.5", "-"]
    side = tables.load("side_by_side", tmp_path)
    assert side["rows"] == [
        ["Moria, 50 workers", "16.1", "1.26", "2.44",
         "env server 0.58, orchestrator 0.91, policy server 0.89", "236 MB", "2.04"],
        ["BALROG, 32 workers", "72.5", "5.67", "24.56", "-", "1,173 MB", "1.50"]]
    assert "| Moria, 50 workers | 16.1 |" in tables.render(side)
