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
import functools
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from benchmarks.balrog_side import BalrogCheckout, BalrogSetupError
from benchmarks.balrog_side import run_once as balrog_once
from benchmarks.common import announced_url, eval_command, read_episodes
from benchmarks.goals import best_row
from benchmarks.process_tree import measure

#: BALROG's five BabyAI tasks, each played ``EPISODES_PER_TASK`` times (BALROG's default).
TASK_KINDS = ("goto", "pickup", "open", "putnext", "pick_up_seq_go_to")
TASKS = ",".join(f"BabyAI-MixedTrainLocal-v0/{kind}" for kind in TASK_KINDS)
EPISODES_PER_TASK = 10
EPISODES = len(TASK_KINDS) * EPISODES_PER_TASK


def run_once(base_url: str, workers: int,
             episodes_per_task: int = EPISODES_PER_TASK) -> dict[str, Any]:
    """One ``moria eval`` of workload A with ``eval.num_workers=workers`` (results in a
    temporary folder); its figures. ``base_url`` is the fake server's OpenAI base URL
    (``http://127.0.0.1:<port>/v1``); ``episodes_per_task``: workload A's 10, or fewer for a
    shorter run of the same kind (``benchmarks.cpu_split``). Raises RuntimeError when the run
    fails or scores other than its episodes (``EPISODES`` for workload A)."""
    expected = len(TASK_KINDS) * episodes_per_task
    with tempfile.TemporaryDirectory(prefix="moria-workload-a-") as tmp:
        out = Path(tmp)
        command = eval_command(out, "envs.names=babyai", f"tasks.babyai_tasks=[{TASKS}]",
                               f"eval.num_episodes.babyai={episodes_per_task}",
                               "client.client_name=vllm", f"client.base_url={base_url}",
                               "client.model_id=fake", f"eval.num_workers={workers}")
        figures = measure(command)
        if figures["returncode"] != 0:
            raise RuntimeError(f"moria eval exited {figures['returncode']}: "
                               f"{figures['stderr_tail']}")
        summary = json.loads((out / "summary.json").read_text())
        episodes = read_episodes(out)
    scored = summary["outcome"]["episodes_scored"]
    if len(episodes) != expected or scored != expected:
        raise RuntimeError(f"moria eval wrote {len(episodes)} episodes and scored {scored}, "
                           f"not {expected}: its figures would not be workload A's")
    steps = sum(e.num_steps for e in episodes)
    longest = max(e.num_steps for e in episodes)
    return {"system": "moria", "num_workers": workers, "episodes": len(episodes),
            "steps": steps, "wall_s": figures["wall_s"], "cpu_s": figures["cpu_s"],
            "cpu_ms_per_step": round(1000 * figures["cpu_s"] / max(steps, 1), 2),
            "cpu_s_by_process": figures["cpu_s_by_process"],
            "peak_pss_mb": figures["peak_pss_mb"], "longest_episode_steps": longest,
            "episodes_scored": scored}


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
        base_url = announced_url(fake)
        runners: dict[str, Callable[[int], dict[str, Any]]] = {
            "moria": functools.partial(run_once, base_url)}
        if balrog is not None:
            runners["balrog"] = functools.partial(balrog_once, balrog, base_url,
                                                  episodes=EPISODES)
        for system, count in plan:
            load = os.getloadavg()
            fake_cpu = sum(psutil.Process(fake.pid).cpu_times()[:2])
            row = runners[system](count)
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
    moria, balrog = best_row(rows, "moria"), best_row(rows, "balrog")
    if moria is None or balrog is None:
        return None
    return {"moria_best_wall_s": moria["wall_s"], "moria_best_workers": moria["num_workers"],
            "balrog_best_wall_s": balrog["wall_s"], "balrog_best_workers": balrog["num_workers"],
            "balrog_commit": balrog.get("balrog_commit", "unknown"),
            "ratio": round(moria["wall_s"] / balrog["wall_s"], 3)}


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
