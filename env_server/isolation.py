"""Process isolation: host one game in its own worker process.

Families whose C code could take the server down with it (NLE, MiniHack) declare
``isolation = "process"``; the session layer then opens their games through ``ProcessGame``, a
``Game`` that forwards every call over a pipe to a worker process holding the real game.
Workers are forked from a ``forkserver`` (never from the threaded gRPC process) that has the
family's heavy modules preloaded, so a new session costs a fork, not a fresh interpreter.

A worker that dies (crash, SIGKILL, out of memory) makes only its own game fail: the next call
raises ``WorkerCrashedError``, which the session layer reports as INTERNAL for that session.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import multiprocessing as mp
import os
import threading
import traceback
from collections.abc import Iterable, Mapping
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from env_server.game import (
    ActionInfo,
    AgentView,
    Game,
    GameOptionError,
    GameOptions,
    StepResult,
    SubmittedAction,
    TaskNotFoundError,
    TaskUnavailableError,
)

_CONTEXT_LOCK = threading.Lock()
_CONTEXT: Any = None


class WorkerCrashedError(RuntimeError):
    """The worker process of a game died; the game is gone."""


def _context(preload: Iterable[str]) -> Any:
    """The shared forkserver context (created once, with ``preload`` modules imported)."""
    global _CONTEXT
    with _CONTEXT_LOCK:
        if _CONTEXT is None:
            ctx = mp.get_context("forkserver")
            ctx.set_forkserver_preload(["env_server.families", "env_server.game", *preload])
            _CONTEXT = ctx
        return _CONTEXT


def _load(target: str) -> Any:
    module_name, _, class_name = target.partition(":")
    return getattr(importlib.import_module(module_name), class_name)()


def _worker_main(conn: Connection, family_target: str, task: str, options: GameOptions) -> None:
    """Worker loop: open the game, then answer (method, args) requests until 'close'.
    ``family_target`` is the family class as ``module:Class``."""
    try:
        game = _load(family_target).open(task, options)
    except TaskNotFoundError as exc:
        conn.send(("task_not_found", (exc.task, exc.valid)))
        return
    except TaskUnavailableError as exc:
        conn.send(("task_unavailable", (exc.task, exc.reason)))
        return
    except GameOptionError as exc:
        conn.send(("option_error", str(exc)))
        return
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
        return
    conn.send(("ok", None))
    while True:
        try:
            method, args = conn.recv()
        except EOFError:
            break
        if method == "close":
            with contextlib.suppress(Exception):
                game.close()
            conn.send(("ok", None))
            break
        try:
            attr = getattr(game, method)
            result = attr(*args) if callable(attr) else attr
        except Exception as exc:  # noqa: BLE001 - the parent re-raises it as RuntimeError
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
            continue
        conn.send(("ok", result))


async def _readable(conn: Connection) -> None:
    """Return once ``conn`` has data to read (or is closed) without blocking the loop. The
    loop's reader makes the descriptor non-blocking (libuv does); it is set back to blocking
    after, for the blocking reads of the other calls."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    fd = conn.fileno()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
        os.set_blocking(fd, True)


