"""A run's in-memory event stream: the runner emits, files, telemetry, the progress bar and the
OrchestratorService subscribe.

The runner says what happened once, as a ``RunEvent``; each subscriber (a *sink*) decides what
to keep. Sinks are called in subscription order, one event at a time, on the runner's event
loop; a sink may be a coroutine function (the episode-file sink writes off the loop and is
awaited before the next sink runs, so the episode JSON exists before any line announces it).
A sink that raises stops the run: the files and telemetry are the run's record, not extras.

Kinds, with their fields (JSON-ready values):

- ``run_started``: ``planned`` (episodes in the plan), ``skipped`` (already done), ``run_seed``,
  ``max_steps`` (``eval.max_steps_per_episode``; 0 when the run sets none);
- ``episode_started``: ``env``, ``task``, ``episode_index``, ``seed``, ``attempt`` (0-based),
  ``env_server``, ``policy_server``;
- ``step``: ``env``, ``task``, ``episode_index``, ``max_steps`` (the episode's step cap as the
  env announced it at open; 0: none); ``RunEvent.step`` holds the turn;
- ``episode_retried``: ``env``, ``task``, ``episode_index``, ``error``, ``env_server``,
  ``policy_server``;
- ``episode_finished``: ``RunEvent.episode`` holds the finished (or failed) episode's record;
- ``budget`` (runs with ``eval.max_cost_usd``, after each ``episode_finished``):
  ``max_cost_usd``, ``spent_usd``, ``reserved_usd``, ``refused_calls``, ``granted_calls``
  (``orchestrator.core.budget.CostLedger.snapshot``);
- ``run_finished``: ``ran``, ``skipped``, ``average_progress``, ``outcome``.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from moria.records import EpisodeRecord, StepRecord

EventKind: TypeAlias = Literal["run_started", "episode_started", "step", "episode_retried",
                               "episode_finished", "budget", "run_finished"]
#: Every kind a runner emits, in the order of a run's life.
EVENT_KINDS: Final[tuple[str, ...]] = ("run_started", "episode_started", "step",
                                       "episode_retried", "episode_finished", "budget",
                                       "run_finished")


@dataclass(frozen=True)
class RunEvent:
    """One thing that happened in a run: its ``kind`` (``EVENT_KINDS``), when (Unix seconds),
    its ``fields`` (see the module docstring), and for ``step``/``episode_finished`` the typed
    record."""

    kind: EventKind
    fields: Mapping[str, Any] = field(default_factory=dict)
    time: float = field(default_factory=time.time)
    step: StepRecord | None = None
    episode: EpisodeRecord | None = None


#: A subscriber: called with each event; may return an awaitable, which is awaited.
EventSink: TypeAlias = Callable[[RunEvent], Awaitable[None] | None]


class EventStream:
    """The subscribers of one run, called in order for each emitted event.

    Not thread-safe: emit from the runner's event loop. A sink that must hand events to another
    thread (the OrchestratorService's loop) does so itself.
    """

    def __init__(self, sinks: tuple[EventSink, ...] | list[EventSink] = ()) -> None:
        self._sinks: list[EventSink] = list(sinks)

    def subscribe(self, sink: EventSink) -> None:
        """Add ``sink`` after the current subscribers."""
        self._sinks.append(sink)

    async def emit(self, kind: EventKind, *, step: StepRecord | None = None,
                   episode: EpisodeRecord | None = None, **fields: Any) -> RunEvent:
        """Build the event and hand it to every sink in order; returns it. Raises ValueError
        for a kind outside ``EVENT_KINDS``; re-raises what a sink raises."""
        if kind not in EVENT_KINDS:
            raise ValueError(f"unknown run event kind {kind!r}; allowed: {', '.join(EVENT_KINDS)}")
        event = RunEvent(kind=kind, fields=fields, step=step, episode=episode)
        for sink in self._sinks:
            result = sink(event)
            if inspect.isawaitable(result):
                await result
        return event
