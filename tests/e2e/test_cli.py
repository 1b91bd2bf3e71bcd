"""``moria`` as a user runs it: the CLI starts the local stack (real env and agent server
processes on unix sockets), runs episodes, writes results, resumes, and rejects bad input."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.processes import interruptible

ROOT = Path(__file__).resolve().parents[2]


def moria(*args: str, env: dict[str, str] | None = None, timeout: float = 600,
          one_core: bool = False) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a subprocess (as ``python -m orchestrator.apps.cli``); ``one_core``:
    pinned to one of this process's cores (``sched_setaffinity``), as on a 1-core machine."""
    pin = None
    if one_core:
        core = min(os.sched_getaffinity(0))
        def pin() -> None:
            os.sched_setaffinity(0, {core})
    return subprocess.run([sys.executable, "-m", "orchestrator.apps.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {}), "COLUMNS": "200"},
                          preexec_fn=pin)


def test_oracle_eval_reaches_95_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "oracle"
    run = moria("eval", "envs.names=babyai", "agent.type=oracle",
                "eval.num_episodes.babyai=5", f"eval.output_dir={out}", "--no-progress")
    assert run.returncode == 0, run.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["average_progress"] >= 95.0
    assert report["environments"]["babyai"]["episodes_played"] == 25
    summary = json.loads((out / "babyai" / "babyai_summary.json").read_text())
    assert len(summary["tasks"]) == 5
    episode = json.loads((out / "babyai" / "BabyAI-MixedTrainLocal-v0__goto" /
                          "BabyAI-MixedTrainLocal-v0__goto_run_00.json").read_text())
    assert episode["task"] == "BabyAI-MixedTrainLocal-v0/goto"
    assert episode["seed"] > 0 and episode["progression"] == 1.0
    csv_head = (out / "babyai" / "BabyAI-MixedTrainLocal-v0__goto" /
                "BabyAI-MixedTrainLocal-v0__goto_run_00.csv").read_text().splitlines()[0]
    assert csv_head.startswith("Step,Action,Reasoning,Observation,Reward,Done")
    run_id = json.loads((out / "run.json").read_text())["run_id"]
    steps = (out / f"{run_id}_steps.jsonl").read_text().splitlines()
    episodes = [json.loads(p.read_text()) for p in out.rglob("*_run_*.json")]
    assert len(steps) == sum(e["num_steps"] for e in episodes)  # one telemetry line per step
    assert json.loads(steps[0])["type"] == "step"
    assert len((out / f"{run_id}_episodes.jsonl").read_text().splitlines()) == 25

    # resume: delete two episodes, rerun, only those two run again with the same seeds; this
    # time on two env servers and two policy servers pinned to one core, which is said
    removed = sorted((out / "babyai" / "BabyAI-MixedTrainLocal-v0__open").glob("*_run_0[12].json"))
    seeds = [json.loads(p.read_text())["seed"] for p in removed]
    for p in removed:
        p.unlink()
    again = moria("eval", "envs.names=babyai", "agent.type=oracle",
                  "eval.num_episodes.babyai=5", f"eval.output_dir={out}", "--no-progress",
                  "eval.local_servers=2", one_core=True)
    assert again.returncode == 0, again.stderr
    assert ("note: eval.local_servers=2 starts 2 env server(s) and 2 policy server(s) on 1 "
            "core(s): they take turns on the cores; eval.local_servers=auto would start 1 "
            "and 1 of them") in " ".join(again.stderr.split()), again.stderr
    for second in ("env_server-2.log", "agent_server-2.log"):
        assert (out / "logs" / second).is_file(), sorted((out / "logs").iterdir())
    assert "ran 2 episode(s), 23 already done" in again.stderr
    assert [json.loads(p.read_text())["seed"] for p in removed] == seeds

    table = moria("report", str(out))
    assert table.returncode == 0 and "BabyAI-MixedTrainLocal-v0/goto" in table.stdout


def test_unknown_key_and_bad_value_exit_2_naming_the_key(tmp_path: Path) -> None:
    bad_key = moria("eval", "agent.typo=1", f"eval.output_dir={tmp_path}")
    assert bad_key.returncode == 2
    assert "agent.typo" in bad_key.stderr and "max_text_history" in bad_key.stderr
    bad_value = moria("eval", "agent.type=genius", f"eval.output_dir={tmp_path}")
    assert bad_value.returncode == 2
    assert "agent.type" in bad_value.stderr and "robust_cot" in bad_value.stderr
    bad_env = moria("eval", "envs.names=babyai-chess", f"eval.output_dir={tmp_path}")
    assert bad_env.returncode == 2 and "'chess'" in bad_env.stderr
    assert not any(tmp_path.rglob("*_run_*.json"))


def test_missing_api_key_is_reported_before_any_episode(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    run = subprocess.run([sys.executable, "-m", "orchestrator.apps.cli", "eval",
                          "client.client_name=openai", "client.model_id=gpt-4o",
                          f"eval.output_dir={tmp_path}", "--no-progress"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 2
    assert "OPENAI_API_KEY" in run.stderr
    assert not any(tmp_path.rglob("*_run_*.json"))


def test_tasks_lists_babyai() -> None:
    run = moria("tasks", "--env", "babyai")
    assert run.returncode == 0, run.stderr
    assert "BabyAI-MixedTrainLocal-v0/pick_up_seq_go_to" in run.stdout


@pytest.mark.slow
def test_real_local_model_plays_an_episode(tmp_path: Path) -> None:
    """The embedded llama.cpp backend, the real (small) SmolLM2 model, grammar-constrained to
    the action list, through the whole stack."""
    out = tmp_path / "local"
    run = moria("eval", "envs.names=babyai", "eval.num_episodes.babyai=1",
                "tasks.babyai_tasks=[BabyAI-MixedTrainLocal-v0/goto]",
                "client.model_id=smollm2-135m-instruct", "client.constrain_actions=true",
                "client.generate_kwargs.temperature=0", "eval.max_steps_per_episode=4",
                "agent.max_text_history=2", f"eval.output_dir={out}", "--no-progress")
    assert run.returncode == 0, run.stderr
    episode = json.loads((out / "babyai" / "BabyAI-MixedTrainLocal-v0__goto" /
                          "BabyAI-MixedTrainLocal-v0__goto_run_00.json").read_text())
    assert episode["num_steps"] == 4
    assert episode["input_tokens"] > 0 and episode["output_tokens"] > 0
    actions = {"turn left", "turn right", "go forward", "pick up", "drop", "toggle"}
    assert all(s["valid"] and s["raw_completion"] in actions for s in episode["steps"])
    assert episode["client"]["model_id"] == "smollm2-135m-instruct"


def test_a_dead_local_server_stops_the_run_and_keeps_results(tmp_path: Path) -> None:
    out = tmp_path / "crash"
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.apps.cli", "eval",
                             "agent.type=dummy",
                             "eval.num_episodes.babyai=100", "eval.num_workers=2",
                             f"eval.output_dir={out}", "--no-progress"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while len(list(out.rglob("*_run_*.json"))) < 3:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
        children = subprocess.run(["pgrep", "-P", str(proc.pid), "-f", "env_server"],
                                  capture_output=True, text=True).stdout.split()
        assert len(children) == 1
        os.kill(int(children[0]), signal.SIGKILL)
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    assert "env_server exited" in stderr
    kept = list(out.rglob("*_run_*.json"))
    assert len(kept) >= 3
    assert all(json.loads(p.read_text())["end_reason"] in {"terminated", "truncated"}
               for p in kept)
    survivors = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True)
    assert survivors.stdout.strip() == ""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_stops_servers_and_keeps_results(tmp_path: Path, sig: signal.Signals) -> None:
    """Ctrl-C (SIGINT) or SIGTERM: the local servers stop, finished episodes stay, and the next
    run resumes from them."""
    out = tmp_path / "interrupted"
    command = [sys.executable, "-m", "orchestrator.apps.cli", "eval", "agent.type=dummy",
               "eval.num_episodes.babyai=100", "eval.num_workers=2", f"eval.output_dir={out}",
               "--no-progress"]
    proc = subprocess.Popen(interruptible(command), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while len(list(out.rglob("*_run_*.json"))) < 3:
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
        children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                  text=True).stdout.split()
        assert len(children) == 2  # env server and agent server
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr
    for pid in children:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(
            f"/proc/{pid}/status").read_text().lower()
    saved = len(list(out.rglob("*_run_*.json")))
    assert saved >= 3
    resumed = moria("eval", "agent.type=dummy", "eval.num_episodes.babyai=1",
                    f"eval.output_dir={out}", "--no-progress")
    assert resumed.returncode == 0, resumed.stderr
    counts = re.search(r"ran (\d+) episode\(s\), (\d+) already done", resumed.stderr)
    assert counts is not None
    ran, done = int(counts.group(1)), int(counts.group(2))
    assert done >= 1 and ran + done == 5  # goto #0 was kept, the rest ran
