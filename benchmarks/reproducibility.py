"""Same seeds, same episodes: play a fixed set of model-free runs with one checkout of Moria,
then compare two such sets episode file by episode file.

    python -m benchmarks.reproducibility run CHECKOUT OUT      # plays the runs of RUNS
    python -m benchmarks.reproducibility compare OUT_A OUT_B   # exit 0 when byte-equal

``run`` starts ``moria eval`` from ``CHECKOUT`` (its own sources first on the path, the
interpreter running this script), one output folder per entry of :data:`RUNS` under ``OUT``:
oracle, random, scripted and RL players on every family that can play without a model.
``compare`` reads every episode JSON and trajectory CSV of both sets and compares them after
removing what depends on the clock or the machine (:data:`VOLATILE_KEYS`: timestamps, wall and
model latencies, versions of packages, the run id); every other byte must be equal. Use it to
show that a refactoring changed no behaviour: run it with the commit before and after.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

#: name -> ``moria eval`` overrides. Model-free players only, so results depend on seeds alone.
RUNS: Final[dict[str, list[str]]] = {
    "babyai-oracle": ["envs.names=babyai", "agent.type=oracle", "eval.num_episodes.babyai=2",
                      "tasks.babyai_tasks=[BabyAI-MixedTrainLocal-v0/goto,"
                      "BabyAI-MixedTrainLocal-v0/pickup]"],
    "babaisai-oracle": ["envs.names=babaisai", "agent.type=oracle",
                        "eval.num_episodes.babaisai=2",
                        "tasks.babaisai_tasks=[env/goto_win,env/make_win-distr_obj]"],
    "minihack-oracle": ["envs.names=minihack", "agent.type=oracle",
                        "eval.num_episodes.minihack=2",
                        "tasks.minihack_tasks=[MiniHack-MazeWalk-9x9-v0]"],
    "textworld-oracle": ["envs.names=textworld", "agent.type=oracle",
                         "eval.num_episodes.textworld=2",
                         "tasks.textworld_tasks=[treasure_hunter]"],
    "crafter-random": ["envs.names=crafter", "agent.type=random", "eval.num_episodes.crafter=2",
                       "eval.max_steps_per_episode=40"],
    "nle-random": ["envs.names=nle", "agent.type=random", "eval.num_episodes.nle=1",
                   "eval.max_steps_per_episode=40"],
    "connect-four-rl-vs-scripted": [
        "envs.names=pettingzoo", "tasks.pettingzoo_tasks=[connect_four_v3]", "agent.type=rl",
        "agent.checkpoint=examples/checkpoints/connect_four_v3_mlp.npz",
        "players.player_1.agent.type=scripted", "eval.num_episodes.pettingzoo=2"],
    "soccer-scripted-vs-random": [
        "envs.names=multigrid", "tasks.multigrid_tasks=[MosaicMultiGrid-S-2v2-IndAgObs-v1]",
        "agent.type=scripted", "players.agent_2.agent.type=random",
        "players.agent_3.agent.type=random", "eval.num_episodes.multigrid=1",
        "eval.max_steps_per_episode=60"],
}
#: The file in a `run` output folder that names the checkout it was played with.
CHECKOUT_FILE: Final[str] = "checkout.txt"
#: Keys whose values depend on the clock, the machine or the package versions.
VOLATILE_KEYS: Final[frozenset[str]] = frozenset({
    "started_at", "ended_at", "wall_time_s", "latency_s", "versions", "run_id", "written_at",
    "model_latency_s", "env_latency_s", "ts"})


def run(checkout: Path, out: Path, only: list[str] | None = None) -> int:
    """Play every run of RUNS (or those named in ``only``) with ``checkout``'s sources into
    ``out/<name>``; returns the number of runs whose ``moria eval`` exited non-zero (their
    output is printed). Raises KeyError for a name not in RUNS."""
    cli = ("orchestrator.apps.cli" if (checkout / "orchestrator" / "apps" / "cli.py").is_file()
           else "orchestrator.cli")
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    out.mkdir(parents=True, exist_ok=True)
    (out / CHECKOUT_FILE).write_text(str(checkout))
    failed = 0
    for name in only or list(RUNS):
        overrides = RUNS[name]
        target = (out / name).resolve()
        command = [sys.executable, "-m", cli, "eval", *overrides, "eval.num_workers=1",
                   f"eval.output_dir={target}", f"eval.run_id={name}", "--no-progress"]
        done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True,
                              check=False)
        print(f"{name}: exit {done.returncode}", flush=True)
        if done.returncode != 0:
            failed += 1
            print(done.stdout[-3000:], done.stderr[-3000:], sep="\n")
    return failed


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE_KEYS}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def episode_files(root: Path) -> dict[str, str]:
    """Relative path -> comparable text of every episode JSON and trajectory CSV under
    ``root`` (JSON without VOLATILE_KEYS, canonically dumped; CSV as written; the checkout's
    path, which run options such as a checkpoint path hold, as ``<checkout>``)."""
    checkout = (root / CHECKOUT_FILE).read_text() if (root / CHECKOUT_FILE).is_file() else None
    files: dict[str, str] = {}
    for path in sorted(root.rglob("*_run_*.*")):
        relative = str(path.relative_to(root))
        if path.suffix == ".json":
            files[relative] = json.dumps(_stable(json.loads(path.read_text())), indent=1,
                                         sort_keys=True)
        elif path.suffix == ".csv":
            rows = list(csv.reader(io.StringIO(path.read_text())))
            files[relative] = "\n".join(",".join(row) for row in rows)
        if checkout:
            files[relative] = files[relative].replace(checkout, "<checkout>")
    return files


def compare(a: Path, b: Path) -> int:
    """Print each difference between the episode files of ``a`` and ``b``; returns their
    number (0: the same episodes, byte for byte outside VOLATILE_KEYS)."""
    left, right = episode_files(a), episode_files(b)
    differences = 0
    for relative in sorted(set(left) | set(right)):
        if relative not in left or relative not in right:
            print(f"only in {'B' if relative not in left else 'A'}: {relative}")
            differences += 1
        elif left[relative] != right[relative]:
            print(f"differs: {relative}")
            for n, (x, y) in enumerate(zip(left[relative].splitlines(),
                                           right[relative].splitlines(), strict=False)):
                if x != y:
                    print(f"  line {n + 1}:\n    A {x[:200]}\n    B {y[:200]}")
                    break
            differences += 1
    print(f"{len(set(left) & set(right))} episode files in both, {differences} difference(s)")
    return differences


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.reproducibility",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    play = sub.add_parser("run", help="play RUNS with a checkout's sources")
    play.add_argument("checkout", type=Path)
    play.add_argument("out", type=Path)
    play.add_argument("--only", nargs="+", choices=sorted(RUNS), help="play these runs only")
    diff = sub.add_parser("compare", help="compare two output folders of `run`")
    diff.add_argument("a", type=Path)
    diff.add_argument("b", type=Path)
    args = parser.parse_args(argv)
    if args.command == "run":
        return 1 if run(args.checkout.resolve(), args.out, args.only) else 0
    return 1 if compare(args.a, args.b) else 0


if __name__ == "__main__":
    sys.exit(main())
