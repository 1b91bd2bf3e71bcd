"""The orchestrator SIGKILLed at 5 exact points of a run, restarted each time on the same
output directory: the final directory holds exactly the planned episodes, once each, every
file whole, and (oracle player, same seeds) the same results as a run never interrupted.

The kills come from the process itself (``tests.support.kill_switch``), at fixed episode writes
and stages: between two episodes, with an episode's JSON (or CSV) in a temp file not yet renamed,
and with its files in place but its telemetry line not yet written. No timer decides where a
kill lands, so every kill point is reached however fast or loaded the machine is."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from orchestrator.store.episodes import episode_paths
from tests.support.processes import ROOT, server_processes

EPISODES_PER_TASK = 6  # x 5 BabyAI tasks = 30
PLANNED = 5 * EPISODES_PER_TASK
MORIA = [sys.executable, "-c",
         "import sys; from orchestrator.apps.cli import main; sys.exit(main())"]
#: (the N-th episode written to the directory, where in its write the process dies)
KILLS = ((3, "reported"), (7, "json_tmp"), (12, "files"), (18, "csv_tmp"), (25, "reported"))


def _overrides(out: Path, env: str, policy: str) -> list[str]:
    return ["eval", "envs.names=babyai", f"eval.num_episodes.babyai={EPISODES_PER_TASK}",
            f"eval.output_dir={out}", "agent.type=oracle", "eval.num_workers=2",
            "eval.run_id=resume-test", f"endpoints.env.babyai=[{env}]",
            f"endpoints.policy=[{policy}]"]


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)


def _written(out: Path) -> int:
    return len(list(out.rglob("*_run_*.json")))


def _reported(out: Path) -> list[tuple[str, int]]:
    path = out / "resume-test_episodes.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    return [(e["task"], e["episode_index"]) for e in map(json.loads, lines)]


def _results(out: Path) -> dict[tuple[str, int], dict]:
    episodes = [json.loads(p.read_text()) for p in out.rglob("*_run_*.json")]
    keys = Counter((e["task"], e["episode_index"]) for e in episodes)
    assert set(keys.values()) == {1}, "an episode was written twice"
    return {(e["task"], e["episode_index"]): {
        "seed": e["seed"], "progression": e["progression"], "num_steps": e["num_steps"],
        "episode_return": e["episode_return"], "end_reason": e["end_reason"],
        "actions": [s["action"] for s in e["steps"]]} for e in episodes}


def _check_kill(out: Path, at: int, stage: str, run: subprocess.CompletedProcess[str],
                caught_file: Path) -> None:
    """The process died by its own SIGKILL at (``at``, ``stage``), leaving the episode it
    caught (``caught_file``, the kill switch's record; its stderr line is for people: the
    progress display can run into it) in the state that stage means."""
    assert run.returncode == -signal.SIGKILL, (
        f"no kill at #{at} {stage} (exit {run.returncode}):\n{run.stderr[-2000:]}")
    caught = json.loads(caught_file.read_text())
    assert caught["stage"] == stage, caught
    env, task, index = caught["env"], caught["task"], caught["episode_index"]
    json_path, csv_path = episode_paths(out, env, task, int(index))
    temps = list(json_path.parent.glob(".*.tmp"))
    if stage == "csv_tmp":
        assert not csv_path.exists() and not json_path.exists()
        assert [t.name for t in temps if t.name.startswith(f".{csv_path.name}.")], temps
    elif stage == "json_tmp":
        assert csv_path.exists() and not json_path.exists()
        assert [t.name for t in temps if t.name.startswith(f".{json_path.name}.")], temps
    else:
        assert json_path.exists() and csv_path.exists()
        assert ((task, int(index)) in _reported(out)) == (stage == "reported")
    assert _written(out) < PLANNED


def test_sigkilled_orchestrator_resumes_to_the_clean_result(tmp_path: Path) -> None:
    with server_processes(("env_server", ("--families", "babyai")),
                          ("agent_server", ())) as (env, policy):
        clean, resumed = tmp_path / "clean", tmp_path / "resumed"
        done = _run([*MORIA, *_overrides(clean, env.target, policy.target)])
        assert done.returncode == 0, done.stderr[-2000:]

        for at, stage in KILLS:
            caught = tmp_path / f"caught-{at}.json"
            killed = _run([sys.executable, "-m", "tests.support.kill_switch", "--out",
                           str(resumed), "--at", str(at), "--stage", stage,
                           "--record", str(caught), "--",
                           *_overrides(resumed, env.target, policy.target)])
            _check_kill(resumed, at, stage, killed, caught)

        final = _run([*MORIA, *_overrides(resumed, env.target, policy.target)])
        assert final.returncode == 0, final.stderr[-2000:]

    assert _results(resumed) == _results(clean)
    assert len(_results(resumed)) == PLANNED
    assert not list(resumed.rglob("*.tmp")), "a temp file of an interrupted write is left"
    for jsonl in resumed.glob("*.jsonl"):
        for line in jsonl.read_text().splitlines():
            json.loads(line)  # every telemetry line is whole
    keys = Counter(_reported(resumed))
    assert set(keys.values()) == {1}, "an episode was reported twice"
    summary = json.loads((resumed / "summary.json").read_text())
    assert summary["episodes_played"] == PLANNED
    assert summary["average_progress"] == json.loads(
        (clean / "summary.json").read_text())["average_progress"]
