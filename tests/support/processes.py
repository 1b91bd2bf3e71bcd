"""Env and agent servers as real child processes on 127.0.0.1 (ephemeral ports), for tests that
kill servers: each prints ``READY <address>`` on stderr once it serves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class ServerProcess:
    """A started server: its process, dial target and the stderr lines read so far."""

    process: subprocess.Popen[str]
    target: str
    log: list[str] = field(default_factory=list)

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


def start_server(module: str, *args: str, timeout_s: float = 120.0) -> ServerProcess:
    """Start ``python -m <module> serve --address 127.0.0.1:0 <args>`` and wait for READY.

    ``module``: ``env_server`` or ``agent_server``. Raises RuntimeError with the log tail when
    the process exits or stays silent for ``timeout_s``."""
    process = subprocess.Popen(
        [sys.executable, "-m", module, "serve", "--address", "127.0.0.1:0", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "MORIA_LLAMA_THREADS": "1"})
    assert process.stderr is not None
    lines: list[str] = []
    ready = threading.Event()
    target: list[str] = []

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.append(line.rstrip())
            if line.startswith("READY ") and not target:
                target.append(line.split()[1])
                ready.set()
        ready.set()  # exited

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(timeout_s) or not target:
        process.kill()
        raise RuntimeError(f"{module} did not start:\n" + "\n".join(lines[-20:]))
    return ServerProcess(process, target[0], lines)


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
