"""The orchestrator SIGKILLed at 5 random points of a run, restarted each time on the same
output directory: the final directory holds exactly the planned episodes, once each, every
file whole, and (oracle player, same seeds) the same results as a run never interrupted."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tests.support.processes import server_processes

EPISODES_PER_TASK = 6  # x 5 BabyAI tasks = 30
PLANNED = 5 * EPISODES_PER_TASK
MORIA = [sys.executable, "-c", "import sys; from orchestrator.cli import main; sys.exit(main())"]


def _command(out: Path, env: str, policy: str) -> list[str]:
    return [*MORIA, "eval", "envs.names=babyai", f"eval.num_episodes.babyai={EPISODES_PER_TASK}",
            f"eval.output_dir={out}", "agent.type=oracle", "eval.num_workers=2",
            "eval.run_id=resume-test", f"endpoints.env.babyai=[{env}]",
            f"endpoints.policy=[{policy}]"]


def _written(out: Path) -> int:
    return len(list(out.rglob("*_run_*.json")))


def _results(out: Path) -> dict[tuple[str, int], dict]:
    episodes = [json.loads(p.read_text()) for p in out.rglob("*_run_*.json")]
    keys = Counter((e["task"], e["episode_index"]) for e in episodes)
    assert set(keys.values()) == {1}, "an episode was written twice"
    return {(e["task"], e["episode_index"]): {
        "seed": e["seed"], "progression": e["progression"], "num_steps": e["num_steps"],
        "episode_return": e["episode_return"], "end_reason": e["end_reason"],
        "actions": [s["action"] for s in e["steps"]]} for e in episodes}


def test_sigkilled_orchestrator_resumes_to_the_clean_result(tmp_path: Path) -> None:
    rng = random.Random(20261121)
    with server_processes(("env_server", ("--families", "babyai")),
                          ("agent_server", ())) as (env, policy):
        clean, resumed = tmp_path / "clean", tmp_path / "resumed"
        done = subprocess.run(_command(clean, env.target, policy.target), capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]

        kills = 0
        while kills < 5:
            proc = subprocess.Popen(_command(resumed, env.target, policy.target),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            before = _written(resumed)
            target = rng.randint(before, PLANNED - 1)  # kill once this many are written...
            pause = rng.uniform(0.0, 0.3)  # ...plus a moment, so some kills land mid-write
            while _written(resumed) < target and proc.poll() is None:
                time.sleep(0.01)
            time.sleep(pause)
            if proc.poll() is not None:
                break  # it finished before this kill point
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            kills += 1
        assert kills == 5, f"the run finished after {kills} kills; make it longer"
        assert _written(resumed) < PLANNED  # the last kill left work to do

        final = subprocess.run(_command(resumed, env.target, policy.target),
                               capture_output=True, text=True, timeout=600)
        assert final.returncode == 0, final.stderr[-2000:]

    assert _results(resumed) == _results(clean)
    assert len(_results(resumed)) == PLANNED
    assert not list(resumed.rglob("*.tmp")), "a temp file of an interrupted write is left"
    for jsonl in resumed.glob("*.jsonl"):
        for line in jsonl.read_text().splitlines():
            json.loads(line)  # every telemetry line is whole
    reported = [json.loads(line) for line in
                (resumed / "resume-test_episodes.jsonl").read_text().splitlines()]
    keys = Counter((e["task"], e["episode_index"]) for e in reported)
    assert set(keys.values()) == {1}, "an episode was reported twice"
    summary = json.loads((resumed / "summary.json").read_text())
    assert summary["episodes_played"] == PLANNED
    assert summary["average_progress"] == json.loads(
        (clean / "summary.json").read_text())["average_progress"]
