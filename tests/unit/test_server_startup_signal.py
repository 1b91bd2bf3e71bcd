"""SIGTERM before a server serves: it exits at once with status 0 (moria.server), instead of
being ignored as PID 1 of a container or killed with the signal's status elsewhere."""

from __future__ import annotations

import subprocess
import sys

#: the process installs the start-up handler, then receives SIGTERM while still "starting"
#: (before any serving code runs); the line after the kill must never run
PROGRAM = """
import os, signal, time
from moria.server import stop_on_sigterm_until_serving
stop_on_sigterm_until_serving()
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(60)
print("not stopped")
"""


def test_sigterm_while_starting_exits_zero() -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "not stopped" not in done.stdout


def test_without_the_handler_sigterm_kills() -> None:
    """The control: the same program without the handler dies of the signal."""
    program = PROGRAM.replace("stop_on_sigterm_until_serving()\n", "")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == -15