class ProcessGame(Game):
    """A ``Game`` living in a worker process (see the module docstring).

    Raises the family's TaskNotFoundError / TaskUnavailableError / GameOptionError from the
    constructor, RuntimeError for an exception inside the game, and WorkerCrashedError when
    the worker died.
    """

    def __init__(self, family_target: str, task: str, options: GameOptions, *,
                 preload: Iterable[str] = (), start_timeout_s: float = 120.0):
        """``family_target``: the family class as ``module:Class``; the worker imports it."""
        family_name = family_target.rsplit(":", 1)[-1]
        ctx = _context(preload)
        parent, child = ctx.Pipe()
        self._conn: Connection = parent
        self._lock = threading.Lock()
        self._process = ctx.Process(target=_worker_main,
                                    args=(child, family_target, task, options),
                                    name=f"game-{family_name}", daemon=True)
        self._process.start()
        child.close()
        self._closed = False
        if not self._conn.poll(start_timeout_s):
            self._kill()
            raise WorkerCrashedError(f"worker for {family_name}:{task} did not start in "
                                     f"{start_timeout_s:.0f}s")
        kind, payload = self._receive()
        if kind == "task_not_found":
            self._reap()
            raise TaskNotFoundError(*payload)
        if kind == "task_unavailable":
            self._reap()
            raise TaskUnavailableError(*payload)
        if kind == "option_error":
            self._reap()
            raise GameOptionError(payload)
        if kind == "error":
            self._reap()
            raise RuntimeError(f"opening {family_name}:{task} failed: {payload}")
        self._agents: list[str] = self._call("agents")

    @property
    def pid(self) -> int | None:
        """The worker's process id."""
        return self._process.pid

    def _receive(self) -> tuple[str, Any]:
        try:
            message: tuple[str, Any] = self._conn.recv()
            return message
        except (EOFError, OSError) as exc:
            self._process.join(timeout=1.0)
            code = self._process.exitcode
            how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            raise WorkerCrashedError(f"game worker (pid {self._process.pid}) died ({how})"
                                     ) from exc

    def _call(self, method: str, *args: Any) -> Any:
        if self._closed:
            raise RuntimeError("the game is closed")
        with self._lock:
            self._send(method, args)
            return self._answer(*self._receive())

    def _send(self, method: str, args: tuple[Any, ...]) -> None:
        # if the worker is gone, the receive that follows reports how it died
        with contextlib.suppress(BrokenPipeError, OSError):
            self._conn.send((method, args))

    @staticmethod
    def _answer(kind: str, payload: Any) -> Any:
        if kind == "error":
            raise RuntimeError(payload)
        return payload

    async def step_async(self, actions: Mapping[str, SubmittedAction]) -> StepResult:
        """``step`` without blocking the event loop or a thread: the request is written to
        the pipe, the loop waits for the answer to become readable, then reads it. It saves
        the game thread pool's two wake-ups per step. Raises as ``step``; RuntimeError when
        another call is in flight on this game (a session makes one call at a time)."""
        if self._closed:
            raise RuntimeError("the game is closed")
        if not self._lock.acquire(blocking=False):
            raise RuntimeError("another call to this game is in flight")
        try:
            self._send("step", (dict(actions),))
            # no poll() first: a game step outlasts the hop, so the answer is never there yet,
            # and multiprocessing's poll builds a selector on every call (about 8 us)
            await _readable(self._conn)
            result: StepResult = self._answer(*self._receive())
        finally:
            self._lock.release()
        return result

    # ---- the Game interface, forwarded -----------------------------------------------------

    @property
    def agents(self) -> list[str]:
        return list(self._agents)

    @property
    def max_steps(self) -> int:
        return int(self._call("max_steps"))

    def first_agents(self) -> list[str]:
        return list(self._call("first_agents"))

    def instruction(self, agent_id: str) -> str:
        return str(self._call("instruction", agent_id))

    def actions(self, agent_id: str) -> list[ActionInfo]:
        return list(self._call("actions", agent_id))

    def default_action(self, agent_id: str) -> str:
        return str(self._call("default_action", agent_id))

    def reset(self, seed: int | None = None) -> dict[str, AgentView]:
        return dict(self._call("reset", seed))

    def step(self, actions: Mapping[str, SubmittedAction]) -> StepResult:
        result: StepResult = self._call("step", dict(actions))
        return result

    def metrics(self) -> dict[str, Any]:
        return dict(self._call("metrics"))

    def render(self) -> np.ndarray:
        frame: np.ndarray = self._call("render")
        return frame

    def close(self) -> None:
        """Ask the worker to close the game and exit; kill it if it does not."""
        if self._closed:
            return
        with contextlib.suppress(WorkerCrashedError, RuntimeError, OSError), self._lock:
            self._conn.send(("close", ()))
            if self._conn.poll(5.0):
                self._conn.recv()
        self._closed = True
        self._reap()

    def _reap(self) -> None:
        self._closed = True
        self._process.join(timeout=5.0)
        if self._process.is_alive():
            self._kill()
        with contextlib.suppress(OSError):
            self._conn.close()

    def _kill(self) -> None:
        self._process.kill()
        self._process.join(timeout=5.0)
