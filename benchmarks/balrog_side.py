"""BALROG's own evaluator on workload A, for P3's side-by-side figure (issue 17).

BALROG cannot be in this repository, so this module runs it from a checkout outside it, with
an interpreter that has BALROG installed (docs/performance.md, "BALROG beside Moria", says how
to build one): its ``eval.py`` with ``envs.names=babyai`` and its other settings at their
defaults (BALROG's five BabyAI tasks x 10 episodes), pointed at the same fake
OpenAI-compatible server as Moria (``client.client_name=vllm``), with only
``eval.num_workers`` changed. BALROG's results go to a temporary folder; BALROG writes its
own log to ``eval.log`` in the checkout (its Hydra settings run it in the working folder).

The figures are read the same way as Moria's (``benchmarks.process_tree.measure``): wall
seconds, CPU seconds of the whole process tree (BALROG's worker processes included), peak
proportional set size (PSS) of the tree (sampled every second: reading 33 processes' memory
takes most of a second of CPU on these machines), and the steps of the episode files BALROG wrote
(``<env>/<task>/<task>_run_NN.json``, ``num_steps``).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.process_tree import measure


class BalrogSetupError(ValueError):
    """The BALROG checkout or its interpreter is not usable (the message says which and why)."""


@dataclass(frozen=True)
class BalrogCheckout:
    """A BALROG checkout (the folder holding ``eval.py`` and ``balrog/``) and the Python
    interpreter BALROG is installed in."""

    root: Path
    python: Path

    @classmethod
    def at(cls, root: str | Path, python: str | Path | None = None) -> BalrogCheckout:
        """The checkout at ``root``; ``python`` defaults to ``<root>/.venv/bin/python``.
        Raises BalrogSetupError when ``eval.py``, ``balrog/config/config.yaml`` or the
        interpreter is missing."""
        root = Path(root).expanduser().resolve()
        interpreter = Path(python).expanduser() if python else root / ".venv" / "bin" / "python"
        for needed in (root / "eval.py", root / "balrog" / "config" / "config.yaml"):
            if not needed.is_file():
                raise BalrogSetupError(f"{root} is not a BALROG checkout: {needed} is missing")
        if not interpreter.is_file():
            raise BalrogSetupError(
                f"no Python interpreter at {interpreter}; give the one BALROG is installed in "
                "(--balrog-python)")
        return cls(root, interpreter)

    def commit(self) -> str:
        """The checkout's commit (``git rev-parse HEAD``); for a tree exported without git,
        the contents of its ``COMMIT`` file; else ``unknown``."""
        if (self.root / ".git").exists():  # not an outer repository's HEAD
            try:
                done = subprocess.run(["git", "-C", str(self.root), "rev-parse", "HEAD"],
                                      capture_output=True, text=True, timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                done = None
            if done is not None and done.returncode == 0:
                return done.stdout.strip()
        stamp = self.root / "COMMIT"
        return stamp.read_text().strip() if stamp.is_file() else "unknown"


def balrog_command(checkout: BalrogCheckout, base_url: str, workers: int,
                   out: Path) -> list[str]:
    """The command line of one BALROG workload A run (run it with ``cwd=checkout.root``, as
    BALROG's README does): ``base_url`` is the fake server's OpenAI base URL
    (``http://127.0.0.1:<port>/v1``), results under ``out``."""
    return [str(checkout.python), "eval.py", "envs.names=babyai", "client.client_name=vllm",
            f"client.base_url={base_url}", "client.model_id=fake",
            f"eval.num_workers={workers}", f"eval.output_dir={out}"]


def read_balrog_episodes(out: Path) -> list[dict[str, Any]]:
    """The episode files BALROG wrote under ``out`` (``*_run_NN.json``, parsed). Raises
    RuntimeError when there is none or one is unreadable."""
    episodes = []
    for path in sorted(out.rglob("*_run_*.json")):
        try:
            episodes.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"BALROG episode file {path}: {exc}") from None
    if not episodes:
        raise RuntimeError(f"BALROG wrote no episode files under {out}")
    return episodes


def run_once(checkout: BalrogCheckout, base_url: str, workers: int, *,
             episodes: int) -> dict[str, Any]:
    """One BALROG run of workload A with ``eval.num_workers=workers``; its figures in the
    shape of Moria's rows (``system`` = ``balrog``, without the per-process split).
    ``episodes`` is what BALROG's defaults play (``benchmarks.workload_a.EPISODES``). Raises
    RuntimeError when BALROG exits non-zero or writes another number of episode files (its
    ``eval.py`` exits 0 when a worker fails)."""
    with tempfile.TemporaryDirectory(prefix="moria-balrog-side-") as tmp:
        out = Path(tmp)
        # its 33 processes: sampling their memory every 0.2 s would take a tenth of a core
        figures = measure(balrog_command(checkout, base_url, workers, out), cwd=checkout.root,
                          pss_interval_s=1.0)
        if figures["returncode"] != 0:
            raise RuntimeError(f"BALROG's eval.py exited {figures['returncode']}: "
                               f"{figures['stderr_tail']}")
        written = read_balrog_episodes(out)
    if len(written) != episodes:
        raise RuntimeError(f"BALROG wrote {len(written)} episode files, not {episodes}: a "
                           f"worker failed (its eval.log in {checkout.root} says why)")
    steps = sum(int(e["num_steps"]) for e in written)
    return {"system": "balrog", "balrog_commit": checkout.commit(), "num_workers": workers,
            "episodes": len(written), "steps": steps,
            "wall_s": figures["wall_s"], "cpu_s": figures["cpu_s"],
            "cpu_ms_per_step": round(1000 * figures["cpu_s"] / max(steps, 1), 2),
            "peak_pss_mb": figures["peak_pss_mb"],
            "longest_episode_steps": max(int(e["num_steps"]) for e in written)}
