"""benchmarks/goals.py reads the figures of ``make bench`` and compares them with issue 17's
targets: a figure on either side of its target, a suite that did not run, BALROG's ratio."""

from __future__ import annotations

from benchmarks.goals import evaluate


def _by_measure(goals: list) -> dict:
    return {g.measure: g for g in goals}


def test_figures_on_either_side_of_their_targets() -> None:
    results = {
        "babyai_oracle_steps_per_s": {"remote_1_over_in_process": 0.62},
        "nethack_steps_per_s_and_memory": {
            "MiniHack-MazeWalk-9x9-v0": {"server_1_over_in_process": 0.2,
                                         "server_8_over_in_process": 0.55,
                                         "without_workers": {"server_1_over_in_process": 0.35,
                                                             "server_8_over_in_process": 0.45}},
        },
        "concurrent_episodes_fixed_latency": {"wall_over_ideal": 1.3},
        "workload_a": [{"num_workers": 50, "wall_s": 15.0, "wall_over_ideal": 1.09,
                        "cpu_ms_per_step": 2.4},
                       {"num_workers": 16, "wall_s": 52.0, "wall_over_ideal": 4.06,
                        "cpu_ms_per_step": 3.0}],
        "local_model": {"totals": {"cached_fraction": 0.25, "seconds_per_step": 0.8}},
    }
    goals = _by_measure(evaluate(results, balrog_best_wall_s=42.0))
    assert goals["BabyAI Env server / in-process, 1 session"].met is True
    assert goals["MiniHack Env server / in-process, 1 session"].met is False
    assert goals["MiniHack Env server / in-process, 8 sessions"].met is True
    # the --isolate '' figures are shown beside the goal, never judged as it
    opt_in = goals["MiniHack, 1 session, no worker processes (--isolate '')"]
    assert (opt_in.value, opt_in.target, opt_in.met) == (0.35, "report", None)
    assert goals["MiniHack, 8 sessions, no worker processes (--isolate '')"].value == 0.45
    assert goals["64 episodes vs a 100 ms model: wall / ideal"].met is False
    # the fastest workload-A row is the one judged
    cpu = goals["workload A CPU ms per step, all processes (50 workers)"]
    assert (cpu.value, cpu.met) == (2.4, True)
    balrog = goals["workload A wall / BALROG's best wall (same sitting)"]
    assert balrog.value == 15.0 / 42.0 and balrog.met is False
    assert goals["local model: cached / all prompt tokens, BALROG window"].value == 0.25


def test_a_suite_that_did_not_run_is_reported_not_judged() -> None:
    goals = evaluate({})
    assert goals and all(g.value is None and g.met is None for g in goals)
    # without BALROG's figure there is no ratio to judge
    assert not any("BALROG's best" in g.measure for g in goals)
