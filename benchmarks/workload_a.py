"""Workload A: the side-by-side workload of BALROG's evaluator and ``moria eval``.

50 BabyAI episodes (BALROG's five tasks x 10) against an OpenAI-compatible server that answers
"toggle" after exactly ``--latency`` seconds (0.1), so every episode runs to its step limit;
the ideal wall time is (the longest episode's steps) x latency, all episodes at once.

    python -m benchmarks.workload_a [--workers 16 50] [--latency 0.1] [--repeat N]
        [--balrog-checkout DIR [--balrog-python PY] [--balrog-workers 32]]

For each ``eval.num_workers`` value it runs the real ``moria eval`` command (local stack: env
and policy servers as child processes) with only that setting changed from the defaults, and
prints: wall seconds, CPU seconds of the whole process tree (``moria`` and its servers; the fake
model server excluded), CPU milliseconds per step, peak proportional set size (PSS) of the tree
sampled every 0.2 s, model calls, and wall over ideal. With ``--balrog-checkout`` (a BALROG
checkout outside this repository, ``benchmarks.balrog_side``) BALROG's own evaluator runs the
same workload against the same fake server, its runs alternated with Moria's, and the last
line gives Moria's best wall time over BALROG's. It asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from benchmarks.balrog_side import BalrogCheckout, BalrogSetupError
from benchmarks.balrog_side import run_once as balrog_once
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


#: A workload A run that has not finished after this many seconds is stopped (BALROG's slowest
#: seen here took 93 s, Moria's with 16 workers 49 s).
TIMEOUT_S = 1800.0


def measure(command: list[str], cwd: Path | None = None, pss_interval_s: float = 0.2,
            timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """Run ``command`` (stdout discarded) and measure it: ``wall_s``, ``cpu_s`` (user + system
    of the whole process tree: every descendant is waited for by its parent, so this
    process's children times hold it), ``cpu_s_by_process`` (per ``role_of``),
    ``peak_pss_mb`` of the tree (sampled every ``pss_interval_s``), ``returncode`` and
    ``stderr_tail`` (its last 2,000 characters). Raises RuntimeError, after killing its
    process group, when it runs longer than ``timeout_s`` seconds."""
    before = os.times()
    start = time.perf_counter()
    with subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, start_new_session=True) as proc, \
            TreeSampler(proc.pid, pss_interval_s) as sampler:
        try:
            _, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise RuntimeError(f"{' '.join(command[:3])} ... did not finish in {timeout_s:g} s; "
                               "stopped") from None
        except BaseException:  # Ctrl-C: its own session hears no terminal signal
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system)
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "cpu_s_by_process": sampler.cpu_by_role(),
            "peak_pss_mb": round(sampler.peak_pss / 2**20), "returncode": proc.returncode,
            "stderr_tail": err[-2000:]}


def run_once(base_url: str, workers: int, out: Path) -> dict[str, Any]:
    """One ``moria eval`` of workload A with ``eval.num_workers=workers``; its figures.
    ``base_url`` is the fake server's OpenAI base URL (``http://127.0.0.1:<port>/v1``).
    Raises RuntimeError when the run fails."""
    command = eval_command(out, "envs.names=babyai", f"tasks.babyai_tasks=[{TASKS}]",
                           "eval.num_episodes.babyai=10", "client.client_name=vllm",
                           f"client.base_url={base_url}", "client.model_id=fake",
                           f"eval.num_workers={workers}")
    figures = measure(command)
    if figures["returncode"] != 0:
        raise RuntimeError(f"moria eval exited {figures['returncode']}: "
                           f"{figures['stderr_tail']}")
    summary = json.loads((out / "summary.json").read_text())
    episodes = read_episodes(out)
    steps = sum(e.num_steps for e in episodes)
    longest = max(e.num_steps for e in episodes)
    return {"system": "moria", "num_workers": workers, "episodes": len(episodes),
            "steps": steps, "wall_s": figures["wall_s"], "cpu_s": figures["cpu_s"],
            "cpu_ms_per_step": round(1000 * figures["cpu_s"] / max(steps, 1), 2),
            "cpu_s_by_process": figures["cpu_s_by_process"],
            "peak_pss_mb": figures["peak_pss_mb"], "longest_episode_steps": longest,
            "episodes_scored": summary["outcome"]["episodes_scored"]}


def schedule(workers: list[int], balrog_workers: list[int], repeat: int) -> list[tuple[str, int]]:
    """The order of the runs: ``repeat`` passes, each alternating Moria's and BALROG's
    settings (``[("moria", 50), ("balrog", 32), ("moria", 16), ...]``), so that a slow or
    fast spell of the machine falls on both systems."""
    one_pass: list[tuple[str, int]] = []
    for index in range(max(len(workers), len(balrog_workers))):
        one_pass += [("moria", workers[index])] if index < len(workers) else []
        one_pass += [("balrog", balrog_workers[index])] if index < len(balrog_workers) else []
    return one_pass * repeat


def run(workers: list[int], latency: float = 0.1, balrog: BalrogCheckout | None = None,
        balrog_workers: list[int] | None = None, repeat: int = 1) -> list[dict[str, Any]]:
    """Workload A for each ``eval.num_workers`` value in ``workers`` (Moria) and, with
    ``balrog``, for each value in ``balrog_workers`` (BALROG's evaluator), in the order of
    ``schedule``, against one fake server answering after ``latency`` seconds; one figures row
    each (printed as a JSON line as it comes), with the ideal wall time, wall over ideal, the
    load average before the run and the fake server's CPU seconds. Raises RuntimeError when
    a run fails."""
    fake = subprocess.Popen([sys.executable, "-m", "tests.support.fake_openai", "--port", "0",
                             "--latency", str(latency), "--reply", "toggle"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    plan = schedule(workers, (balrog_workers or []) if balrog else [], repeat)
    rows = []
    try:
        base_url = _announced_url(fake)
        for system, count in plan:
            load = os.getloadavg()
            fake_cpu = sum(psutil.Process(fake.pid).cpu_times()[:2])
            if system == "balrog":
                assert balrog is not None
                row = balrog_once(balrog, base_url, count)
            else:
                with tempfile.TemporaryDirectory(prefix="moria-workload-a-") as out:
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


def side_by_side(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Moria's best wall time over BALROG's best, from one sitting's rows (None without a
    row of each): ``{"moria_best_wall_s", "balrog_best_wall_s", "ratio", ...}``, each best
    with its ``eval.num_workers``."""
    best = {}
    for system in ("moria", "balrog"):
        mine = [r for r in rows if r.get("system") == system]
        if not mine:
            return None
        best[system] = min(mine, key=lambda r: r["wall_s"])
    return {"moria_best_wall_s": best["moria"]["wall_s"],
            "moria_best_workers": best["moria"]["num_workers"],
            "balrog_best_wall_s": best["balrog"]["wall_s"],
            "balrog_best_workers": best["balrog"]["num_workers"],
            "balrog_commit": best["balrog"].get("balrog_commit", "unknown"),
            "ratio": round(best["moria"]["wall_s"] / best["balrog"]["wall_s"], 3)}


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (a worker count)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_balrog_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that put BALROG's own evaluator beside Moria (``benchmarks.workload_a``
    and ``benchmarks.run``)."""
    parser.add_argument("--balrog-checkout", type=Path, default=None,
                        help="a BALROG checkout outside this repository: runs its eval.py on "
                        "the same workload, alternated with Moria's runs")
    parser.add_argument("--balrog-python", type=Path, default=None,
                        help="the interpreter BALROG is installed in (default: "
                        "<checkout>/.venv/bin/python)")
    parser.add_argument("--balrog-workers", type=positive_int, nargs="+", default=[32],
                        help="BALROG's eval.num_workers values (default 32, its best here)")


def balrog_from(args: argparse.Namespace, parser: argparse.ArgumentParser,
                ) -> BalrogCheckout | None:
    """The checkout the options name (None without ``--balrog-checkout``); a bad one is a
    usage error."""
    if args.balrog_checkout is None:
        if args.balrog_python is not None:
            parser.error("--balrog-python needs --balrog-checkout")
        return None
    try:
        return BalrogCheckout.at(args.balrog_checkout, args.balrog_python)
    except BalrogSetupError as exc:
        parser.error(str(exc))
    return None  # not reached: parser.error exits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.workload_a",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--workers", type=positive_int, nargs="+", default=[16, 50])
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--repeat", type=positive_int, default=1,
                        help="passes over the settings (alternating Moria and BALROG)")
    add_balrog_arguments(parser)
    args = parser.parse_args(argv)
    balrog = balrog_from(args, parser)
    rows = run(args.workers, args.latency, balrog, args.balrog_workers, args.repeat)
    ratio = side_by_side(rows)
    if ratio is not None:
        print(json.dumps({"side_by_side": ratio}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
