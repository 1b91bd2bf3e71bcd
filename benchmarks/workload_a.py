"""Workload A: the side-by-side workload of BALROG's evaluator and ``moria eval``.

50 BabyAI episodes (BALROG's five tasks x 10) against an OpenAI-compatible server that answers
"toggle" after exactly ``--latency`` seconds (0.1), so every episode runs to its step limit;
the ideal wall time is (the longest episode's steps) x latency, all episodes at once.

    python -m benchmarks.workload_a [--workers 16 32 50] [--latency 0.1]

For each ``eval.num_workers`` value it runs the real ``moria eval`` command (local stack: env
and policy servers as child processes) with only that setting changed from the defaults, and
prints: wall seconds, CPU seconds of the whole process tree (``moria`` and its servers; the fake
model server excluded), CPU milliseconds per step, peak proportional set size (PSS) of the tree
sampled every 0.2 s, model calls, and wall over ideal. It asserts nothing: BALROG cannot be in
the repository, so the README keeps the side-by-side table (BALROG run from its own checkout,
same machine, same sitting).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from benchmarks.run import _announced_url, eval_command, read_episodes

TASKS = ",".join(f"BabyAI-MixedTrainLocal-v0/{kind}"
                 for kind in ("goto", "pickup", "open", "putnext", "pick_up_seq_go_to"))


#: Process role by a word of its command line (the local stack's servers are child processes).
ROLES = (("agent_server", "policy_server"), ("env_server", "env_server"))


def role_of(cmdline: list[str]) -> str:
    """``policy_server``, ``env_server`` or ``orchestrator`` (anything else in the tree)."""
    joined = " ".join(cmdline)
    return next((role for word, role in ROLES if word in joined), "orchestrator")


class TreeSampler:
    """Samples the peak PSS (bytes) of a process and its descendants until stopped, and the
    last CPU seconds (user + system) seen of each, summed per role (``role_of``): a server's
    final figure may miss up to one interval before it exits."""

    def __init__(self, pid: int, interval_s: float = 0.2) -> None:
        self.root = psutil.Process(pid)
        self.interval_s = interval_s
        self.peak_pss = 0
        self._cpu: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            total = 0
            try:
                for proc in [self.root, *self.root.children(recursive=True)]:
                    try:
                        total += proc.memory_full_info().pss
                        times = proc.cpu_times()
                        role = self._cpu.get(proc.pid, (role_of(proc.cmdline()), 0.0))[0]
                        self._cpu[proc.pid] = (role, times.user + times.system)
                    except (psutil.NoSuchProcess, psutil.AccessDenied):
                        continue
            except psutil.NoSuchProcess:
                return
            self.peak_pss = max(self.peak_pss, total)
            self._stop.wait(self.interval_s)

    def cpu_by_role(self) -> dict[str, float]:
        """CPU seconds per role, as last sampled."""
        totals: dict[str, float] = {}
        for role, seconds in self._cpu.values():
            totals[role] = round(totals.get(role, 0.0) + seconds, 2)
        return totals


def run_once(base_url: str, workers: int, out: Path) -> dict[str, Any]:
    """One ``moria eval`` of workload A with ``eval.num_workers=workers``; its figures."""
    command = eval_command(out, "envs.names=babyai", f"tasks.babyai_tasks=[{TASKS}]",
                           "eval.num_episodes.babyai=10", "client.client_name=vllm",
                           f"client.base_url={base_url}/v1", "client.model_id=fake",
                           f"eval.num_workers={workers}")
    before = os.times()
    start = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True) as proc, TreeSampler(proc.pid) as sampler:
        _, err = proc.communicate()
    wall = time.perf_counter() - start
    after = os.times()
    if proc.returncode != 0:
        raise RuntimeError(f"moria eval exited {proc.returncode}: {err[-2000:]}")
    # every descendant was waited for by its parent, so the children's times hold the tree
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system)
    summary = json.loads((out / "summary.json").read_text())
    episodes = read_episodes(out)
    steps = sum(e.num_steps for e in episodes)
    longest = max(e.num_steps for e in episodes)
    return {"num_workers": workers, "episodes": len(episodes), "steps": steps,
            "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "cpu_ms_per_step": round(1000 * cpu / max(steps, 1), 2),
            "cpu_s_by_process": sampler.cpu_by_role(),
            "peak_pss_mb": round(sampler.peak_pss / 2**20), "longest_episode_steps": longest,
            "episodes_scored": summary["outcome"]["episodes_scored"]}


def run(workers: list[int], latency: float = 0.1) -> list[dict[str, Any]]:
    """Workload A once per value of ``workers`` (``eval.num_workers``) against one fake server
    answering after ``latency`` seconds; one figures row each (printed as a JSON line as it
    comes), with the ideal wall time, wall over ideal and the load average before the run.
    Raises RuntimeError when ``moria eval`` fails."""
    fake = subprocess.Popen([sys.executable, "-m", "tests.support.fake_openai", "--port", "0",
                             "--latency", str(latency), "--reply", "toggle"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    rows = []
    try:
        base_url = _announced_url(fake)
        for count in workers:
            with tempfile.TemporaryDirectory(prefix="moria-workload-a-") as out:
                load = os.getloadavg()
                fake_cpu = sum(psutil.Process(fake.pid).cpu_times()[:2])
                row = run_once(base_url, count, Path(out))
                row["ideal_s"] = round(row["longest_episode_steps"] * latency, 2)
                row["wall_over_ideal"] = round(row["wall_s"] / row["ideal_s"], 2)
                row["load_average_before"] = [round(x, 2) for x in load]
                row["fake_model_server_cpu_s"] = round(
                    sum(psutil.Process(fake.pid).cpu_times()[:2]) - fake_cpu, 2)
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        fake.terminate()
        fake.wait(timeout=10)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.workload_a",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[16, 50])
    parser.add_argument("--latency", type=float, default=0.1)
    args = parser.parse_args(argv)
    run(args.workers, args.latency)
    return 0


if __name__ == "__main__":
    sys.exit(main())
