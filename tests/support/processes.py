"""Env and agent servers as real child processes on 127.0.0.1 (ephemeral ports), for tests that
kill servers: each prints ``READY <address>`` on stderr once it serves, and the address is read
from that line (never guessed beforehand: a port picked by binding port 0 and closing it again
can be taken by someone else before the server binds it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[2]


#: Runs the command given after it with SIGINT at its default action, then ``exec``s it.
_DEFAULT_SIGINT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                   "os.execv(sys.argv[1], sys.argv[1:])")


def interruptible(command: list[str]) -> list[str]:
    """``command`` wrapped so that it starts with SIGINT at its default action, as a program
    started from a terminal does. A child inherits an ignored SIGINT (a test run launched in the
    background by a non-interactive shell ignores it, and Python then installs no
    KeyboardInterrupt handler), so a test that sends SIGINT wraps its command in this.
    ``command[0]`` must be a path to an executable (it is exec'd as is)."""
    return [sys.executable, "-c", _DEFAULT_SIGINT, *command]


class LineReader:
    """Reads a text stream (a child's stdout or stderr) line by line on a daemon thread and
    keeps every line, so a test can wait for one without blocking on the pipe."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self.closed = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self.closed = True
            self._changed.notify_all()

    def wait_for(self, match: Callable[[str], bool], what: str, timeout: float) -> str:
        """The first line (read so far or to come) for which ``match`` is true. Raises
        AssertionError naming ``what`` (with the last lines) when the stream ends first or
        ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        checked = 0
        with self._changed:
            while True:
                for line in self.lines[checked:]:
                    if match(line):
                        return line
                checked = len(self.lines)
                left = deadline - time.monotonic()
                if self.closed or left <= 0:
                    why = "the stream ended" if self.closed else f"{timeout:g} s passed"
                    raise AssertionError(f"{why} before {what}:\n" + self.tail())
                self._changed.wait(left)

    def join(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) until the stream has been read to its end."""
        self._thread.join(timeout)

    def tail(self, count: int = 20) -> str:
        """The last ``count`` lines, for failure messages."""
        return "\n".join(self.lines[-count:])


@dataclass
class ServerProcess:
    """A started server: its process, dial target and the stderr lines read so far."""

    process: subprocess.Popen[str]
    target: str
    log: list[str] = field(default_factory=list)
    reader: LineReader | None = None

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM (drain), then SIGKILL after 30 s."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()

    def wait_exit(self, timeout: float) -> int:
        """Wait for the process to exit on its own and its stderr to be read to the end (so
        ``log`` is complete); return the exit code. Raises ``subprocess.TimeoutExpired``."""
        code = self.process.wait(timeout=timeout)
        if self.reader is not None:
            self.reader.join(timeout)
        return code


def start_server(module: str, *args: str, timeout_s: float = 120.0,
                 address: str = "127.0.0.1:0") -> ServerProcess:
    """Start ``python -m <module> serve --address <address> <args>`` and wait for READY.

    ``module``: ``env_server``, ``agent_server`` or ``orchestrator.apps.service``; ``address``:
    where it listens (``[::]:0``: every address, IPv4 and IPv6). Raises RuntimeError with the
    log tail when the process exits or stays silent for ``timeout_s``."""
    process = subprocess.Popen(
        [sys.executable, "-m", module, "serve", "--address", address, *args],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "MORIA_LLAMA_THREADS": "1"})
    assert process.stderr is not None
    reader = LineReader(process.stderr)
    try:
        ready = reader.wait_for(lambda line: line.startswith("READY "),
                                f"{module} printed READY", timeout_s)
    except AssertionError as exc:
        process.kill()
        process.wait(timeout=30)
        raise RuntimeError(f"{module} did not start: {exc}") from None
    return ServerProcess(process, ready.split()[1], reader.lines, reader)


@contextmanager
def server_processes(*specs: tuple[str, tuple[str, ...]]) -> Iterator[list[ServerProcess]]:
    """Start one server per (module, args) spec; stop them all on exit."""
    started: list[ServerProcess] = []
    try:
        for module, args in specs:
            started.append(start_server(module, *args))
        yield started
    finally:
        for server in started:
            server.stop()
