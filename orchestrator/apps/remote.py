"""Client of the OrchestratorService, and ``moria eval --remote ADDR``.

``OrchestratorClient(target)`` wraps the five RPCs and ``follow``, which streams a run's events
to the end and reconnects from the last sequence received + 1 when the server is UNAVAILABLE
(restarting, draining, unreachable), so nothing is missed or seen twice.

``eval_remote(spec, args, console)`` is the ``--remote`` form of ``moria eval``: it submits the
run spec, prints the run id, follows the events with a progress bar (episodes done / total;
when stderr is not a terminal, plain ``progress:`` lines instead: at the start, per finished or
retried episode, and at least every ``MORIA_PROGRESS_INTERVAL_S`` seconds), prints the final
line and returns the exit code: 0 completed, 1 failed or cancelled, 2 refused (bad spec, run id
taken), 130 interrupted (Ctrl-C or SIGTERM). An interrupted client leaves the run going at the
orchestrator unless ``--cancel-on-interrupt`` is given.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
from rich.console import Console
from rich.progress import Progress
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, wait_exponential

from moria import aio
from moria.codecs import dict_from_struct
from moria.orchestrator.v1 import orchestrator_service_pb2 as pb
from moria.orchestrator.v1 import orchestrator_service_pb2_grpc as pb_grpc
from moria.records import SCORED_END_REASONS
from moria.security import (
    SecurityConfigError,
    TlsConfig,
    TransportSecurity,
    open_channel,
    transport_security,
)
from orchestrator.apps.say import error_line, literal
from orchestrator.report.progress import PlainLines, episode_name, episodes_text, progress_bar
from orchestrator.store.run_events import to_struct

log = logging.getLogger("moria.remote")
T = TypeVar("T")

#: Run states by their proto value, as the service names them.
STATE_NAMES: dict[int, str] = {
    pb.RUN_STATE_QUEUED: "queued", pb.RUN_STATE_RUNNING: "running",
    pb.RUN_STATE_SUCCEEDED: "succeeded", pb.RUN_STATE_FAILED: "failed",
    pb.RUN_STATE_CANCELLED: "cancelled"}
#: The events that end a run's stream.
FINAL_EVENTS: frozenset[str] = frozenset({"completed", "failed", "cancelled"})


def _unavailable(exc: BaseException) -> bool:
    return isinstance(exc, grpc.aio.AioRpcError) and exc.code() == grpc.StatusCode.UNAVAILABLE


class OrchestratorClient:
    """Async client of one orchestrator at ``target`` (host:port, unix:///path, dns:///name).

    ``security``: TLS and bearer token (None: plaintext). ``reconnect_s``: how long ``follow``
    and ``call`` keep retrying while the server stays UNAVAILABLE without progress (seconds);
    ``retry_wait_s``: the first wait between tries (doubling up to 2 s). Use as an async
    context manager or call ``close()``. RPC errors other than UNAVAILABLE surface at once as
    ``grpc.aio.AioRpcError`` (INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, ...).
    """

    def __init__(self, target: str, security: TransportSecurity | None = None, *,
                 reconnect_s: float = 120.0, retry_wait_s: float = 0.2):
        self.target = target
        self.reconnect_s = reconnect_s
        self.retry_wait_s = retry_wait_s
        self._channel = open_channel(target, security)
        self._stub = pb_grpc.OrchestratorServiceStub(self._channel)

    async def close(self) -> None:
        """Close the channel."""
        await self._channel.close()

    async def __aenter__(self) -> OrchestratorClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _retrying(self, last_progress: list[float]) -> AsyncRetrying:
        def give_up(state: RetryCallState) -> bool:
            return time.monotonic() - last_progress[0] > self.reconnect_s

        def note(state: RetryCallState) -> None:
            log.warning("orchestrator %s unavailable; retrying (attempt %d)", self.target,
                        state.attempt_number)

        return AsyncRetrying(retry=retry_if_exception(_unavailable), stop=give_up,
                             wait=wait_exponential(multiplier=self.retry_wait_s,
                                                   max=max(2.0, self.retry_wait_s)),
                             before_sleep=note, reraise=True)

    async def call(self, rpc: Callable[[], Awaitable[T]]) -> T:
        """Run one unary call, retried while the server is UNAVAILABLE (``reconnect_s``)."""
        async for attempt in self._retrying([time.monotonic()]):
            with attempt:
                return await rpc()
        raise AssertionError("unreachable")  # pragma: no cover

    async def submit_run(self, spec: dict[str, Any], run_id: str = "",
                         timeout: float = 30.0) -> pb.SubmitRunResponse:
        """Submit ``spec`` (a run-spec dict, as the YAML holds it) under ``run_id`` (empty: the
        server's choice or the spec's eval.run_id). Retried on UNAVAILABLE: resubmitting the
        same spec and id is idempotent at the server."""
        request = pb.SubmitRunRequest(spec=to_struct(spec), run_id=run_id)
        return await self.call(lambda: self._stub.SubmitRun(request, timeout=timeout))

    async def get_run(self, run_id: str, timeout: float = 30.0) -> pb.Run:
        """The run (NOT_FOUND for an unknown id)."""
        response = await self.call(lambda: self._stub.GetRun(pb.GetRunRequest(run_id=run_id),
                                                             timeout=timeout))
        return response.run

    async def cancel_run(self, run_id: str, timeout: float = 30.0) -> pb.Run:
        """Ask the server to cancel the run; returns it as the server then sees it."""
        response = await self.call(lambda: self._stub.CancelRun(
            pb.CancelRunRequest(run_id=run_id), timeout=timeout))
        return response.run

    async def list_runs(self, page_size: int = 0, page_token: str = "",
                        timeout: float = 30.0) -> pb.ListRunsResponse:
        """One page of runs, newest first."""
        return await self.call(lambda: self._stub.ListRuns(
            pb.ListRunsRequest(page_size=page_size, page_token=page_token), timeout=timeout))

    async def stream_events(self, run_id: str, from_sequence: int = 0,
                            ) -> AsyncIterator[pb.RunEvent]:
        """The run's events from ``from_sequence`` on, without reconnecting."""
        call = self._stub.StreamEvents(pb.StreamEventsRequest(run_id=run_id,
                                                              from_sequence=from_sequence))
        try:
            async for response in call:
                yield response.event
        finally:
            call.cancel()

    async def follow(self, run_id: str, on_event: Callable[[pb.RunEvent], None], *,
                     from_sequence: int = 1) -> int:
        """Stream the run's events into ``on_event`` until the stream ends (the run ended),
        reconnecting on UNAVAILABLE from the last sequence received + 1. Returns the next
        sequence to ask for. Raises the last AioRpcError once the server stayed unavailable
        for ``reconnect_s`` without progress, or any other RPC error at once."""
        next_sequence = max(1, from_sequence)
        last_progress = [time.monotonic()]
        async for attempt in self._retrying(last_progress):
            with attempt:
                async for event in self.stream_events(run_id, next_sequence):
                    if event.sequence != next_sequence:
                        raise RuntimeError(f"event stream skipped from {next_sequence} to "
                                           f"{event.sequence}")
                    on_event(event)
                    next_sequence = event.sequence + 1
                    last_progress[0] = time.monotonic()
        return next_sequence


def security_from_args(args: argparse.Namespace) -> TransportSecurity | None:
    """TLS/token settings of ``--remote-ca`` and ``--remote-token-env`` (None: plaintext)."""
    ca = getattr(args, "remote_ca", None)
    token_env = getattr(args, "remote_token_env", None)
    if ca is None and token_env is None:
        return None
    return transport_security(TlsConfig(ca_cert=str(ca)) if ca else None, token_env)


class _Tracker:
    """Turns events into a progress bar and remembers the final one. When the console is not a
    terminal (``plain``), it writes plain ``progress:`` lines instead of drawing the bar
    (``PlainLines``): one when following starts, one per finished or retried episode, one at
    the end, and, from ``heartbeat()``, one at least every ``interval_s`` seconds in between
    (``None``: ``MORIA_PROGRESS_INTERVAL_S``, else 15 s; ``0``: none in between). The stream
    carries episode events only (steps stay in the run's telemetry files on the server), so the
    lines count episodes. ``clock``: monotonic seconds (injectable for tests)."""

    def __init__(self, progress: Progress, total: int, done: int, *, plain: bool = False,
                 interval_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.progress = progress
        self.bar = progress.add_task("episodes", total=total or None, completed=done)
        self.final: pb.RunEvent | None = None
        self.last_sequence = 0
        self.total, self.done, self.failed = total, done, 0
        self.lines = PlainLines(progress.console,
                                lambda: episodes_text(self.done, self.total, self.failed),
                                enabled=plain, interval_s=interval_s, clock=clock)
        self.lines.line("following", force=True)

    def __call__(self, event: pb.RunEvent) -> None:
        self.last_sequence = event.sequence
        payload = dict_from_struct(event.payload)
        if "episodes_total" in payload:
            self.total = int(payload["episodes_total"])
            self.progress.update(self.bar, total=self.total or None)
        if "episodes_done" in payload:
            self.done = int(payload["episodes_done"])
            self.progress.update(self.bar, completed=self.done)
        name = episode_name(str(payload.get("env", "")), str(payload.get("task", "")),
                            int(payload.get("episode_index", 0)))
        if event.type == "episode_finished":
            reason = payload.get("end_reason")
            self.failed += 0 if reason in SCORED_END_REASONS else 1
            self.progress.update(self.bar, description=f"{name}: {reason}")
            progression = payload.get("progression")
            self.lines.line(f"episode {name}: {reason}"
                            + ("" if progression is None else f", progression {progression:.2f}")
                            + f", {int(payload.get('num_steps', 0))} steps", force=True)
        elif event.type == "episode_retried":
            if self.lines.enabled:  # plain lines carry no error text (docs/progress.md)
                self.lines.line(f"retry {name}", force=True)
            else:
                self.progress.console.print(
                    literal(f"episode {name} re-queued: {payload.get('error')}"))
        if event.type in FINAL_EVENTS:
            self.final = event
            self.lines.line(event.type, force=True)

    async def heartbeat(self, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                        ) -> None:
        """Write a ``running`` line whenever ``interval_s`` passed without one; runs until
        cancelled (``PlainLines.beat``)."""
        await self.lines.beat(sleep)


def final_line(run_id: str, event: pb.RunEvent | None) -> str:
    """The summary line printed when a followed run ends."""
    if event is None:
        return f"run {run_id}: the event stream ended before the run did"
    payload = dict_from_struct(event.payload)
    counts = (f"{int(payload.get('episodes_done', 0))}/{int(payload.get('episodes_total', 0))} "
              "episodes done")
    if event.type == "completed":
        progress = payload.get("average_progress")
        stderr = payload.get("standard_error")
        score = ("" if progress is None else f", average progress {progress:.1f}%"
                 + ("" if stderr is None else f" ± {stderr:.1f}"))
        return f"run {run_id} completed: {counts}{score}"
    error = payload.get("error")
    return f"run {run_id} {event.type}: {counts}" + (f"; {error}" if error else "")


async def _eval_remote(spec: dict[str, Any], args: argparse.Namespace, console: Console) -> int:
    task = asyncio.current_task()
    assert task is not None
    with contextlib.suppress(NotImplementedError, RuntimeError):
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        client = OrchestratorClient(args.remote, security_from_args(args))
    except SecurityConfigError as exc:
        console.print(error_line(exc))
        return 2
    run_id = ""
    try:
        try:
            submitted = await client.submit_run(spec)
        except grpc.aio.AioRpcError as exc:
            console.print(error_line(f"the orchestrator at {args.remote} refused the run "
                                     f"({exc.code().name}): {exc.details()}"))
            return 2 if exc.code() != grpc.StatusCode.UNAVAILABLE else 1
        run_id = submitted.run_id
        run = submitted.run
        verb = "submitted" if submitted.created else "following existing"
        console.print(literal(f"{verb} run {run_id} at {args.remote} "
                            f"({STATE_NAMES.get(run.state, '?')}; results on the server in "
                            f"{run.output_dir})"))
        print(run_id, flush=True)
        shown = not getattr(args, "no_progress", False)
        plain = shown and not console.is_terminal
        progress = progress_bar(console, shown and not plain, eta=False)
        with progress:
            tracker = _Tracker(progress, int(run.episodes_total), int(run.episodes_done),
                               plain=plain)
            beat = asyncio.create_task(tracker.heartbeat(), name="moria-remote-heartbeat")
            try:
                await client.follow(run_id, tracker)
            finally:
                beat.cancel()
        line = final_line(run_id, tracker.final)
        print(line, flush=True)
        return 0 if tracker.final is not None and tracker.final.type == "completed" else 1
    except asyncio.CancelledError:
        if not run_id:
            console.print("interrupted before the run was accepted")
            return 130
        if getattr(args, "cancel_on_interrupt", False):
            with contextlib.suppress(grpc.aio.AioRpcError):
                await asyncio.wait_for(client.cancel_run(run_id), timeout=30)
            console.print(literal(f"interrupted; asked the orchestrator to cancel run {run_id} "
                                "(finished episodes are kept)"))
        else:
            console.print(literal(f"interrupted; run {run_id} goes on at the orchestrator. Follow "
                                "it again with the same command plus eval.run_id=" + run_id
                                + " (or use --cancel-on-interrupt to cancel on Ctrl-C)"))
        return 130
    except grpc.aio.AioRpcError as exc:
        console.print(error_line(f"lost the orchestrator at {args.remote} "
                                 f"({exc.code().name}): {exc.details()}"))
        return 1
    finally:
        await client.close()


def eval_remote(spec: Any, args: argparse.Namespace, console: Console) -> int:
    """``moria eval --remote ADDR``: submit ``spec`` (a RunSpec), follow it, return the exit
    code (see the module docstring)."""
    data = spec.model_dump(mode="json")
    try:
        return aio.run(_eval_remote(data, args, console))
    except KeyboardInterrupt:  # a second Ctrl-C during the clean-up
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use: moria eval --remote ADDR [KEY=VALUE ...]")
