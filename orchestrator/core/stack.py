"""The local stack: env and agent servers started as child processes on unix sockets.

With no endpoints configured, ``moria eval`` starts env servers (each hosting every env family
of the run) and agent servers, one of each unless told more (``eval.local_servers``,
``orchestrator.plan.spec.local_server_counts``), waits until ``grpc.health.v1`` says SERVING,
and stops them on exit (SIGTERM, then SIGKILL after a grace period), including on Ctrl-C. Child
logs go to ``<output_dir>/logs/<name>.log``: ``env_server.log`` and ``agent_server.log`` for the
first of each, ``env_server-2.log``, ``agent_server-2.log``, ... for the next.

A stack made with ``env_restarts`` > 0 starts a crashed env server again (at most that many
times over the whole stack, each one logged) instead of stopping the run, and therefore runs the
NetHack families' games inline (``INLINE_WHEN_RESTARTING``: no worker process per game, faster
steps; a crash in a game's C code ends every session of its server, which the restart covers).
The episodes in flight on the crashed server fail as infrastructure faults (their streams
break: ``UNAVAILABLE``), so the runner re-queues them (``eval.max_episode_retries``) or records
them as ``env_error``, which is never scored and is played again on resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
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

#: The Play streams each of the stack's agent servers takes at once. They serve this run alone
#: on a private socket, so their capacity must never be what holds an episode back: the run's
#: ``eval.num_workers`` bounds its episodes, and each opens one stream per seat a policy plays
#: (a Melting Pot substrate has as many seats as its roles). The servers' own default (256)
#: guards a deployed server shared by many clients.
PRIVATE_POLICY_CAPACITY = 1 << 20

#: The families whose games run in worker processes by default (``isolation = "process"`` in
#: env_server; a test checks the two lists agree, as the orchestrator may not import
#: env_server): NLE and MiniHack for crash isolation, TextWorld because it is not thread-safe.
PROCESS_FAMILIES: frozenset[str] = frozenset({"nle", "minihack", "textworld"})
#: The families a stack that restarts crashed env servers runs inline (issue 40: 18-39% faster
#: steps; NLE loads a private copy of its C library per game, so games can share a process).
INLINE_WHEN_RESTARTING: frozenset[str] = frozenset({"nle", "minihack"})
#: How many times ``moria eval``'s local stack starts a crashed env server again over a run
#: (``LocalStack(env_restarts=...)``); the next crash stops the run (resume it to go on). A
#: game that crashes its server every time it is played (its retries, eval.max_episode_retries,
#: included) uses up the restarts of a run on its own.
LOCAL_ENV_RESTARTS: int = 3


def local_env_restarts(env_families: Sequence[str]) -> int:
    """How many times ``moria eval``'s local stack for ``env_families`` restarts a crashed env
    server: ``LOCAL_ENV_RESTARTS`` when it hosts a family it then runs inline
    (``INLINE_WHEN_RESTARTING``), else 0: a server of the other families has no native game
    code to crash it, so its death stops the run at once, as before."""
    return LOCAL_ENV_RESTARTS if INLINE_WHEN_RESTARTING & set(env_families) else 0


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
    #: the command line and the extra environment it was started with (to start it again)
    argv: tuple[str, ...] = ()
    env_vars: Mapping[str, str] | None = None

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

    ``env_families``: the families every env server hosts. ``log_dir``: where child logs go.
    ``env_capacity``: the session capacity of the env servers together, split evenly between
    them (None: each server's default). ``env_vars``: extra environment variables of the env
    servers (``moria.families.server_environment``: options they must know before any open).
    ``env_args``: extra flags of the env servers (``moria serve env --help``), e.g.
    ``("--isolate", "")``. ``env_servers``, ``policy_servers``: how many of each to start
    (>= 1; ``with_agent=False`` starts no policy server). ``env_restarts``: how many times
    ``watch`` may start a crashed env server again over the stack's life (0: a crash stops the
    run); when > 0 the env servers run ``INLINE_WHEN_RESTARTING``'s games inline (``--isolate``
    naming only the other hosted ``PROCESS_FAMILIES``) unless ``env_args`` sets ``--isolate``.
    Use as ``async with LocalStack(...) as stack: stack.env_targets, stack.policy_targets``
    (``env_target``/``policy_target``: the first of each). Raises ValueError for a count out of
    range.
    """

    def __init__(self, env_families: list[str], log_dir: Path, *,
                 env_capacity: int | None = 256,
                 startup_timeout_s: float = 120.0, stop_grace_s: float = 10.0,
                 with_agent: bool = True, env_vars: Mapping[str, str] | None = None,
                 env_args: Sequence[str] = (), env_servers: int = 1, policy_servers: int = 1,
                 env_restarts: int = 0):
        if env_servers < 1 or policy_servers < 1:
            raise ValueError(f"a local stack needs at least one server of each kind, got "
                             f"env_servers={env_servers}, policy_servers={policy_servers}")
        if env_restarts < 0:
            raise ValueError(f"env_restarts must be >= 0, got {env_restarts}")
        self.env_families = env_families
        self.env_vars = dict(env_vars or {})
        self.env_args = list(env_args)
        if env_restarts and not any(a == "--isolate" or a.startswith("--isolate=")
                                    for a in self.env_args):
            self.env_args += ["--isolate", ",".join(
                f for f in env_families if f in PROCESS_FAMILIES - INLINE_WHEN_RESTARTING)]
        self.with_agent = with_agent
        self.log_dir = log_dir
        self.env_capacity = env_capacity
        self.env_server_count = env_servers
        self.policy_server_count = policy_servers if with_agent else 0
        self.env_restarts = env_restarts
        #: env servers started again so far (``watch``)
        self.restarts = 0
        self.startup_timeout_s = startup_timeout_s
        self.stop_grace_s = stop_grace_s
        self.children: list[ChildServer] = []
        self._sock_dir: str | None = None

    @property
    def env_children(self) -> list[ChildServer]:
        """The env servers, first to last."""
        return [c for c in self.children if c.name.startswith("env_server")]

    @property
    def policy_children(self) -> list[ChildServer]:
        """The agent (policy) servers, first to last."""
        return [c for c in self.children if c.name.startswith("agent_server")]

    @property
    def env_targets(self) -> list[str]:
        """Targets of the env servers."""
        return [c.target for c in self.env_children]

    @property
    def policy_targets(self) -> list[str]:
        """Targets of the agent servers."""
        return [c.target for c in self.policy_children]

    @property
    def env_target(self) -> str:
        """Target of the (first) env server."""
        return self.env_targets[0]

    @property
    def policy_target(self) -> str:
        """Target of the (first) agent server."""
        return self.policy_targets[0]

    async def __aenter__(self) -> LocalStack:
        self._sock_dir = tempfile.mkdtemp(prefix="moria-")
        self.log_dir.mkdir(parents=True, exist_ok=True)
        try:
            capacity = ([] if self.env_capacity is None else
                        ["--capacity", str(max(1, math.ceil(self.env_capacity
                                                            / self.env_server_count)))])
            # the children are reached by this process alone (a private unix socket): they
            # take the run's file paths as given (moria.server_files) and give it every slot
            for i in range(self.env_server_count):
                self._spawn("env_server", i, ["--families", ",".join(self.env_families),
                                              *capacity, "--client-paths",
                                              "--max-sessions-per-peer", "0", *self.env_args],
                            self.env_vars)
            for i in range(self.policy_server_count):
                self._spawn("agent_server", i,
                            ["--capacity", str(PRIVATE_POLICY_CAPACITY), "--client-paths",
                             "--max-streams-per-peer", "0"])
            await asyncio.gather(*(self._wait_healthy(c) for c in self.children))
        except BaseException:
            self.stop()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, module: str, index: int, extra: list[str],
               env_vars: Mapping[str, str] | None = None) -> None:
        assert self._sock_dir is not None
        name = module if index == 0 else f"{module}-{index + 1}"
        target = f"unix://{self._sock_dir}/{name}.sock"
        log_path = self.log_dir / f"{name}.log"
        argv = (sys.executable, "-m", module, "serve", "--address", target, "--grace", "5",
                *extra)
        process, offset = self._start(argv, log_path, env_vars)
        self.children.append(ChildServer(name, target, process, log_path, offset, argv=argv,
                                         env_vars=env_vars))
        log.info("started %s (pid %d) on %s", name, process.pid, target)

    @staticmethod
    def _start(argv: Sequence[str], log_path: Path, env_vars: Mapping[str, str] | None,
               ) -> tuple[subprocess.Popen[bytes], int]:
        """Start ``argv`` with its output appended to ``log_path``; the process, and where
        this start's output begins in the log."""
        with open(log_path, "ab") as log_file:
            offset = log_file.tell()
            return subprocess.Popen(
                list(argv), stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                env={**os.environ, **(env_vars or {}), "PYTHONUNBUFFERED": "1"}), offset

    async def _restart(self, child: ChildServer) -> None:
        """Start the exited ``child`` again on its socket and log, and wait until it answers
        its health check (raises StackError when it does not)."""
        self.restarts += 1
        log.warning("%s exited with code %s; starting it again (restart %d of %d); its log "
                    "ends with:\n%s", child.name, child.process.returncode, self.restarts,
                    self.env_restarts, child.log_tail())
        child.process, child.log_offset = self._start(child.argv, child.log_path,
                                                      child.env_vars)
        log.info("restarted %s (pid %d) on %s", child.name, child.process.pid, child.target)
        await self._wait_healthy(child)

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

    def _restartable(self, child: ChildServer, pending: int = 0) -> bool:
        """True when ``watch`` may start the exited ``child`` again: an env server that
        crashed (a nonzero exit code or a signal; one that exits 0 drained on purpose, e.g.
        SIGTERM or Ctrl-C), with restarts left beyond ``pending`` others."""
        return (child.name.startswith("env_server") and child.process.returncode != 0
                and self.restarts + pending < self.env_restarts)

    def check_alive(self) -> None:
        """Raise StackError if a child server has exited (the run cannot go on), unless it is
        an env server ``watch`` will start again (``env_restarts``)."""
        pending = 0
        for child in self.children:
            if child.process.poll() is not None:
                if self._restartable(child, pending):
                    pending += 1
                    continue
                raise StackError(f"{child.name} exited with code {child.process.returncode}; "
                                 f"its log ends with:\n{child.log_tail()}")

    async def watch(self, every_s: float = 0.25) -> None:
        """Return never while every child runs; raise StackError (``check_alive``) as soon as
        one exits, whatever its exit code: a server that drained and exited 0 can serve no
        more episodes either. An env server that crashed (exit code not 0) with restarts left
        (``env_restarts``) is started again instead, on the same socket, and waited for
        (StackError if it does not come up); the runner's replica choice skips it meanwhile.
        Polls every ``every_s`` seconds; run it beside the episodes and cancel it when they
        are done."""
        while True:
            for child in self.children:
                if child.process.poll() is not None and self._restartable(child):
                    await self._restart(child)
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
