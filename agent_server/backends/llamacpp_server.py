"""llama.cpp's OpenAI-compatible server (``llama_cpp.server``) run by Moria as a child process.

``client_name: llamacpp`` without a ``base_url`` serves ``client.model_id`` (a built-in model
name or a ``.gguf`` path, see ``models.py``) from a child process::

    <python> -c <watchdog> --model <gguf> --host 127.0.0.1 --port <free port> --n_ctx 8192 ...

where the watchdog is a few lines that run ``llama_cpp.server`` exactly as ``python -m
llama_cpp.server`` does, plus a thread that ends the child when its parent is gone (so even a
SIGKILLed agent server leaves no server behind). The child loads no vision projector, so it
reads text only (``models.TEXT_ONLY_REASON``; frames sent to it are refused at the run's
preflight, ``agent_server.backends.image_input_problem``). The child is started on the first
``complete`` (or by ``await backend.start()``); Moria waits for ``GET /v1/models`` to answer
(``start_timeout``, default 120 s) and then sends every call through ``OpenAICompatBackend`` with
``client_name`` still ``llamacpp``, so constrained choices use a GBNF grammar.

One child serves each (GGUF path, n_ctx) per process, shared by every backend instance that uses
it and reference-counted: ``aclose()`` of the last user stops it (SIGTERM, SIGKILL after 10 s);
an ``atexit`` hook stops any child still running when the interpreter exits. A child that died
is started again on the next call. Its stdout and stderr go to a temporary log file whose tail is
quoted in errors; the file is removed when the child is stopped normally, and kept when it
failed to start.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from agent_server.backends.base import (
    Backend,
    BackendError,
    ChatMessage,
    Completion,
    GenerateParams,
)
from agent_server.backends.local_llama import DEFAULT_N_CTX, default_threads
from agent_server.backends.models import (
    TEXT_ONLY_REASON,
    check_model_name,
    resolve_model_path,
)
from moria.config import ClientConfig

log = logging.getLogger(__name__)

PROVIDER = "llamacpp"
#: Seconds to wait for a new child to answer ``GET /v1/models``.
DEFAULT_START_TIMEOUT_S = 120.0
#: Seconds between SIGTERM and SIGKILL when stopping a child.
STOP_GRACE_S = 10.0
#: Times a child is started again on another port when its port was taken meanwhile.
PORT_RETRIES = 3
_LOG_TAIL_BYTES = 4000
_POLL_S = 0.1

#: Runs ``llama_cpp.server`` as ``-m`` would, and exits (removing its log file, named by
#: ``$MORIA_LLAMACPP_LOG``) when the parent process is gone.
_WATCHDOG = """\
import os, runpy, sys, threading, time
_parent = os.getppid()
def _watch():
    while os.getppid() == _parent:
        time.sleep(1.0)
    try:
        os.unlink(os.environ["MORIA_LLAMACPP_LOG"])
    except (KeyError, OSError):
        pass
    os._exit(3)
threading.Thread(target=_watch, name="parent-watch", daemon=True).start()
sys.argv[0] = "llama_cpp.server"
runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
"""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _models_answer(url: str, timeout: float) -> bool:
    """True when ``GET url`` answers 200 (blocking; for a worker thread)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return int(response.status) == 200
    except (OSError, urllib.error.URLError, ValueError):
        return False


