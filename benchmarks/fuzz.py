"""The fuzzers of Env ``Session``, Policy ``Play`` and ``SubmitRun`` (``tests/fuzz``), run as
the suite runs them (2,000 examples each unless ``--examples``), with the latency of their
control calls tallied: the goal (docs/security.md) is no control call slower than 250 ms
during any example. The tests themselves assert no crash, no INTERNAL, bounded memory and no
control call past a deadline only a held event loop misses (``STALL_DEADLINE_S``); how many
calls passed the 250 ms goal is a figure of the machine as much as of the code, so it is
measured here, on a machine as quiet as can be had, never asserted.

Run: ``python -m benchmarks.fuzz [--examples 2000] [--record]``; prints one line per fuzz test
(its outcome, examples, control calls, the worst and how many over 250 ms) and, with
``--record``, writes ``benchmarks/results/fuzz.json`` with the load average before and after.
Exits 1 when a fuzz test failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULT = REPO / "benchmarks" / "results" / "fuzz.json"
FUZZERS = ("tests/fuzz/test_env_session_fuzz.py", "tests/fuzz/test_policy_play_fuzz.py",
           "tests/fuzz/test_orchestrator_submit_fuzz.py")


def run(examples: int) -> tuple[int, list[dict[str, Any]], list[float], list[float]]:
    """Run the fuzzers with ``examples`` each: (pytest's exit code, the report lines of the
    tests that drove examples, load average before, after)."""
    before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "fuzz.jsonl"
        env = {**os.environ, "MORIA_FUZZ_EXAMPLES": str(examples),
               "MORIA_FUZZ_REPORT": str(report)}
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "-n", "0", *FUZZERS],
                              cwd=REPO, env=env, check=False)
        lines = ([json.loads(line) for line in report.read_text().splitlines()]
                 if report.is_file() else [])
    after = [round(x, 2) for x in os.getloadavg()]
    return done.returncode, [line for line in lines if line["examples"]], before, after


def recorded(lines: list[dict[str, Any]], examples: int, before: list[float],
             after: list[float]) -> dict[str, Any]:
    """The result file of one sitting, in the ``benchmarks/tables.py`` format."""
    from benchmarks.common import result_file

    rows = [[line["test"].split("::")[-1], line["outcome"], f"{line['examples']:,}",
             f"{line['control_calls']:,}", f"{line['control_worst_ms']:.1f} ms",
             str(line["control_over_goal"])] for line in lines]
    return result_file(
        "fuzz", "The fuzzers: their control calls (GetInfo, GetRun) during the examples",
        f"python -m benchmarks.fuzz --examples {examples} --record",
        f"{before[0]:.2f} before, {after[0]:.2f} after",
        ["fuzz test", "outcome", "examples", "control calls", "slowest", "over 250 ms"], rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fuzz",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=2000,
                        help="examples per fuzz test (default %(default)s, as the suite)")
    parser.add_argument("--record", action="store_true",
                        help="write benchmarks/results/fuzz.json (docs/security.md's table)")
    args = parser.parse_args(argv)
    code, lines, before, after = run(args.examples)
    for line in lines:
        print(json.dumps(line))
    if args.record and lines:
        RESULT.write_text(json.dumps(recorded(lines, args.examples, before, after),
                                     indent=2) + "\n")
    return 0 if code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
