"""``--max-test-seconds`` (tests/support/budget.py): a test past the bound fails the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

TESTS = """
import time

def test_quick():
    pass

def test_sleeps_half_a_second():
    time.sleep(0.5)
"""


def _pytest(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
         "tests.support.budget", "--rootdir", str(folder), str(folder / "test_timed.py"), *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_a_test_past_the_bound_fails_the_run_and_is_named(tmp_path: Path) -> None:
    (tmp_path / "test_timed.py").write_text(TESTS)
    slow = _pytest(tmp_path, "--max-test-seconds", "0.2")
    assert slow.returncode == 1, slow.stdout
    assert "2 passed" in slow.stdout  # the tests themselves passed: the bound failed the run
    section = slow.stdout[slow.stdout.index("tests over 0.2 s"):]
    assert "test_timed.py::test_sleeps_half_a_second" in section
    assert "test_quick" not in section


def test_within_the_bound_the_run_passes(tmp_path: Path) -> None:
    (tmp_path / "test_timed.py").write_text(TESTS)
    within = _pytest(tmp_path, "--max-test-seconds", "60")
    assert within.returncode == 0 and "tests over" not in within.stdout, within.stdout
