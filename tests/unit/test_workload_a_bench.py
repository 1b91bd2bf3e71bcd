"""benchmarks/workload_a.py and benchmarks/balrog_side.py: the order of the side-by-side runs,
the ratio of the two systems' best wall times, what a BALROG checkout must hold, and BALROG's
episode files read back. A stand-in ``eval.py`` (a real subprocess with a child of its own)
checks that the command line reaches it as BALROG's Hydra overrides and that the whole process
tree's CPU is counted; BALROG itself cannot be in the repository."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from benchmarks import balrog_side, process_tree, workload_a
from benchmarks.goals import evaluate

STAND_IN = '''
import json, subprocess, sys
from pathlib import Path
args = dict(a.split("=", 1) for a in sys.argv[1:])
out = Path(args["eval.output_dir"]) / "2026-01-01_00-00-00_naive_fake" / "babyai"
# burn CPU in a child, as BALROG's worker processes do
subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)
tasks = {"goto": 64, "pickup": 64, "open": 128, "putnext": 128, "pick_up_seq_go_to": 128}
for kind, steps in tasks.items():
    folder = out / "BabyAI-MixedTrainLocal-v0" / kind
    folder.mkdir(parents=True, exist_ok=True)
    # "7 workers": a worker fails and its episode file is missing, yet the exit status is 0
    for index in range(9 if kind == "goto" and args["eval.num_workers"] == "7" else 10):
        (folder / f"{kind}_run_{index:02d}.json").write_text(json.dumps({"num_steps": steps}))
sys.exit(int(args["eval.num_workers"] == "13"))
'''


def _checkout(tmp_path: Path) -> balrog_side.BalrogCheckout:
    """A stand-in checkout: a git work tree with ``eval.py`` and BALROG's config file."""
    root = tmp_path / "BALROG"
    (root / "balrog" / "config").mkdir(parents=True)
    (root / "balrog" / "config" / "config.yaml").write_text("eval: {}\n")
    (root / "eval.py").write_text(STAND_IN)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "stand-in"], check=True)
    return balrog_side.BalrogCheckout.at(root, sys.executable)


