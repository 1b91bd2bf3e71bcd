"""A benchmarked command's process tree: its CPU, its peak memory, and stopping it.

``measure`` runs one command (``moria eval``, or BALROG's ``eval.py`` in
``benchmarks.balrog_side``) in its own session and reads its wall time, the CPU of the whole
tree and the peak proportional set size (PSS) of the tree, sampled by ``TreeSampler``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import psutil

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
            stop_group(proc)
            proc.communicate()
            raise RuntimeError(f"{' '.join(command[:3])} ... did not finish in {timeout_s:g} s; "
                               "stopped") from None
        except BaseException:  # Ctrl-C: its own session hears no terminal signal
            stop_group(proc)
            raise
    wall = time.perf_counter() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system)
    return {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
            "cpu_s_by_process": sampler.cpu_by_role(),
            "peak_pss_mb": round(sampler.peak_pss / 2**20), "returncode": proc.returncode,
            "stderr_tail": err[-2000:]}


def stop_group(proc: subprocess.Popen[Any]) -> None:
    """Kill every process of ``proc``'s process group (``proc`` was started with
    ``start_new_session=True``, so the group is its own tree); the caller reaps ``proc``."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
