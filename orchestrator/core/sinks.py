"""The subscribers ``moria eval`` puts on a run's event stream (``orchestrator.core.events``).

- ``EpisodeFilesSink``: each ``episode_finished`` becomes its JSON + CSV result files
  (``orchestrator.store.episodes.write_episode``, off the event loop: it fsyncs);
- ``TelemetrySink``: every event becomes a line of the run's JSON-lines telemetry
  (``<run_id>_steps.jsonl``, ``<run_id>_episodes.jsonl``, ``<run_id>_events.jsonl``);
- ``ProgressSink``: the progress of this invocation: rich bars of episodes and steps on a
  terminal, plain ``progress:`` lines otherwise (``orchestrator.report.progress``).

The runner subscribes them in that order, so an episode's files exist before its telemetry line
and before the progress shows it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from rich.console import Console
from rich.progress import TaskID

from moria.records import EpisodeRecord
from orchestrator.core.events import RunEvent
from orchestrator.report.progress import PlainLines, StepTally, episode_name, progress_bar
from orchestrator.store.episodes import write_episode
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
    """The run's progress on ``console``, from its events (``orchestrator.report.progress``).

    On a terminal: two rich bars, episodes done (with the last finished one) and env steps
    done out of the steps planned (with tokens in/out and invalid actions). When the
    console is not a terminal (stderr redirected to a file or a pipe): plain ``progress:``
    lines instead, at the run's start, at each episode's end and retry, at its end, and on the
    first event (or heartbeat) at least ``interval_s`` after the last line (``None``: the
    ``MORIA_PROGRESS_INTERVAL_S`` environment variable, else 15 s; ``0``: a line per step).
    A heartbeat task on the running event loop writes that periodic line even while no event
    comes (a slow model call). ``clock`` (monotonic seconds) and the heartbeat's ``sleep`` are
    injectable for tests. Nothing is shown when not ``enabled``.

    The planned steps use ``step_cap`` (``eval.max_steps_per_episode``; 0: none), a
    ``max_steps`` field of ``run_started`` (the same, when the runner sends it) and the
    ``max_steps`` field of ``step`` events (the cap the env announced for that episode) when
    present; see ``StepTally``. Use as a context manager.
    """

    def __init__(self, console: Console, enabled: bool, *, interval_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic, step_cap: int = 0,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self.console = console
        self.enabled = enabled
        self.plain = enabled and not console.is_terminal
        self.sleep = sleep
        self.tally = StepTally(step_cap=step_cap)
        self.lines = PlainLines(console, self.tally.status, enabled=self.plain,
                                interval_s=interval_s, clock=clock)
        self.progress = progress_bar(console, enabled and not self.plain, info=True)
        self._bar: TaskID | None = None
        self._steps: TaskID | None = None
        self._heartbeat: asyncio.Task[None] | None = None

    def __enter__(self) -> ProgressSink:
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            self._heartbeat = None
        self.progress.__exit__(None, None, None)

    def __call__(self, event: RunEvent) -> None:
        if not self.enabled:
            return
        fields = event.fields
        key = (str(fields.get("env", "")), str(fields.get("task", "")),
               int(fields.get("episode_index", 0)))
        if event.kind == "run_started":
            self.tally.begin(int(fields["planned"]) - int(fields["skipped"]),
                             int(fields.get("max_steps") or self.tally.step_cap or 0))
            self.lines.restart()
            self._bar = self.progress.add_task("episodes", total=self.tally.episodes_total)
            self._steps = self.progress.add_task("steps", total=self.tally.steps_planned)
            self.lines.line("started", force=True)
            self._start_heartbeat()
        elif event.kind == "episode_started":
            self.tally.episode_started(key)
        elif event.kind == "step" and event.step is not None:
            step = event.step
            self.tally.step(key, step.step, input_tokens=step.input_tokens,
                            output_tokens=step.output_tokens, valid=step.valid,
                            cap=int(fields.get("max_steps") or 0),
                            rate_limit_wait_s=step.rate_limit_wait_s)
            self.lines.line("running")
        elif event.kind == "episode_retried":
            self.tally.episode_retried(key)
            self.lines.line(f"retry {episode_name(*key)}", force=True)
        elif event.kind == "episode_finished" and event.episode is not None:
            record = event.episode
            self.tally.episode_finished(record.key, record.num_steps, failed=not record.scored)
            if self._bar is not None:
                self.progress.advance(self._bar)
                self.progress.update(self._bar, info=f"last: {describe(record)}")
            self.lines.line(f"episode {describe(record)}, {record.num_steps} steps", force=True)
        elif event.kind == "run_finished":
            self.lines.line("finished", force=True)
        self._update_steps()

    def _update_steps(self) -> None:
        if self._steps is not None and not self.plain:  # plain mode draws no bar
            self.progress.update(self._steps, completed=self.tally.steps_done,
                                 total=self.tally.steps_planned, info=self.tally.info())

    def _start_heartbeat(self) -> None:
        if self._heartbeat is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # called outside an event loop (tests): events drive the lines
            return
        self._heartbeat = loop.create_task(self.lines.beat(self.sleep),
                                           name="moria-progress-heartbeat")

def describe(record: EpisodeRecord) -> str:
    """One line on a finished episode: ``env/task-leaf #index: end_reason, progression p``."""
    return (f"{episode_name(record.env, record.task, record.episode_index)}: "
            f"{record.end_reason}, progression {record.progression:.2f}")
