"""OrchestratorService: evaluation runs over gRPC, kept on disk, resumed after a restart.

``moria serve orchestrator [--state-dir DIR] [--address 0.0.0.0:50070]
[--max-concurrent-runs N]`` (plus the shared server flags: TLS, token, metrics, grace) serves
``moria.orchestrator.v1.OrchestratorService``. A submitted run spec is validated like
``moria eval``'s, then executed by ``orchestrator.core.runner.run_evaluation`` in a worker thread
with its own event loop (so a run's blocking work and its gRPC channels never touch the
server's loop). At most ``max_concurrent_runs`` runs execute at once; the others wait, first in
first out.

Everything lives under the state directory (the working directory by default; nothing is
written there before the first submission)::

    runs/<run_id>/service.json           the run: scrubbed spec, state, error, times, summary
                                         (written atomically)
    runs/<run_id>/service_events.jsonl   the run's event log: line N is event sequence N
    runs/<run_id>/...                    the run's results, the output directory of a
                                         `moria eval` (run.json, summary.json, <env>/...,
                                         <run_id>_events.jsonl, <run_id>_episodes.jsonl)

The submitted ``eval.output_dir`` is ignored (replaced by ``<state_dir>/runs/<run_id>``), so a
client cannot make the server write elsewhere; ``eval.run_id`` becomes the run id when the
request gives none. The runner's own metadata keeps its name ``run.json`` inside the results,
which is why the service's record is ``service.json``.

The event log merges, in one durable order, the service's lifecycle events (``submitted``,
``running``, ``resumed``, ``interrupted``, ``completed``, ``failed``, ``cancelled``) with the
runner's own events, which the service receives from the run's event stream
(``orchestrator.core.events``) as a subscriber beside the result and telemetry files:
``run_started``, ``episode_started``, ``episode_retried``, ``run_finished``, and one
``episode_finished`` per written episode, carrying ``episodes_done``/``episodes_total`` (the
per-turn ``step`` events stay in the telemetry files). The service never reads its runs' files
to learn what happened. A line cut by a crash is dropped when the log is loaded, so sequence
numbers stay dense.

Run states: queued -> running -> succeeded | failed | cancelled. A run whose episodes partly
failed (``env_error``/``agent_error`` results) ends ``failed``; resubmitting the same spec under
the same id resumes a failed or cancelled run (finished episodes are kept). On SIGTERM the
server stops taking calls, cancels running runs (episodes already written stay) and records
``interrupted``; on the next start every run that was queued or running is resumed
(``resumed``), and ``run_evaluation`` skips the episodes already in its output directory.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import concurrent.futures
import contextlib
import ipaddress
import json
import logging
import os
import re
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import grpc
from google.protobuf import json_format
from prometheus_client import CollectorRegistry, Counter, Gauge
from rich.console import Console

from moria import server_files
from moria.common.v1 import types_pb2
from moria.files import atomic_write_text
from moria.orchestrator.v1 import orchestrator_service_pb2 as pb
from moria.orchestrator.v1 import orchestrator_service_pb2_grpc as pb_grpc
from moria.quoting import quote, quote_names
from moria.records import SCORED_END_REASONS
from moria.server import Drain, RequestLimit, abort_call, bounded_message, method_path
from orchestrator.core.events import EventSink, RunEvent
from orchestrator.core.runner import PreflightError, run_evaluation
from orchestrator.core.stack import StackError
from orchestrator.plan.spec import RunSpec, SpecError, map_server_files, validate_spec
from orchestrator.store.episodes import completed_keys
from orchestrator.store.run_events import (
    EventLog,
    comparable_spec,
    integral_numbers,
    normalised_spec,
    to_struct,
)
from orchestrator.store.telemetry import dumps, scrub

log = logging.getLogger("moria.orchestrator.apps.service")

#: Run ids: a plain file name (letters, digits, '.', '_', '-'), 1 to 64 characters.
RUN_ID_PATTERN: Final[re.Pattern[str]] = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
RUNS_DIR: Final[str] = "runs"
RECORD_FILE: Final[str] = "service.json"
#: The environment variables a submitted ``endpoints.token_env`` may name by default.
DEFAULT_TOKEN_ENVS: Final[tuple[str, ...]] = ("MORIA_TOKEN",)
#: The largest run spec SubmitRun takes (serialized bytes); a real one is a few KiB.
MAX_SPEC_BYTES: Final[int] = 256 * 1024
#: The server files a submitted run may name (``moria.server_files``; ``moria serve
#: orchestrator --help`` gives the flags offering each).
FILE_KINDS: Final[tuple[str, ...]] = tuple(server_files.FILE_KINDS)
#: The kinds the service itself opens for a run (its demonstrations, price table and TLS
#: files): resolved by the service's folders whether or not the run names endpoints. The other
#: kinds are opened by the env and agent servers: resolved here for a run on a local stack
#: (whose servers take the service's paths), passed on as names to a run's endpoints (whose
#: servers resolve them by their own folders).
SERVICE_FILE_KINDS: Final[tuple[str, ...]] = ("demos", "prices", "tls")
EVENTS_FILE: Final[str] = "service_events.jsonl"

_SERVICE = pb.DESCRIPTOR.services_by_name["OrchestratorService"]
#: The largest request each method takes (bytes), checked before it is parsed
#: (``moria.server.RequestLimit``; larger: RESOURCE_EXHAUSTED): a submission is its spec (at most
#: ``MAX_SPEC_BYTES``) and a run id; the other requests name a run.
REQUEST_LIMITS: Final[dict[str, RequestLimit]] = {
    method_path(_SERVICE, "SubmitRun"): RequestLimit(2 * 1024 * 1024),
    **{method_path(_SERVICE, name): RequestLimit(64 * 1024)
       for name in ("GetRun", "CancelRun", "ListRuns", "StreamEvents")},
}

QUEUED: Final[str] = "queued"
RUNNING: Final[str] = "running"
SUCCEEDED: Final[str] = "succeeded"
FAILED: Final[str] = "failed"
CANCELLED: Final[str] = "cancelled"
STATES: Final[tuple[str, ...]] = (QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED)
FINAL_STATES: Final[frozenset[str]] = frozenset({SUCCEEDED, FAILED, CANCELLED})
#: The event that ends a run's stream, per final state.
FINAL_EVENT: Final[dict[str, str]] = {SUCCEEDED: "completed", FAILED: "failed",
                                      CANCELLED: "cancelled"}
PROTO_STATE: Final[dict[str, int]] = {
    QUEUED: pb.RUN_STATE_QUEUED, RUNNING: pb.RUN_STATE_RUNNING,
    SUCCEEDED: pb.RUN_STATE_SUCCEEDED, FAILED: pb.RUN_STATE_FAILED,
    CANCELLED: pb.RUN_STATE_CANCELLED}

DEFAULT_PAGE_SIZE: Final[int] = 50
MAX_PAGE_SIZE: Final[int] = 1000
#: Fields of a telemetry ``episode`` line kept in an ``episode_finished`` event.
EPISODE_EVENT_FIELDS: Final[tuple[str, ...]] = (
    "env", "task", "episode_index", "seed", "end_reason", "progression", "num_steps",
    "episode_return", "attempts", "error", "wall_time_s")


#: The environment variable that sets ``--allowed-endpoints`` when the flag is not given
#: (Compose files and Kubernetes manifests set it without changing the image's command).
ALLOWED_ENDPOINTS_ENV: Final[str] = "MORIA_ALLOWED_ENDPOINTS"


class EndpointAllowList:
    """The env and policy server targets a submitted run may name (``--allowed-endpoints``):
    exact targets (``env-babyai:50051``, ``dns:///moria-agent.moria.svc:50052``) and IP
    networks (``10.89.0.0/16``: any ``IP:port`` target whose address is inside it, for pods
    whose addresses are not known in advance). Raises ValueError for an entry that is neither
    a target nor a network."""

    def __init__(self, entries: Iterable[str] = ()):
        self.targets: frozenset[str] = frozenset()
        self.networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
        targets, networks = set(), []
        for entry in (e.strip() for e in entries):
            if not entry:
                continue
            if "/" in entry and "://" not in entry:
                networks.append(ipaddress.ip_network(entry, strict=False))
            else:
                targets.add(entry)
        self.targets, self.networks = frozenset(targets), tuple(networks)

    def allows(self, target: str) -> bool:
        """Whether ``target`` is listed, or is ``IP:port`` (``ipv4:``/``ipv6:`` prefix
        allowed) with the IP inside a listed network."""
        if target in self.targets:
            return True
        if not self.networks:
            return False
        host = target.split(":", 1)[1] if target.startswith(("ipv4:", "ipv6:")) else target
        host = host.rsplit(":", 1)[0].strip("[]")
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self.networks)

    def describe(self) -> str:
        """The list, for messages (``none`` when empty)."""
        entries = sorted(self.targets) + [str(n) for n in self.networks]
        return ", ".join(entries) or "none"


class RunServiceError(Exception):
    """A request the service refuses: ``code`` is the gRPC status, ``message`` its text."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


# -- runs ---------------------------------------------------------------------------------------
class _ThreadRun:
    """One execution of ``run_evaluation`` in a worker thread with its own event loop; ``cancel``
    may be called from any thread, before or during the run."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._cancelled = False

    def run(self, spec: RunSpec, sink: EventSink) -> tuple[str, Any]:
        """Run ``spec`` with ``sink`` subscribed to its events (called on this thread); returns
        ("ok", RunOutcome), ("cancelled", None) or ("error", text)."""
        async def main() -> Any:
            with self._lock:
                if self._cancelled:
                    raise asyncio.CancelledError
                self._loop = asyncio.get_running_loop()
                self._task = asyncio.current_task()
            try:
                return await run_evaluation(spec, console=Console(quiet=True),
                                            show_progress=False, sinks=[sink])
            finally:  # while the loop still runs: a later cancel() finds nothing to cancel
                with self._lock:
                    self._loop = self._task = None

        try:
            # The standard loop, not moria.aio's uvloop: each run has its own thread and loop
            # beside the server's, and grpc aio's one poller per process then handed events
            # of a finished run's closed uvloop loop to the server's loop, which raised and
            # dropped the server's own events (control calls stalled).
            return "ok", asyncio.run(main())
        except (asyncio.CancelledError, KeyboardInterrupt):
            return "cancelled", None
        except Exception as exc:
            if isinstance(exc, PreflightError | StackError):
                return "error", str(exc)
            log.exception("run %s failed", spec.eval.run_id)
            return "error", f"{type(exc).__name__}: {exc}"

    def cancel(self) -> None:
        """Ask the run to stop (its in-flight episodes are dropped, written ones stay)."""
        with self._lock:
            self._cancelled = True
            if self._loop is not None and self._task is not None:
                self._loop.call_soon_threadsafe(self._task.cancel)


@dataclass
class RunEntry:
    """One run as the service holds it (``record()`` is what ``service.json`` stores)."""

    run_id: str
    directory: Path
    spec: dict[str, Any]
    state: str
    created_at: float
    updated_at: float
    events: EventLog
    error: str = ""
    summary: dict[str, Any] = field(default_factory=dict)
    episodes_total: int = 0
    done_keys: set[tuple[str, str, int]] | None = None
    #: the newest ``budget`` event of a capped run (``CostLedger.snapshot``)
    budget: dict[str, Any] = field(default_factory=dict)
    handle: _ThreadRun | None = None
    interrupted: bool = False
    task: asyncio.Task[None] | None = None

    @property
    def busy(self) -> bool:
        """True while an execution is in progress (its final events not yet logged)."""
        return self.task is not None

    def record(self) -> dict[str, Any]:
        """The JSON document of ``service.json``."""
        return {"run_id": self.run_id, "state": self.state, "error": self.error,
                "created_at": self.created_at, "updated_at": self.updated_at,
                "episodes_total": self.episodes_total, "summary": self.summary,
                "spec": self.spec}

    def run_spec(self) -> RunSpec:
        """The stored spec, validated, its output dir and run id pinned to this run."""
        spec = RunSpec.model_validate(self.spec)
        spec.eval.output_dir = str(self.directory)
        spec.eval.run_id = self.run_id
        return spec


def _page_token(entry: RunEntry) -> str:
    raw = json.dumps([entry.created_at, entry.run_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _parse_page_token(token: str) -> tuple[float, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        created_at, run_id = json.loads(raw)
        return float(created_at), str(run_id)
    except (ValueError, TypeError, binascii.Error):
        raise RunServiceError(grpc.StatusCode.INVALID_ARGUMENT,
                              "page_token is not a token from ListRuns") from None


class OrchestratorServicer(pb_grpc.OrchestratorServiceServicer):
    """``moria.orchestrator.v1.OrchestratorService`` over runs kept under ``state_dir``.

    ``drain``: the server's drain state (submissions and event streams answer UNAVAILABLE once
    it drains). ``max_concurrent_runs`` (>= 1): runs executing at once, the rest queue FIFO.
    ``registry``: Prometheus registry for the ``moria_orchestrator_*`` metrics (None: a new
    one, at ``self.registry``). ``files``: the server files a submitted run may name, by
    name (``moria.server_files``: price tables, demonstration folders, BALROG checkouts, ...;
    default: none, so a run gives its price table inline). ``allowed_endpoints``: the env and
    policy server targets a submitted run's ``endpoints`` may name (default: none; a run
    without endpoints runs on a local stack the service starts). ``token_envs``: the
    environment variables a submitted ``endpoints.token_env`` may name (the service's own
    secrets are not a submitter's to send elsewhere). Call
    ``await start()`` before serving (loads the runs and resumes unfinished ones) and
    ``await aclose()`` after (interrupts running runs; they resume at the next start).
    Raises ValueError for ``max_concurrent_runs`` < 1.
    """

    def __init__(self, state_dir: str | Path, *, drain: Drain | None = None,
                 max_concurrent_runs: int = 1,
                 registry: CollectorRegistry | None = None,
                 files: server_files.ServerFiles | None = None,
                 allowed_endpoints: Iterable[str] = (),
                 token_envs: Iterable[str] = DEFAULT_TOKEN_ENVS):
        if max_concurrent_runs < 1:
            raise ValueError(f"max_concurrent_runs must be >= 1 (got {max_concurrent_runs})")
        self.state_dir = Path(state_dir).resolve()
        self.files = files if files is not None else server_files.ServerFiles()
        if self.files.client_paths:
            raise ValueError("the orchestrator service never takes a submitted run's paths "
                             "as given: offer folders instead")
        self.allowed_endpoints = EndpointAllowList(allowed_endpoints)
        self.token_envs = frozenset(token_envs)
        self.drain = drain or Drain()
        self.max_concurrent_runs = max_concurrent_runs
        self.runs: dict[str, RunEntry] = {}
        self._pending: deque[str] = deque()
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max_concurrent_runs, thread_name_prefix="moria-run")
        self._closing = False
        self.registry = registry if registry is not None else CollectorRegistry()
        self._runs_gauge = Gauge("moria_orchestrator_runs", "Runs known, by state.", ["state"],
                                 registry=self.registry)
        self._events_counter = Counter("moria_orchestrator_events_total",
                                       "Run events logged, by type.", ["type"],
                                       registry=self.registry)

    @property
    def runs_dir(self) -> Path:
        """``<state_dir>/runs``."""
        return self.state_dir / RUNS_DIR

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Load every run under ``runs/``; re-queue those that were queued or running (event
        ``resumed``), oldest first, and start as many as allowed. Unreadable run folders are
        logged and skipped."""
        if not self.runs_dir.is_dir():
            self._update_gauge()
            return
        resumed: list[RunEntry] = []
        for directory in sorted(p for p in self.runs_dir.iterdir() if p.is_dir()):
            try:
                entry = self._load(directory)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.warning("skipping run folder %s: %s", directory, exc)
                continue
            self.runs[entry.run_id] = entry
            if entry.state not in FINAL_STATES:
                resumed.append(entry)
        for entry in sorted(resumed, key=lambda e: (e.created_at, e.run_id)):
            previous = entry.state
            entry.done_keys = await self._completed(entry)
            self._set_state(entry, QUEUED)
            self._log(entry, "resumed", previous_state=previous,
                      episodes_done=len(entry.done_keys), episodes_total=entry.episodes_total)
            self._pending.append(entry.run_id)
        log.info("loaded %d run(s) from %s, %d resumed", len(self.runs), self.runs_dir,
                 len(resumed))
        self._update_gauge()
        self._schedule()

    def _load(self, directory: Path) -> RunEntry:
        record = json.loads((directory / RECORD_FILE).read_text(encoding="utf-8"))
        state = str(record["state"])
        if state not in STATES:
            raise ValueError(f"unknown state {state!r}")
        return RunEntry(run_id=str(record["run_id"]), directory=directory,
                        spec=dict(record["spec"]), state=state,
                        created_at=float(record["created_at"]),
                        updated_at=float(record["updated_at"]),
                        events=EventLog.load(directory / EVENTS_FILE),
                        error=str(record.get("error", "")),
                        summary=dict(record.get("summary") or {}),
                        episodes_total=int(record.get("episodes_total", 0)))

    async def aclose(self) -> None:
        """Stop taking runs, interrupt the running ones (event ``interrupted``; their state
        stays running so the next start resumes them) and wait for them to stop."""
        self._closing = True
        tasks = []
        for entry in self.runs.values():
            if entry.task is not None:
                entry.interrupted = True
                if entry.handle is not None:
                    entry.handle.cancel()
                tasks.append(entry.task)
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._executor.shutdown(wait=True)

    # -- scheduling -----------------------------------------------------------------------------
    def _schedule(self) -> None:
        while (not self._closing and self._pending
               and sum(e.busy for e in self.runs.values()) < self.max_concurrent_runs):
            entry = self.runs[self._pending.popleft()]
            if entry.state != QUEUED:
                continue
            entry.task = asyncio.create_task(self._execute(entry), name=f"run-{entry.run_id}")

    async def _execute(self, entry: RunEntry) -> None:
        try:
            await self._execute_inner(entry)
        except Exception as exc:
            log.exception("run %s: service error", entry.run_id)
            with contextlib.suppress(Exception):
                self._finish(entry, FAILED, error=f"orchestrator service error: {exc}")
        finally:
            entry.task = None
            entry.handle = None
            self._update_gauge()
            self._schedule()

    async def _execute_inner(self, entry: RunEntry) -> None:
        spec = entry.run_spec()
        entry.episodes_total = spec.episode_count()
        entry.done_keys = await self._completed(entry)
        entry.handle = _ThreadRun()
        entry.interrupted = False
        entry.error = ""
        self._set_state(entry, RUNNING)
        self._log(entry, "running", episodes_total=entry.episodes_total,
                  episodes_done=len(entry.done_keys), output_dir=str(entry.directory))
        loop = asyncio.get_running_loop()

        def forward(event: RunEvent) -> None:  # on the run's thread; handled on this loop
            with contextlib.suppress(RuntimeError):  # this loop closed: the server is gone
                loop.call_soon_threadsafe(self._on_run_event, entry, event)

        # The run's last forwarded events are scheduled before the executor's result, so
        # they are in the log when the await returns.
        kind, value = await loop.run_in_executor(self._executor, entry.handle.run, spec, forward)
        entry.done_keys = await self._completed(entry)
        counts: dict[str, Any] = {"episodes_done": len(entry.done_keys),
                                  "episodes_total": entry.episodes_total}
        if kind == "cancelled" and entry.interrupted:
            self._log(entry, "interrupted", reason="the orchestrator is shutting down; the run "
                      "resumes when it starts again", **counts)
            self._touch(entry)
        elif kind == "cancelled":
            self._finish(entry, CANCELLED, **counts)
        elif kind == "error":
            self._finish(entry, FAILED, error=str(value), **counts)
        else:
            outcome = value
            entry.summary = scrub(dict(outcome.summary))
            figures = {"average_progress": entry.summary.get("average_progress"),
                       "standard_error": entry.summary.get("standard_error"),
                       "ran": outcome.ran, "skipped": outcome.skipped,
                       "outcome": entry.summary.get("outcome"), **counts}
            verdict = outcome.verdict
            if verdict is None or not verdict.succeeded:
                described = verdict.describe() if verdict else "the run recorded no verdict"
                error = (f"{described}\nresubmit the same spec and run id to play the failed "
                         "episodes again")
                self._finish(entry, FAILED, error=error, **figures)
            else:
                self._finish(entry, SUCCEEDED, **figures)

    async def _completed(self, entry: RunEntry) -> set[tuple[str, str, int]]:
        if not entry.directory.is_dir():
            return set()
        spec = RunSpec.model_validate(entry.spec)
        return await asyncio.to_thread(
            lambda: {key for key in completed_keys(entry.directory) if spec.plans(key)})

    def _on_run_event(self, entry: RunEntry, event: RunEvent) -> None:
        """Log one event of the run's stream (``step`` events stay in the telemetry files);
        an ``episode_finished`` carries the episode's main fields and the progress counts."""
        if event.kind == "step":
            return
        payload = dict(event.fields)
        if event.kind == "budget":
            entry.budget = payload
        if event.kind == "episode_finished" and event.episode is not None:
            record = event.episode
            fields = record.summary_fields()
            payload = {k: fields[k] for k in EPISODE_EVENT_FIELDS if k in fields}
            if entry.done_keys is None:
                entry.done_keys = set()
            if record.end_reason in SCORED_END_REASONS:
                entry.done_keys.add(record.key)
            payload["episodes_done"] = len(entry.done_keys)
            payload["episodes_total"] = entry.episodes_total
        try:
            self._append(entry, [(event.kind, event.time, payload)])
        except OSError as exc:
            log.warning("run %s: cannot log event %s: %s", entry.run_id, event.kind, exc)

    # -- state changes --------------------------------------------------------------------------
    def _append(self, entry: RunEntry,
                items: list[tuple[str, float, dict[str, Any]]]) -> None:
        entry.events.append(items)
        for kind, *_ in items:
            self._events_counter.labels(kind).inc()

    def _log(self, entry: RunEntry, kind: str, **payload: Any) -> None:
        self._append(entry, [(kind, time.time(), payload)])

    def _touch(self, entry: RunEntry) -> None:
        entry.updated_at = time.time()
        atomic_write_text(entry.directory / RECORD_FILE, dumps(entry.record(), indent=2))

    def _set_state(self, entry: RunEntry, state: str) -> None:
        entry.state = state
        self._touch(entry)
        self._update_gauge()

    def _finish(self, entry: RunEntry, state: str, *, error: str = "", **payload: Any) -> None:
        """Record a final state, then its event (``completed``/``failed``/``cancelled``). The
        error is bounded (``moria.server.bounded_message``): it comes from input (a path in the
        spec, a provider's message) and travels in ``Run.error`` and every event."""
        error = bounded_message(error) if error else ""
        entry.error = error
        self._set_state(entry, state)
        self._log(entry, FINAL_EVENT[state], **({"error": error} if error else {}), **payload)

    def _update_gauge(self) -> None:
        for state in STATES:
            self._runs_gauge.labels(state).set(
                sum(1 for e in self.runs.values() if e.state == state))

    # -- helpers for the RPCs --------------------------------------------------------------------
    def _get(self, run_id: str) -> RunEntry:
        entry = self.runs.get(run_id)
        if entry is None:
            raise RunServiceError(grpc.StatusCode.NOT_FOUND, f"no run {quote(run_id, 80)}")
        return entry

    def _refuse_if_closing(self) -> None:
        if self._closing or self.drain.draining:
            raise RunServiceError(grpc.StatusCode.UNAVAILABLE,
                                  "the orchestrator is shutting down; retry shortly")

    def _validate(self, request: pb.SubmitRunRequest) -> tuple[str, RunSpec]:
        """The run id and validated spec of a submission; CPU-bound (run it off the loop).

        Raises RunServiceError INVALID_ARGUMENT for a spec over ``MAX_SPEC_BYTES``, over the
        spec bounds (``orchestrator.plan.spec.check_spec_size``, ``MAX_EPISODES``), invalid, with a
        bad run id, with a server file the service does not offer (``_resolve_files``), or
        with endpoints outside ``allowed_endpoints``. Every message quotes the request
        bounded (``moria.quoting``)."""
        size = request.spec.ByteSize()
        if size > MAX_SPEC_BYTES:
            raise RunServiceError(grpc.StatusCode.INVALID_ARGUMENT,
                                  f"the run spec is {size:,} bytes; at most {MAX_SPEC_BYTES:,} "
                                  "are accepted (a real spec has a few KiB)")
        try:
            data = integral_numbers(json_format.MessageToDict(request.spec))
        except ValueError as exc:  # NaN or an infinity: JSON has no such number
            raise RunServiceError(grpc.StatusCode.INVALID_ARGUMENT,
                                  f"the run spec holds a number JSON cannot carry: "
                                  f"{quote(exc, 200)}") from None
        if isinstance(data, dict):
            data.pop("hydra", None)
        try:
            spec = validate_spec(data)
        except SpecError as exc:
            raise RunServiceError(grpc.StatusCode.INVALID_ARGUMENT, str(exc)) from None
        run_id = request.run_id or spec.eval.run_id or ""
        if request.run_id and spec.eval.run_id and request.run_id != spec.eval.run_id:
            raise RunServiceError(grpc.StatusCode.INVALID_ARGUMENT,
                                  f"run_id {quote(request.run_id, 80)} differs from the spec's "
                                  f"eval.run_id {quote(spec.eval.run_id, 80)}; give one of them")
        if not run_id:
            run_id = time.strftime("run-%Y%m%dT%H%M%SZ-", time.gmtime()) + uuid.uuid4().hex[:6]
        if not RUN_ID_PATTERN.match(run_id):
            raise RunServiceError(grpc.StatusCode.INVALID_ARGUMENT,
                                  f"bad run id {quote(run_id, 80)}: use 1 to 64 letters, "
                                  "digits, '.', '_' or '-', starting with a letter or digit")
        spec.eval.run_id = run_id
        spec.eval.output_dir = str(self.runs_dir / run_id)
        self._check_endpoints(spec)
        self._resolve_files(spec)
        token_env = spec.endpoints.token_env
        if token_env is not None and token_env not in self.token_envs:
            allowed = ", ".join(sorted(self.token_envs)) or "none"
            raise RunServiceError(grpc.StatusCode.INVALID_ARGUMENT,
                                  f"endpoints.token_env names a variable this service does not "
                                  f"lend to runs; allowed (--token-envs): {allowed}")
        return run_id, spec

    def _resolve_files(self, spec: RunSpec) -> None:
        """Every field of ``spec`` naming a server file (``map_server_files``) resolved by the
        service's folders: a remote run names server files only by the names the service
        offers, decided from the name before any file is touched (the answer never tells
        whether a path exists). A run with endpoints keeps the names of the files its env and
        agent servers open, for them to resolve. Raises RunServiceError INVALID_ARGUMENT."""
        kinds = SERVICE_FILE_KINDS if spec.endpoints.configured else None
        try:
            map_server_files(spec, self.files.resolve, kinds)
        except server_files.ServerFileError as exc:
            hint = ("; or give the price table inline (eval.prices: {as_of, currency, models: "
                    "{name: {input, output, cached_input}}})"
                    if str(exc).startswith("eval.prices") else "")
            raise RunServiceError(grpc.StatusCode.INVALID_ARGUMENT, f"{exc}{hint}") from None

    def _check_endpoints(self, spec: RunSpec) -> None:
        """Refuse a run whose ``endpoints`` name a target outside ``allowed_endpoints`` (the
        service dials only the servers its operator listed). Raises RunServiceError
        INVALID_ARGUMENT naming the first such targets."""
        strays = [t for t in spec.endpoints.targets if not self.allowed_endpoints.allows(t)]
        if strays:
            raise RunServiceError(grpc.StatusCode.INVALID_ARGUMENT,
                                  f"endpoints: {quote_names(dict.fromkeys(strays), 5)} not "
                                  "among the servers this service dials (--allowed-endpoints: "
                                  f"{self.allowed_endpoints.describe()})")

    async def _run_message(self, entry: RunEntry, *, with_spec: bool = True) -> pb.Run:
        if entry.done_keys is None:
            entry.done_keys = await self._completed(entry)
        if not entry.episodes_total:
            entry.episodes_total = RunSpec.model_validate(entry.spec).episode_count()
        run = pb.Run(run_id=entry.run_id, state=PROTO_STATE[entry.state],  # type: ignore[arg-type]
                     episodes_total=entry.episodes_total, episodes_done=len(entry.done_keys),
                     summary=to_struct(entry.summary), error=entry.error,
                     created_at=entry.created_at, updated_at=entry.updated_at,
                     last_sequence=entry.events.last_sequence, output_dir=str(entry.directory),
                     version=self._versions(entry))
        budget = entry.budget or entry.summary.get("budget") or {}
        if budget:
            run.budget.CopyFrom(pb.Budget(
                max_cost_usd=budget["max_cost_usd"], spent_usd=budget["spent_usd"],
                reserved_usd=budget["reserved_usd"], refused_calls=budget["refused_calls"]))
        if with_spec:
            run.spec.CopyFrom(to_struct(entry.spec))
        return run

    @staticmethod
    def _versions(entry: RunEntry) -> types_pb2.VersionInfo:
        try:
            meta = json.loads((entry.directory / "run.json").read_text(encoding="utf-8"))
            versions = {str(k): str(v) for k, v in dict(meta.get("versions") or {}).items()}
        except (OSError, ValueError, AttributeError):
            versions = {}
        return types_pb2.VersionInfo(api_version=versions.pop("api", ""),
                                     package_version=versions.pop("moria", ""),
                                     components=versions)

    # -- RPCs -----------------------------------------------------------------------------------
    async def SubmitRun(self, request: pb.SubmitRunRequest,
                        context: grpc.aio.ServicerContext) -> pb.SubmitRunResponse:
        """Validate and queue a run (see the module docstring for resubmission)."""
        try:
            self._refuse_if_closing()
            run_id, spec = await asyncio.to_thread(self._validate, request)
            normal = normalised_spec(spec)
            existing = self.runs.get(run_id)
            if existing is not None:
                if comparable_spec(existing.spec) != comparable_spec(normal):
                    raise RunServiceError(grpc.StatusCode.ALREADY_EXISTS,
                                          f"run {quote(run_id, 80)} exists with a different spec; "
                                          "choose another run id")
                if existing.state in (FAILED, CANCELLED) and not existing.busy:
                    previous = existing.state
                    self._set_state(existing, QUEUED)
                    self._log(existing, "resumed", previous_state=previous, reason="resubmitted")
                    self._pending.append(run_id)
                    self._schedule()
                return pb.SubmitRunResponse(run_id=run_id,
                                            run=await self._run_message(existing),
                                            created=False)
            if (self.runs_dir / run_id).exists():
                raise RunServiceError(grpc.StatusCode.ALREADY_EXISTS,
                                      f"run folder {quote(run_id, 80)} exists but holds no run "
                                      "record; choose another run id")
            now = time.time()
            entry = RunEntry(run_id=run_id, directory=self.runs_dir / run_id, spec=normal,
                             state=QUEUED, created_at=now, updated_at=now,
                             events=EventLog(self.runs_dir / run_id / EVENTS_FILE),
                             episodes_total=spec.episode_count())
            entry.directory.mkdir(parents=True, exist_ok=False)
            self.runs[run_id] = entry
            self._set_state(entry, QUEUED)
            self._log(entry, "submitted", episodes_total=entry.episodes_total)
            self._pending.append(run_id)
            self._schedule()
            return pb.SubmitRunResponse(run_id=run_id, run=await self._run_message(entry),
                                        created=True)
        except RunServiceError as exc:
            await abort_call(context, exc.code, exc.message)

    async def GetRun(self, request: pb.GetRunRequest,
                     context: grpc.aio.ServicerContext) -> pb.GetRunResponse:
        """The run with its spec, counts and summary; NOT_FOUND for an unknown id."""
        try:
            return pb.GetRunResponse(run=await self._run_message(self._get(request.run_id)))
        except RunServiceError as exc:
            await abort_call(context, exc.code, exc.message)

    async def CancelRun(self, request: pb.CancelRunRequest,
                        context: grpc.aio.ServicerContext) -> pb.CancelRunResponse:
        """Cancel a queued run at once, or a running one (it turns ``cancelled`` once its
        thread has stopped; the answer may still say running). A run that already ended is
        returned unchanged."""
        try:
            entry = self._get(request.run_id)
            if entry.busy and entry.handle is not None:
                entry.handle.cancel()
            elif entry.state == QUEUED:
                with contextlib.suppress(ValueError):
                    self._pending.remove(entry.run_id)
                self._finish(entry, CANCELLED, episodes_total=entry.episodes_total)
            return pb.CancelRunResponse(run=await self._run_message(entry))
        except RunServiceError as exc:
            await abort_call(context, exc.code, exc.message)

    async def ListRuns(self, request: pb.ListRunsRequest,
                       context: grpc.aio.ServicerContext) -> pb.ListRunsResponse:
        """Runs newest first, ``page_size`` at a time (0: 50; at most 1000); the page token
        marks the last run returned, so runs submitted meanwhile do not shift later pages."""
        try:
            if request.page_size < 0:
                raise RunServiceError(grpc.StatusCode.INVALID_ARGUMENT,
                                      "page_size must be >= 0")
            size = min(request.page_size or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
            ordered = sorted(self.runs.values(), key=lambda e: (e.created_at, e.run_id),
                             reverse=True)
            if request.page_token:
                after = _parse_page_token(request.page_token)
                ordered = [e for e in ordered if (e.created_at, e.run_id) < after]
            page = ordered[:size]
            runs = [await self._run_message(e, with_spec=False) for e in page]
            token = _page_token(page[-1]) if len(ordered) > size else ""
            return pb.ListRunsResponse(runs=runs, next_page_token=token)
        except RunServiceError as exc:
            await abort_call(context, exc.code, exc.message)

    async def StreamEvents(self, request: pb.StreamEventsRequest,
                           context: grpc.aio.ServicerContext,
                           ) -> AsyncIterator[pb.StreamEventsResponse]:
        """Events from ``from_sequence`` (0 or 1: the first) on, then live ones; ends after the
        run's final event. UNAVAILABLE when the server shuts down (reconnect from the last
        sequence received + 1)."""
        try:
            if request.from_sequence < 0:
                raise RunServiceError(grpc.StatusCode.INVALID_ARGUMENT,
                                      "from_sequence must be >= 0")
            entry = self._get(request.run_id)
        except RunServiceError as exc:
            await abort_call(context, exc.code, exc.message)
        next_sequence = max(1, request.from_sequence)
        while True:
            changed = entry.events.changed
            while next_sequence <= entry.events.last_sequence:
                yield pb.StreamEventsResponse(event=_event_message(
                    entry.events.events[next_sequence - 1]))
                next_sequence += 1
            if entry.state in FINAL_STATES:  # its final event is logged with the state
                return
            if self._closing or self.drain.draining:
                await abort_call(context, grpc.StatusCode.UNAVAILABLE,
                                 "the orchestrator is shutting down; reconnect with "
                                 f"from_sequence={next_sequence}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), timeout=0.5)


def _event_message(event: dict[str, Any]) -> pb.RunEvent:
    return pb.RunEvent(sequence=int(event["sequence"]), type=str(event.get("type", "")),
                       timestamp=float(event.get("ts") or 0.0),
                       payload=to_struct(dict(event.get("payload") or {})))


# -- entry point ---------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """CLI of ``moria serve orchestrator``."""
    from moria.server import add_server_arguments

    parser = argparse.ArgumentParser(
        prog="moria serve orchestrator",
        description="Run the orchestrator as a service: takes runs over gRPC, keeps them "
                    "under --state-dir and resumes unfinished ones after a restart.")
    parser.add_argument("--state-dir", default=".",
                        help="where runs and their results are kept (default: the working "
                             "directory)")
    parser.add_argument("--max-concurrent-runs", type=int, default=1,
                        help="runs executing at once; others queue (default 1)")
    parser.add_argument("--token-envs", default=",".join(DEFAULT_TOKEN_ENVS),
                        help="comma-separated environment variables a submitted "
                             "endpoints.token_env may name (default: %(default)s; '' for none)")
    parser.add_argument("--allowed-endpoints", default=os.environ.get(ALLOWED_ENDPOINTS_ENV, ""),
                        help="comma-separated env and policy server targets (or IP networks, "
                             "e.g. 10.0.0.0/8) a submitted run's endpoints may name (default: "
                             f"${ALLOWED_ENDPOINTS_ENV}, else none: submitted runs run on a "
                             "local stack)")
    server_files.add_arguments(parser, FILE_KINDS, client_paths=False)
    add_server_arguments(parser, default_address="0.0.0.0:50070")
    return parser


async def serve(args: argparse.Namespace) -> None:
    """Start the service and block until SIGTERM/SIGINT, then drain and interrupt runs."""
    from moria.metrics import serve_metrics_if_asked
    from moria.server import MoriaServer, run_until_signalled, server_options_from_args

    if args.max_concurrent_runs < 1:
        raise SystemExit(f"--max-concurrent-runs must be >= 1 (got {args.max_concurrent_runs})")
    options = server_options_from_args(args)
    drain = Drain()
    try:
        allowed = EndpointAllowList(args.allowed_endpoints.split(","))
    except ValueError as exc:
        raise SystemExit(f"--allowed-endpoints: {exc}") from None
    servicer = OrchestratorServicer(args.state_dir, drain=drain,
                                    max_concurrent_runs=args.max_concurrent_runs,
                                    files=server_files.ServerFiles.from_args(args, FILE_KINDS),
                                    allowed_endpoints=allowed.targets | {
                                        str(n) for n in allowed.networks},
                                    token_envs=[n for n in args.token_envs.split(",") if n])
    await servicer.start()
    serve_metrics_if_asked(args.metrics_address, servicer.registry)
    server = MoriaServer(
        [lambda s: pb_grpc.add_OrchestratorServiceServicer_to_server(servicer, s)],
        [pb.DESCRIPTOR.services_by_name["OrchestratorService"].full_name],
        address=args.address, drain=drain, grace_s=args.grace, request_limits=REQUEST_LIMITS,
        **options)
    await run_until_signalled(server, servicer.aclose)


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m orchestrator.apps.service [serve] [flags]``."""
    from moria.server import server_main

    return server_main(build_parser, serve, argv)


if __name__ == "__main__":
    sys.exit(main())