def _head(checkout: balrog_side.BalrogCheckout) -> str:
    return subprocess.run(["git", "-C", str(checkout.root), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()


def test_schedule_alternates_the_two_systems_in_each_pass() -> None:
    assert workload_a.schedule([50, 16], [32], 2) == [
        ("moria", 50), ("balrog", 32), ("moria", 16),
        ("moria", 50), ("balrog", 32), ("moria", 16)]
    assert workload_a.schedule([50], [], 1) == [("moria", 50)]


def test_side_by_side_divides_the_best_wall_times() -> None:
    rows = [{"system": "moria", "num_workers": 50, "wall_s": 20.0},
            {"system": "balrog", "num_workers": 32, "wall_s": 60.0, "balrog_commit": "abc"},
            {"system": "moria", "num_workers": 16, "wall_s": 45.0},
            {"system": "balrog", "num_workers": 16, "wall_s": 66.0}]
    assert workload_a.side_by_side(rows) == {
        "moria_best_wall_s": 20.0, "moria_best_workers": 50, "balrog_best_wall_s": 60.0,
        "balrog_best_workers": 32, "balrog_commit": "abc", "ratio": 0.333}
    assert workload_a.side_by_side(rows[:1]) is None


def test_goals_judge_moria_rows_against_balrog_rows_of_the_same_run() -> None:
    results = {"workload_a": [
        {"system": "moria", "num_workers": 50, "wall_s": 21.0, "wall_over_ideal": 1.6,
         "cpu_ms_per_step": 6.0},
        {"system": "balrog", "num_workers": 32, "wall_s": 14.0, "wall_over_ideal": 1.1,
         "cpu_ms_per_step": 19.0}]}
    goals = {g.measure: g for g in evaluate(results)}
    cpu = goals["workload A CPU ms per step, all processes (50 workers)"]
    assert (cpu.value, cpu.met) == (6.0, False)  # BALROG's faster row is not Moria's figure
    ratio = goals["workload A wall / BALROG's best wall (same sitting)"]
    assert (ratio.value, ratio.target, ratio.met) == (21.0 / 14.0, "<= 1/3", False)
    # an explicit figure wins over the rows
    ratio = {g.measure: g for g in evaluate(results, 70.0)}[
        "workload A wall / BALROG's best wall (same sitting)"]
    assert ratio.value == 21.0 / 70.0 and ratio.met is True


def test_a_checkout_needs_eval_py_its_config_and_an_interpreter(tmp_path: Path) -> None:
    with pytest.raises(balrog_side.BalrogSetupError, match=re.escape("eval.py is missing")):
        balrog_side.BalrogCheckout.at(tmp_path)
    checkout = _checkout(tmp_path)
    assert checkout.commit() == _head(checkout) and len(checkout.commit()) == 40
    with pytest.raises(balrog_side.BalrogSetupError, match="no Python interpreter at"):
        balrog_side.BalrogCheckout.at(checkout.root, tmp_path / "nope" / "python")
    (checkout.root / "balrog" / "config" / "config.yaml").unlink()
    with pytest.raises(balrog_side.BalrogSetupError, match=re.escape("config.yaml is missing")):
        balrog_side.BalrogCheckout.at(checkout.root, sys.executable)


def test_an_exported_tree_names_its_commit_by_its_commit_file(tmp_path: Path) -> None:
    root = _checkout(tmp_path).root
    shutil.rmtree(root / ".git")
    exported = balrog_side.BalrogCheckout.at(root, sys.executable)
    assert exported.commit() == "unknown"
    (root / "COMMIT").write_text("af7d1f17e0deec3a7a0e334beae5f11b7a21371b\n")
    assert exported.commit() == "af7d1f17e0deec3a7a0e334beae5f11b7a21371b"


def test_run_once_measures_the_whole_tree_and_reads_balrog_s_files(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path)
    row = balrog_side.run_once(checkout, "http://127.0.0.1:9/v1", 32,
                               episodes=workload_a.EPISODES)
    assert row["system"] == "balrog" and row["balrog_commit"] == _head(checkout)
    assert (row["episodes"], row["steps"], row["longest_episode_steps"]) == (50, 5120, 128)
    # the child's loop alone takes well over 0.05 s of CPU; it is counted in the tree's
    assert row["cpu_s"] >= 0.05 and row["wall_s"] > 0 and row["peak_pss_mb"] >= 0
    assert row["cpu_ms_per_step"] == round(1000 * row["cpu_s"] / 5120, 2)


def test_the_command_line_is_balrog_s_hydra_overrides(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path)
    command = balrog_side.balrog_command(checkout, "http://127.0.0.1:9/v1", 32, tmp_path / "o")
    assert command[:2] == [sys.executable, "eval.py"]
    assert dict(a.split("=", 1) for a in command[2:]) == {
        "envs.names": "babyai", "client.client_name": "vllm",
        "client.base_url": "http://127.0.0.1:9/v1", "client.model_id": "fake",
        "eval.num_workers": "32", "eval.output_dir": str(tmp_path / "o")}


def test_a_failed_balrog_run_is_an_error_with_its_output(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path)
    with pytest.raises(RuntimeError, match=re.escape("eval.py exited 1")):
        balrog_side.run_once(checkout, "http://127.0.0.1:9/v1", 13, episodes=50)
    with pytest.raises(RuntimeError, match="wrote 49 episode files, not 50: a worker failed"):
        balrog_side.run_once(checkout, "http://127.0.0.1:9/v1", 7, episodes=50)


def test_no_episode_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="wrote no episode files"):
        balrog_side.read_balrog_episodes(tmp_path)
    (tmp_path / "x_run_00.json").write_text("{not json")
    with pytest.raises(RuntimeError, match=re.escape("x_run_00.json")):
        balrog_side.read_balrog_episodes(tmp_path)
    (tmp_path / "x_run_00.json").write_text(json.dumps({"num_steps": 3}))
    assert balrog_side.read_balrog_episodes(tmp_path) == [{"num_steps": 3}]


def test_a_run_past_its_time_is_stopped_and_reported() -> None:
    with pytest.raises(RuntimeError, match=re.escape("did not finish in 0.5 s; stopped")):
        process_tree.measure([sys.executable, "-c", "import time; time.sleep(600)"],
                             timeout_s=0.5)


@pytest.mark.slow
def test_stop_group_kills_the_run_s_children_too(tmp_path: Path) -> None:
    pid_file = tmp_path / "grandchild.pid"
    script = ("import subprocess, sys, time\n"
              "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
              f"open({str(pid_file) + '.tmp'!r}, 'w').write(str(child.pid))\n"
              f"import os; os.replace({str(pid_file) + '.tmp'!r}, {str(pid_file)!r})\n"
              "time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    try:
        for _ in range(600):  # the grandchild runs once its pid is written (at most 60 s)
            if pid_file.exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        grandchild = psutil.Process(int(pid_file.read_text()))
    finally:
        process_tree.stop_group(proc)
        proc.wait(timeout=30)
    # gone within 30 s (killed, then reaped by init); psutil.TimeoutExpired fails the test
    with contextlib.suppress(psutil.NoSuchProcess):
        grandchild.wait(timeout=30)


def test_cpu_split_tells_a_runs_fixed_cpu_from_each_steps() -> None:
    from benchmarks import cpu_split

    def run(per_task: int, steps: int, orchestrator: float, env: float,
            policy: float) -> dict[str, object]:
        return {"episodes_per_task": per_task, "steps": steps,
                "cpu_s": orchestrator + env + policy,
                "cpu_s_by_process": {"orchestrator": orchestrator, "env_server": env,
                                     "policy_server": policy}}

    # each process: fixed + steps x per step; the long runs' medians are the middle ones
    runs = [run(1, 512, 1.0 + 0.512 * 0.7, 0.5 + 0.512 * 0.4, 0.6 + 0.512 * 0.8),
            run(10, 5120, 1.0 + 5.12 * 0.7, 0.5 + 5.12 * 0.4, 0.6 + 5.12 * 0.8),
            run(10, 5120, 9.0, 9.0, 9.0), run(10, 5120, 0.0, 0.0, 0.0)]
    split = cpu_split.split(runs)
    assert split["orchestrator"] == {"fixed_s": 1.0, "per_step_ms": 0.7, "steps": 5120}
    assert split["env_server"]["fixed_s"] == 0.5 and split["env_server"]["per_step_ms"] == 0.4
    assert split["policy_server"]["per_step_ms"] == 0.8
    assert split["all"] == {"fixed_s": 2.1, "per_step_ms": 1.9, "steps": 5120}
    with pytest.raises(ValueError, match="needs at least one short and one long run"):
        cpu_split.split(runs[1:])
