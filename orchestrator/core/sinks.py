"""The subscribers ``moria eval`` puts on a run's event stream (``orchestrator.core.events``).

- ``EpisodeFilesSink``: each ``episode_finished`` becomes its JSON + CSV result files
  (``orchestrator.store.episodes.write_episode``, off the event loop: it fsyncs);
- ``TelemetrySink``: every event becomes a line of the run's JSON-lines telemetry
  (``<run_id>_steps.jsonl``, ``<run_id>_episodes.jsonl``, ``<run_id>_events.jsonl``);
- ``ProgressSink``: a rich progress bar over the episodes of this invocation.

The runner subscribes them in that order, so an episode's files exist before its telemetry line
and before the bar advances.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rich.console import Console
from rich.progress import TaskID

from orchestrator.core.events import RunEvent
from orchestrator.report.progress import progress_bar
from orchestrator.store.episodes import write_episode
from orchestrator.store.records import EpisodeRecord
from orchestrator.store.telemetry import TelemetryWriter


class EpisodeFilesSink:
    """Writes each finished episode's result files under ``out_dir``."""

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir

    async def __call__(self, event: RunEvent) -> None:
        if event.kind == "episode_finished" and event.episode is not None:
            await asyncio.to_thread(write_episode, self.out_dir, event.episode)


class TelemetrySink:
    """Appends each event to the run's telemetry files (``TelemetryWriter``): ``step`` events
    to the steps file, ``episode_finished`` to the episodes file, the others to the events
    file."""

    def __init__(self, writer: TelemetryWriter) -> None:
        self.writer = writer

    def __call__(self, event: RunEvent) -> None:
        if event.kind == "step" and event.step is not None:
            self.writer.write_step(event.step, env=event.fields["env"], task=event.fields["task"],
                                   episode_index=event.fields["episode_index"])
        elif event.kind == "episode_finished" and event.episode is not None:
            self.writer.write_episode(event.episode)
        elif event.kind not in ("step", "episode_finished"):
            self.writer.event(event.kind, **event.fields)


class ProgressSink:
    """A progress bar (on ``console``) advanced by each ``episode_finished``; its total is
    set by ``run_started`` (planned minus skipped). Use as a context manager."""

    def __init__(self, console: Console, enabled: bool) -> None:
        self.progress = progress_bar(console, enabled)
        self._bar: TaskID | None = None

    def __enter__(self) -> ProgressSink:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(None, None, None)

    def __call__(self, event: RunEvent) -> None:
        if event.kind == "run_started":
            total = int(event.fields["planned"]) - int(event.fields["skipped"])
            self._bar = self.progress.add_task("episodes", total=total)
        elif (event.kind == "episode_finished" and event.episode is not None
              and self._bar is not None):
            self.progress.advance(self._bar)
            self.progress.update(self._bar, description=describe(event.episode))


def describe(record: EpisodeRecord) -> str:
    """One line on a finished episode: ``env/task-leaf #index: end_reason, progression p``."""
    return (f"{record.env}/{record.task.rsplit('/', 1)[-1]} #{record.episode_index}: "
            f"{record.end_reason}, progression {record.progression:.2f}")