class _Child:
    """One ``llama_cpp.server`` process for one (GGUF path, n_ctx); shared, reference-counted."""

    def __init__(self, path: Path, n_ctx: int, n_threads: int):
        self.path = path
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.refs = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.log_path: Path | None = None
        self.ready = False
        self.stopped = False
        self._lock = threading.Lock()
        self._spawns = 0

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` of the current process."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        """True while the current process runs."""
        return self.process is not None and self.process.poll() is None

    def command(self) -> list[str]:
        """The child's argv (model, loopback address, port, context and threads)."""
        threads = str(self.n_threads)
        return [
            sys.executable, "-c", _WATCHDOG,
            "--model", str(self.path),
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", threads,
            "--n_threads_batch", threads,
            "--logits_all", "False",
            "--verbose", "False",
        ]

    def spawn(self) -> None:
        """Start the process on a fresh free port, logging to a new temp file (call under
        ``_lock``). Raises ``BackendError`` when it cannot be started."""
        self.port = free_port()
        fd, name = tempfile.mkstemp(prefix=f"moria-llamacpp-{self.path.stem}-", suffix=".log")
        self._drop_log()
        self.log_path = Path(name)
        try:
            with os.fdopen(fd, "wb") as log_file:
                self.process = subprocess.Popen(
                    self.command(), stdin=subprocess.DEVNULL, stdout=log_file,
                    stderr=subprocess.STDOUT, env={**os.environ, "MORIA_LLAMACPP_LOG": name},
                )
        except OSError as exc:
            raise BackendError(
                f"{PROVIDER}: cannot start the llama.cpp server: {exc}", provider=PROVIDER
            ) from exc
        self.ready = False
        self._spawns += 1
        _register_atexit()
        log.info("llamacpp: started llama.cpp server pid %d for %s on port %d (log %s)",
                 self.process.pid, self.path.name, self.port, self.log_path)

    def log_tail(self, max_lines: int = 25) -> str:
        """The last lines of the child's log ("" when there is none)."""
        if self.log_path is None:
            return ""
        try:
            with self.log_path.open("rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - _LOG_TAIL_BYTES))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-max_lines:])

    def exit_error(self) -> BackendError:
        """The error for a child that exited: its exit code and the tail of its log."""
        code = self.process.returncode if self.process is not None else None
        return BackendError(
            f"{PROVIDER}: the llama.cpp server for {self.path.name} exited with code {code}; "
            f"log {self.log_path}:\n{self.log_tail()}",
            provider=PROVIDER,
        )

    async def wait_ready(self, timeout: float) -> None:
        """Wait until ``GET /v1/models`` answers. Starts the process again on another port when
        its port was taken (at most ``PORT_RETRIES`` times). Raises ``BackendError`` when the
        child exits (with its log tail) or does not answer within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not self.ready:
            process = self.process
            if self.stopped or process is None:
                raise BackendError(f"{PROVIDER}: the llama.cpp server was stopped",
                                   provider=PROVIDER)
            if process.poll() is not None:
                with self._lock:
                    if self.process is process and not self.stopped:
                        if "address already in use" in self.log_tail().lower() and (
                            self._spawns <= PORT_RETRIES
                        ):
                            log.warning("llamacpp: port %d was taken; starting again", self.port)
                            self.spawn()
                            continue
                        raise self.exit_error()
                continue  # another waiter started it again meanwhile
            if await asyncio.to_thread(_models_answer, self.url + "/v1/models", 2.0):
                if self.process is process:
                    self.ready = True
                continue
            if time.monotonic() >= deadline:
                raise BackendError(
                    f"{PROVIDER}: the llama.cpp server for {self.path.name} did not answer "
                    f"GET /v1/models within {timeout:g}s; log {self.log_path}:\n"
                    f"{self.log_tail()}",
                    provider=PROVIDER,
                )
            await asyncio.sleep(_POLL_S)

    def stop(self, grace_s: float = STOP_GRACE_S, *, keep_log: bool = False) -> None:
        """Stop the process: SIGTERM, then SIGKILL after ``grace_s`` seconds (blocking).
        Removes the log file unless ``keep_log``. Idempotent."""
        with self._lock:
            self.stopped = True
            self.ready = False
            process = self.process
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(grace_s)
            except subprocess.TimeoutExpired:
                log.warning("llamacpp: server pid %d ignored SIGTERM; killing it", process.pid)
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                process.wait()
            log.info("llamacpp: stopped llama.cpp server pid %d", process.pid)
        if not keep_log:
            self._drop_log()

    def _drop_log(self) -> None:
        if self.log_path is not None:
            with contextlib.suppress(OSError):
                self.log_path.unlink()
            self.log_path = None


_children: dict[tuple[str, int], _Child] = {}
_children_lock = threading.Lock()
_atexit_lock = threading.Lock()
_atexit_registered = False


def _register_atexit() -> None:
    global _atexit_registered
    with _atexit_lock:
        if not _atexit_registered:
            atexit.register(stop_all)
            _atexit_registered = True


def stop_all() -> None:
    """Stop every child started by this process (the ``atexit`` hook; blocking)."""
    with _children_lock:
        children = list(_children.values())
        _children.clear()
    for child in children:
        child.stop()


def _acquire(path: Path, n_ctx: int, n_threads: int) -> _Child:
    """The shared running child for (path, n_ctx) with one more reference, spawning it (or a
    replacement for a dead one) when needed. Raises ``BackendError``."""
    key = (str(path), n_ctx)
    with _children_lock:
        child = _children.get(key)
        if child is None or child.stopped or not child.alive:
            child = _Child(path, n_ctx, n_threads)
            _children[key] = child
            with child._lock:
                child.spawn()
        child.refs += 1
        return child


def _release(child: _Child) -> bool:
    """Drop one reference; True when it was the last one (the caller then stops the child)."""
    with _children_lock:
        child.refs -= 1
        if child.refs > 0:
            return False
        key = (str(child.path), child.n_ctx)
        if _children.get(key) is child:
            del _children[key]
        return True


class LlamaCppServerBackend(Backend):
    """``llama_cpp.server`` as a child process for ``client.model_id``; safe to share."""

    name = PROVIDER

    def __init__(
        self,
        client: ClientConfig,
        *,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
    ):
        """Validates the model name now (``BackendError`` listing the built-in names when it is
        unknown; no process is started). ``n_ctx``: context tokens; ``n_threads``: llama.cpp
        threads (default ``local_llama.default_threads()``); ``start_timeout``: seconds to wait
        for the server to answer."""
        self._client_cfg = client
        self.model_name = check_model_name(client.model_id)
        self.n_ctx = n_ctx
        self.n_threads = n_threads or default_threads()
        self.start_timeout = start_timeout
        self._child: _Child | None = None
        self._inner: Backend | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The child's process id once started (None before)."""
        child = self._child
        return child.process.pid if child is not None and child.process is not None else None

    @property
    def base_url(self) -> str | None:
        """The child's OpenAI-compatible base URL (``http://127.0.0.1:<port>/v1``), or None."""
        return self._child.url + "/v1" if self._child is not None else None

    async def start(self) -> None:
        """Start (or join) the shared child now and wait until it answers. Raises
        ``BackendError`` (unknown or missing model, the child exited: with its log tail, or
        it did not answer within ``start_timeout``)."""
        await self._ensure_started()

    async def _ensure_started(self) -> Backend:
        async with self._lock:
            if self._closed:
                raise BackendError(f"{PROVIDER}: backend is closed", provider=PROVIDER)
            if self._inner is not None and self._child is not None and self._child.alive:
                return self._inner
            if self._child is not None:  # the child died: let go of it and start another
                log.warning("llamacpp: server pid %s is gone; starting a new one", self.pid)
                await self._drop()
            path = await asyncio.to_thread(resolve_model_path, self.model_name)
            child = _acquire(path, self.n_ctx, self.n_threads)
            try:
                await child.wait_ready(self.start_timeout)
            except BaseException:
                if _release(child):  # the error names the log: keep it
                    await asyncio.to_thread(functools.partial(child.stop, keep_log=True))
                raise
            from agent_server.backends import NO_KEY
            from agent_server.backends.openai_compat import OpenAICompatBackend

            config = self._client_cfg.model_copy(
                update={"base_url": child.url + "/v1", "model_id": self.model_name}
            )
            self._child = child
            self._inner = OpenAICompatBackend(config, api_key=NO_KEY, base_url=config.base_url)
            return self._inner

    async def complete(self, messages: list[ChatMessage], params: GenerateParams) -> Completion:
        """One chat completion from the child server (started on first use).

        Behaves as ``OpenAICompatBackend.complete`` (retries, timeouts, ``params.choices`` as a
        GBNF grammar, ``params.extra`` passed through). Raises ``BackendError``; when the
        child died during the call, the error carries its exit code and log tail, and the next
        call starts a new child. Images are refused before any process starts: the child
        serves its GGUF with no vision projector (``models.TEXT_ONLY_REASON``; its server
        answered HTTP 500 to them, retried until the retries ran out).
        """
        if any(m.images for m in messages):
            raise BackendError(
                f"{PROVIDER}: model {self.model_name!r} takes no images: {TEXT_ONLY_REASON}; "
                "set agent.max_image_history=0, or client.base_url to a llama.cpp server "
                "that serves a vision model",
                provider=PROVIDER,
            )
        inner = await self._ensure_started()
        child = self._child
        try:
            return await inner.complete(messages, params)
        except BackendError as exc:
            if child is not None and not child.alive and not child.stopped:
                raise child.exit_error() from exc
            raise

    async def _drop(self) -> None:
        inner, child = self._inner, self._child
        self._inner = None
        self._child = None
        if inner is not None:
            await inner.aclose()
        if child is not None and _release(child):
            await asyncio.to_thread(child.stop)

    async def aclose(self) -> None:
        """Close the HTTP client and let go of the child; the last user stops it (SIGTERM,
        SIGKILL after 10 s). Idempotent."""
        async with self._lock:
            self._closed = True
            await self._drop()
