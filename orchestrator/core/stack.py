"""The local stack: env and agent servers started as child processes on unix sockets.

With no endpoints configured, ``moria eval`` starts one env server (hosting every env family of
the run) and one agent server, waits until ``grpc.health.v1`` says SERVING, and stops them on
exit (SIGTERM, then SIGKILL after a grace period), including on Ctrl-C. Child logs go to
``<output_dir>/logs/<name>.log``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from moria.clients import check_health

log = logging.getLogger("moria.stack")


class StackError(RuntimeError):
    """A child server failed to start; the message includes the tail of its log."""


@dataclass
class ChildServer:
    """One started server process."""

    name: str
    target: str
    process: subprocess.Popen[bytes]
    log_path: Path
    #: where this start's output begins in the log (a resumed run appends to the same file)
    log_offset: int = 0

    def announced_ready(self) -> bool:
        """True once the child printed ``READY <address>`` (after it started listening)."""
        try:
            with self.log_path.open("rb") as log_file:
                log_file.seek(self.log_offset)
                return b"READY " in log_file.read()
        except OSError:
            return False

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the child's log."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


class LocalStack:
    """Starts ``python -m env_server`` and ``python -m agent_server`` children.

    ``env_families``: the families the env server hosts. ``log_dir``: where child logs go.
    ``env_capacity``: the env server's session capacity (None: the server default).
    ``env_vars``: extra environment variables of the env server (``moria.families.
    server_environment``: options it must know before any open). ``env_args``: extra flags of
    the env server (``moria serve env --help``), e.g. ``("--isolate", "")``.
    Use as ``async with LocalStack(...) as stack: stack.env_target, stack.policy_target``.
    """

    def __init__(self, env_families: list[str], log_dir: Path, *,
                 env_capacity: int | None = 256,
                 startup_timeout_s: float = 120.0, stop_grace_s: float = 10.0,
                 with_agent: bool = True, env_vars: Mapping[str, str] | None = None,
                 env_args: Sequence[str] = ()):
        self.env_families = env_families
        self.env_vars = dict(env_vars or {})
        self.env_args = list(env_args)
        self.with_agent = with_agent
        self.log_dir = log_dir
        self.env_capacity = env_capacity
        self.startup_timeout_s = startup_timeout_s
        self.stop_grace_s = stop_grace_s
        self.children: list[ChildServer] = []
        self._sock_dir: str | None = None

    @property
    def env_target(self) -> str:
        """Target of the env server."""
        return self.children[0].target

    @property
    def policy_target(self) -> str:
        """Target of the agent server."""
        return self.children[1].target

    async def __aenter__(self) -> LocalStack:
        self._sock_dir = tempfile.mkdtemp(prefix="moria-")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            capacity = [] if self.env_capacity is None else ["--capacity",
                                                              str(self.env_capacity)]
            # the children are reached by this process alone (a private unix socket): they
            # take the run's file paths as given (moria.server_files) and give it every slot
            self._spawn("env_server", ["--families", ",".join(self.env_families), *capacity,
                                       "--client-paths", "--max-sessions-per-peer", "0",
                                       *self.env_args], self.env_vars)
            if self.with_agent:
                self._spawn("agent_server", ["--client-paths", "--max-streams-per-peer", "0"])
            await asyncio.gather(*(self._wait_healthy(c) for c in self.children))
        except BaseException:
            self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, module: str, extra: list[str],
               env_vars: Mapping[str, str] | None = None) -> None:
        assert self._sock_dir is not None
        target = f"unix://{self._sock_dir}/{module}.sock"
        log_path = self.log_dir / f"{module}.log"
        with open(log_path, "ab") as log_file:
            offset = log_file.tell()
            process = subprocess.Popen(
                [sys.executable, "-m", module, "serve", "--address", target, "--grace", "5",
                 *extra],
                stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                env={**os.environ, **(env_vars or {}), "PYTHONUNBUFFERED": "1"})
        self.children.append(ChildServer(module, target, process, log_path, offset))
        log.info("started %s (pid %d) on %s", module, process.pid, target)

    async def _wait_healthy(self, child: ChildServer) -> None:
        """Return once ``child`` answers its health check. The first check waits for the
        server's ``READY <address>`` line in its log: a check sent before the server listens
        fails, and gRPC's reconnect backoff (1 s, growing) then delayed the next ones by
        seconds. Raises StackError when the child exits or stays unhealthy too long."""
        deadline = time.monotonic() + self.startup_timeout_s
        announced = False
        while time.monotonic() < deadline:
            if child.process.poll() is not None:
                raise StackError(f"{child.name} exited with code {child.process.returncode} "
                                 f"during startup; its log ends with:\n{child.log_tail()}")
            announced = announced or child.announced_ready()
            if announced and await check_health(child.target, timeout=1.0):
                return
            await asyncio.sleep(0.02 if not announced else 0.1)
        raise StackError(f"{child.name} was not healthy after {self.startup_timeout_s:.0f}s; "
                         f"its log ends with:\n{child.log_tail()}")

    def check_alive(self) -> None:
        """Raise StackError if a child server has exited (the run cannot go on)."""
        for child in self.children:
            if child.process.poll() is not None:
                raise StackError(f"{child.name} exited with code {child.process.returncode}; "
                                 f"its log ends with:\n{child.log_tail()}")

    async def watch(self, every_s: float = 0.25) -> None:
        """Return never while every child runs; raise StackError (``check_alive``) as soon as
        one exits, whatever its exit code: a server that drained and exited 0 can serve no
        more episodes either. Polls every ``every_s`` seconds; run it beside the episodes and
        cancel it when they are done."""
        while True:
            self.check_alive()
            await asyncio.sleep(every_s)

    def stop(self) -> None:
        """Terminate every child (SIGTERM, then SIGKILL after the grace period)."""
        for child in self.children:
            if child.process.poll() is None:
                child.process.terminate()
        deadline = time.monotonic() + self.stop_grace_s
        for child in self.children:
            remaining = max(0.0, deadline - time.monotonic())
            try:
                child.process.wait(timeout=remaining)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop in time; killing it", child.name)
                child.process.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.process.wait(timeout=5)
        if self._sock_dir is not None:
            shutil.rmtree(self._sock_dir, ignore_errors=True)
            self._sock_dir = None
