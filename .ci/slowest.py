#!/usr/bin/env python3
"""The end of ``.ci/run`` when its wall time passed the budget: the slowest stages and tests.

    python3 .ci/slowest.py --budget 3600 --total 3900 --stages build/ci/stages \
        --junit build/ci/junit.xml

``--stages`` is ``.ci/run``'s table (``NAME SECONDS s [FAILED]`` a line); ``--junit`` is
pytest's JUnit XML of the suite (absent when the suite did not run). Standard library only: it
runs with the system ``python3``. Always exits 0: it reports, the stages decide.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

SHOWN_STAGES = 3
SHOWN_TESTS = 10


def read_stages(path: Path) -> list[tuple[str, int]]:
    """(name, seconds) of each line of ``.ci/run``'s stage table; unreadable lines skipped."""
    out = []
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and parts[1].isdigit():
            out.append((parts[0], int(parts[1])))
    return out


def read_tests(path: Path) -> list[tuple[str, float]]:
    """(test id, seconds) of every test case in a pytest JUnit XML file; [] when absent or
    malformed."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return []
    out = []
    for case in root.iter("testcase"):
        try:
            seconds = float(case.get("time", "0"))
        except ValueError:
            continue
        out.append((f"{case.get('classname', '')}::{case.get('name', '')}", seconds))
    return out


def report(budget: int, total: int, stages: list[tuple[str, int]],
           tests: list[tuple[str, float]]) -> str:
    """The warning: the total against the budget, the slowest stages, the slowest tests."""
    lines = [f"warning: .ci/run took {total} s, past its budget of {budget} s "
             f"({total - budget} s over). Take the time back where it is spent:"]
    for name, seconds in sorted(stages, key=lambda s: -s[1])[:SHOWN_STAGES]:
        lines.append(f"   stage {name:<13} {seconds:>5} s")
    if tests:
        lines.append(f"   the {min(SHOWN_TESTS, len(tests))} slowest tests of the suite "
                     "(each on one of the pytest-xdist workers):")
        for name, seconds in sorted(tests, key=lambda t: -t[1])[:SHOWN_TESTS]:
            lines.append(f"   {seconds:>7.1f} s  {name}")
    else:
        lines.append("   (no test timings: the suite did not write its JUnit XML)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budget", type=int, required=True, help="seconds")
    parser.add_argument("--total", type=int, required=True, help="seconds the run took")
    parser.add_argument("--stages", type=Path, required=True)
    parser.add_argument("--junit", type=Path, required=True)
    args = parser.parse_args(argv)
    print(report(args.budget, args.total, read_stages(args.stages), read_tests(args.junit)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
