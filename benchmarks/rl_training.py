"""The shipped RL checkpoints made again: each training command of docs/rl-checkpoints.md run
as its own process, with its CPU and wall time, and how far the weights it writes are from
the shipped file's (``examples/checkpoints/``): the largest absolute difference of any weight,
0 when they are bit for bit the same (float32 sums may round differently under another numpy
or BLAS build).

Run: ``python -m benchmarks.rl_training [--record]``; prints one JSON line per checkpoint and,
with ``--record``, writes ``benchmarks/results/rl_training.json`` (the page's table). Exits 1
when a command fails or writes other arrays than the shipped file has, or weights further
than ``TOLERANCE`` from them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
#: checkpoint file -> the trainer's module and arguments (docs/rl-checkpoints.md).
COMMANDS: dict[str, list[str]] = {
    "connect_four_v3_mlp.npz": ["tools.rl.train", "--task", "connect_four_v3",
                                "--episodes", "30000", "--seed", "0"],
    "soccer_2v2_mlp.npz": ["tools.rl.train_soccer", "--episodes", "300", "--seed", "0"],
}


#: The largest weight difference from the shipped checkpoint taken as the same training.
TOLERANCE = 1e-3


def weight_difference(made: Path, shipped: Path) -> float | None:
    """The largest absolute difference between the weights of two checkpoints (every array
    but the metadata); None when their arrays differ in names or shapes."""
    import numpy as np

    with np.load(made, allow_pickle=False) as a, np.load(shipped, allow_pickle=False) as b:
        keys = [k for k in a.files if k != "metadata"]
        if keys != [k for k in b.files if k != "metadata"] or any(
                a[k].shape != b[k].shape for k in keys):
            return None
        return max(float(np.abs(a[k] - b[k]).max()) for k in keys)


def trained_with(checkpoint: Path) -> dict[str, Any]:
    """The ``trained_with`` record the trainer wrote into ``checkpoint``'s metadata (its
    labelled ``samples`` and ``final_loss`` when it trains by cloning; {} when absent)."""
    import numpy as np

    with np.load(checkpoint, allow_pickle=False) as arrays:
        metadata = json.loads(arrays["metadata"].tobytes())
    trained = metadata.get("trained_with") if isinstance(metadata, dict) else None
    return trained if isinstance(trained, dict) else {}


def train(name: str, out: Path) -> dict[str, Any]:
    """Run the training command of checkpoint ``name`` writing to ``out``; its figures."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", *COMMANDS[name], "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    difference = (weight_difference(out, REPO / "examples" / "checkpoints" / name)
                  if done.returncode == 0 else None)
    trained = trained_with(out) if done.returncode == 0 else {}
    return {"checkpoint": name, "returncode": done.returncode, "cpu_s": round(cpu, 1),
            "wall_s": round(wall, 1), "max_weight_difference": difference,
            "samples": trained.get("samples"), "final_loss": trained.get("final_loss"),
            "stderr_tail": done.stderr[-500:] if done.returncode else ""}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.rl_training",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--record", action="store_true",
                        help="write benchmarks/results/rl_training.json")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for name in COMMANDS:
            row = train(name, Path(scratch) / name)
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.record:
        from benchmarks.common import load_span, result_file, write_result

        write_result(result_file(
            "rl_training", "The shipped RL checkpoints trained again",
            "python -m benchmarks.rl_training --record", load_span(load_before),
            ["checkpoint", "command", "CPU", "wall", "labelled steps", "final loss",
             "largest weight difference from the shipped"],
            [[r["checkpoint"], "python -m " + " ".join(COMMANDS[r["checkpoint"]]),
              f"{r['cpu_s']:.0f} s", f"{r['wall_s']:.0f} s",
              "-" if r["samples"] is None else f"{r['samples']:,}",
              "-" if r["final_loss"] is None else f"{r['final_loss']:.2f}",
              "arrays differ" if r["max_weight_difference"] is None
              else f"{r['max_weight_difference']:.1e}"] for r in rows]))
    return 0 if all(r["returncode"] == 0 and r["max_weight_difference"] is not None
                    and r["max_weight_difference"] <= TOLERANCE for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
