"""``moria view --service TARGET``: the runs of an orchestrator service, followed live through
``StreamEvents`` and mirrored into local run directories the viewer reads like any other.

For each run followed, the mirror writes ``<mirror>/<run_id>/run.json`` (the spec ``GetRun``
returns, the run id, and ``source``: the service) and, for every ``episode_finished`` event,
that episode's file (``orchestrator.store.episodes.write_episode``; a later attempt of the
same episode replaces it). The events carry each episode's outcome, not its trajectory: the
mirrored episodes have no steps and no frames (the run's own directory on the service's
machine, ``<state-dir>/runs/<run_id>``, has them). Following reconnects while the service is
unavailable (``OrchestratorClient.follow``) and ends with the run.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any

import grpc
from pydantic import ValidationError

from moria.codecs import dict_from_struct
from moria.files import atomic_write_text
from moria.records import EpisodeRecord
from orchestrator.apps.remote import OrchestratorClient
from orchestrator.store.episodes import write_episode
from orchestrator.store.telemetry import dumps

log = logging.getLogger("moria.view")

#: Runs a ``--service`` viewer follows when none is named: the newest page of ``ListRuns``.
DEFAULT_RUNS = 20


def episode_from_event(run_id: str, payload: dict[str, Any]) -> EpisodeRecord:
    """The episode record an ``episode_finished`` event's payload describes (its outcome
    fields; no steps). Raises pydantic.ValidationError for a payload that is no episode."""
    fields = {key: payload[key] for key in EpisodeRecord.model_fields if key in payload}
    fields["done"] = payload.get("end_reason") in ("terminated", "truncated")
    return EpisodeRecord.model_validate({**fields, "run_id": run_id})


class ServiceMirror:
    """Follows runs of the service at ``target`` into ``out`` (see the module docstring), in
    a thread of its own (``start``). ``run_ids``: the runs to follow (empty: the newest
    ``DEFAULT_RUNS``). ``ready`` is set once every run's ``run.json`` is written.
    ``connect_s``: how long the first calls wait for an unavailable service (seconds);
    ``reconnect_s``: how long following waits, once started, for one that went away."""

    def __init__(self, target: str, out: Path, run_ids: list[str] | None = None, *,
                 connect_s: float = 10.0, reconnect_s: float = 600.0) -> None:
        self.target = target
        self.out = out
        self.run_ids = list(run_ids or [])
        self.connect_s = connect_s
        self.reconnect_s = reconnect_s
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Follow in a daemon thread; returns once every run's ``run.json`` is written (or the
        service failed: ``error``)."""
        self._thread = threading.Thread(target=self._main, name="moria-view-follow",
                                        daemon=True)
        self._thread.start()
        self.ready.wait()

    def join(self, timeout: float | None = None) -> bool:
        """Wait until every followed run has ended (or ``timeout`` seconds); True when they
        have."""
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _main(self) -> None:
        try:
            asyncio.run(self.follow())
        except BaseException as exc:  # noqa: BLE001  (reported by the caller's thread)
            self.error = exc
            log.warning("following %s stopped: %s", self.target, describe_error(exc))
        finally:
            self.ready.set()

    async def follow(self) -> None:
        """Mirror the runs until every one has ended."""
        async with OrchestratorClient(self.target, reconnect_s=self.connect_s) as first:
            ids = self.run_ids or [run.run_id for run in
                                   (await first.list_runs(page_size=DEFAULT_RUNS)).runs]
            runs = [await first.get_run(run_id) for run_id in ids]
        async with OrchestratorClient(self.target, reconnect_s=self.reconnect_s) as client:
            for run_id, run in zip(ids, runs, strict=True):
                meta = {"run_id": run_id, "spec": dict_from_struct(run.spec),
                        "source": f"orchestrator service {self.target}, run directory "
                                  f"{run.output_dir} there"}
                atomic_write_text(self.out / run_id / "run.json", dumps(meta, indent=2) + "\n")
            self.ready.set()
            await asyncio.gather(*(client.follow(run_id, self._on_event(run_id))
                                   for run_id in ids))

    def _on_event(self, run_id: str) -> Any:
        def on_event(event: Any) -> None:
            if event.type != "episode_finished":
                return
            payload = dict_from_struct(event.payload)
            try:
                record = episode_from_event(run_id, payload)
            except ValidationError as exc:
                log.warning("run %s: an episode_finished event is no episode: %s", run_id,
                            str(exc).splitlines()[0])
                return
            write_episode(self.out / run_id, record)
        return on_event



def describe_error(exc: BaseException) -> str:
    """One line for a failure to follow: an RPC error's status and details, else the text."""
    if isinstance(exc, grpc.aio.AioRpcError):
        return f"{exc.code().name}: {exc.details()}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
