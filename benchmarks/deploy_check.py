"""How long ``make deploy-check`` takes (docs/deploy.md): in a fresh clone of this checkout,
once with the tools venv still to create (pip's cache as this machine has it), then again
with it in place.

Run: ``python -m benchmarks.deploy_check [--record]``; prints the two wall times and, with
``--record``, writes ``benchmarks/results/deploy_check.json``. Exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed_check(clone: Path) -> tuple[int, float]:
    """``make deploy-check`` in ``clone``: (exit code, wall seconds)."""
    start = time.perf_counter()
    done = subprocess.run(["make", "deploy-check"], cwd=clone, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, check=False)
    if done.returncode:
        print(done.stderr[-2000:], file=sys.stderr)
    return done.returncode, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.deploy_check",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--record", action="store_true",
                        help="write benchmarks/results/deploy_check.json")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="moria-deploy-check-") as scratch:
        clone = Path(scratch) / "moria"
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
        first = timed_check(clone)
        second = timed_check(clone)
    rows = [["first, creating the tools venv", f"{first[1]:.0f} s"],
            ["again, the tools venv in place", f"{second[1]:.0f} s"]]
    print(json.dumps({"first_s": round(first[1], 1), "again_s": round(second[1], 1)}))
    if args.record and not (first[0] or second[0]):
        from benchmarks.common import load_span, result_file, write_result

        write_result(result_file(
            "deploy_check", "make deploy-check in a fresh clone",
            "python -m benchmarks.deploy_check --record", load_span(load_before),
            ["run", "wall"], rows))
    return 1 if first[0] or second[0] else 0


if __name__ == "__main__":
    sys.exit(main())
