"""Progress display of the ``moria`` commands: the one rich progress bar (episodes, games, data
items, demos), and the step counters and plain progress lines of a run.

A run shows two kinds of progress (``orchestrator.core.sinks.ProgressSink`` feeds them from the
run's events):

- on a terminal, rich bars: episodes done, and env steps done out of the steps planned, with the
  tokens spent and the invalid actions so far;
- when stderr is not a terminal (a log file, a pipe), plain lines that start with
  ``progress:``, one at the start, one per finished episode, one at the end, and one at least
  every ``MORIA_PROGRESS_INTERVAL_S`` seconds (default ``DEFAULT_PLAIN_INTERVAL_S``) in between
  (``0``: one per step). They hold counts, names of envs and tasks and end reasons only: never a
  prompt, a completion, an error text or a config value.

*Steps planned* is an upper bound: each episode counts for its step cap (the cap the env
announced for it; for episodes not yet opened, ``eval.max_steps_per_episode`` when the run gives
one, else the largest cap announced so far) until it ends, then for the steps it took. It
tightens as episodes end early, and equals the steps done when the run is over. Until a cap is
known it is shown as ``?``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

log = logging.getLogger(__name__)

#: Seconds between two plain progress lines while nothing else is printed (stderr not a tty).
DEFAULT_PLAIN_INTERVAL_S: Final[float] = 15.0
#: The environment variable that sets that interval (seconds; ``0`` = a line per step).
PLAIN_INTERVAL_ENV: Final[str] = "MORIA_PROGRESS_INTERVAL_S"
#: How every plain progress line starts (``grep '^progress:'``).
PLAIN_PREFIX: Final[str] = "progress:"

#: An episode's identity in a run: (env, task, episode_index).
EpisodeKey = tuple[str, str, int]


class InfoColumn(ProgressColumn):
    """The task's ``info`` field as plain text (empty when the task has none)."""

    def render(self, task: Task) -> Text:
        return Text(str(task.fields.get("info", "")), style="progress.data.speed",
                    no_wrap=True, overflow="ellipsis")


def progress_bar(console: Console, enabled: bool, *, label: str = "{task.description}",
                 eta: bool = True, info: bool = False) -> Progress:
    """A rich progress bar on ``console`` (none drawn when not ``enabled``): ``label`` (a rich
    format of the task), the bar, done/total (``n/?`` while the total is None), elapsed time
    and, with ``eta``, time remaining; with ``info``, a shorter bar and the task's ``info``
    field last.
    Kept on screen when done. Use as a context manager."""
    columns: list[ProgressColumn] = [
        TextColumn(f"[bold]{label}"), BarColumn(bar_width=20 if info else 40),
        MofNCompleteColumn(), TimeElapsedColumn(),
        *([TimeRemainingColumn()] if eta else []), *([InfoColumn()] if info else [])]
    return Progress(*columns, console=console, disable=not enabled, transient=False)


def plain_interval(value: float | str | None = None) -> float:
    """Seconds between plain progress lines: ``value`` when given, else the
    ``MORIA_PROGRESS_INTERVAL_S`` environment variable, else ``DEFAULT_PLAIN_INTERVAL_S``. A
    value that is not a finite number >= 0 is ignored with a warning (the default is used)."""
    raw = value if value is not None else os.environ.get(PLAIN_INTERVAL_ENV)
    if raw is None or raw == "":
        return DEFAULT_PLAIN_INTERVAL_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not math.isfinite(seconds) or seconds < 0:
        log.warning("%s=%r is not a number of seconds >= 0; using %g", PLAIN_INTERVAL_ENV, raw,
                    DEFAULT_PLAIN_INTERVAL_S)
        return DEFAULT_PLAIN_INTERVAL_S
    return seconds


@dataclass
class StepTally:
    """What a run has done so far, counted from its events: episodes, env steps (against the
    planned upper bound, see the module docstring), tokens in and out, and agent turns whose
    answer held no valid action.

    Steps are env steps: the turns of several agents acting in the same env step count once
    (``StepRecord.step`` is the env step index); actions and invalid actions count agent turns.
    Tokens and actions of an attempt that an infrastructure fault cut short stay counted (they
    were spent); its steps are taken back, since the episode plays them again.
    """

    episodes_total: int = 0
    episodes_done: int = 0
    #: Finished episodes that were not scored (an error, a timeout, a cancelled attempt).
    episodes_failed: int = 0
    #: The run's step cap per episode (``eval.max_steps_per_episode``); 0 when the run sets none.
    step_cap: int = 0
    finished_steps: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    actions: int = 0
    invalid_actions: int = 0
    #: Seconds agent turns waited on the client's rate limits (summed over turns).
    rate_limit_wait_s: float = 0.0
    #: The cost ledger's part of the status (``CostLedger.status``); None: the run has no cap.
    budget_status: Callable[[], str] | None = None
    _running: dict[EpisodeKey, int] = field(default_factory=dict)
    _caps: dict[EpisodeKey, int] = field(default_factory=dict)
    _largest_cap: int = 0

    def begin(self, episodes: int, step_cap: int = 0) -> None:
        """The run starts with ``episodes`` to play, each capped at ``step_cap`` steps (0:
        unknown until the env announces each episode's cap)."""
        self.episodes_total = max(0, episodes)
        self.step_cap = max(0, step_cap)

    def episode_started(self, key: EpisodeKey) -> None:
        """An attempt at episode ``key`` starts (its steps so far: none)."""
        self._running[key] = 0

    def step(self, key: EpisodeKey, index: int, *, input_tokens: int = 0,
             output_tokens: int = 0, valid: bool = True, cap: int = 0,
             rate_limit_wait_s: float = 0.0) -> None:
        """One agent turn of episode ``key`` at env step ``index`` (0-based); ``cap``: the
        episode's step cap as the env announced it (0: not known); ``rate_limit_wait_s``: what
        the turn's model calls waited on rate limits."""
        self.rate_limit_wait_s += rate_limit_wait_s
        self._running[key] = max(self._running.get(key, 0), index + 1)
        if cap > 0:
            self._caps[key] = cap
            self._largest_cap = max(self._largest_cap, cap)
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.actions += 1
        self.invalid_actions += 0 if valid else 1

    def episode_retried(self, key: EpisodeKey) -> None:
        """The attempt at ``key`` was cut short and the episode is queued again."""
        self._running.pop(key, None)

    def episode_finished(self, key: EpisodeKey, num_steps: int, *, failed: bool = False,
                         ) -> None:
        """Episode ``key`` ended after ``num_steps`` env steps; ``failed``: it was not scored."""
        self._running.pop(key, None)
        self._caps.pop(key, None)
        self.episodes_done += 1
        self.episodes_failed += 1 if failed else 0
        self.finished_steps += num_steps

    @property
    def steps_done(self) -> int:
        """Env steps of finished episodes plus those of the episodes being played."""
        return self.finished_steps + sum(self._running.values())

    @property
    def steps_planned(self) -> int | None:
        """The upper bound on the run's env steps (module docstring); None while an episode
        that is still to play has no known cap."""
        fallback = self.step_cap or self._largest_cap
        pending = max(0, self.episodes_total - self.episodes_done - len(self._running))
        running_caps = [self._caps.get(key) or fallback for key in self._running]
        if (pending and not fallback) or not all(running_caps):
            return None
        planned = self.finished_steps + sum(running_caps) + pending * fallback
        return max(planned, self.steps_done)

    def status(self) -> str:
        """``episodes D/T | steps S/P | tokens in I out O | invalid actions V/A`` (``P`` is
        ``?`` while unknown; ``D/T (F failed)`` once an episode failed), then ``extras``."""
        planned = self.steps_planned
        return " | ".join([
            f"{episodes_text(self.episodes_done, self.episodes_total, self.episodes_failed)}",
            f"steps {self.steps_done}/{'?' if planned is None else planned}",
            f"tokens in {self.input_tokens} out {self.output_tokens}",
            f"invalid actions {self.invalid_actions}/{self.actions}", *self.extras()])

    def extras(self) -> list[str]:
        """The parts shown only when they apply: the cost ledger (``budget $S spent + $R
        reserved of $C``) and ``waited on rate limits N s`` once a turn waited."""
        parts = [self.budget_status()] if self.budget_status is not None else []
        if self.rate_limit_wait_s >= 0.05:
            parts.append(f"waited on rate limits {self.rate_limit_wait_s:.1f} s")
        return parts

    def info(self) -> str:
        """The short text beside the terminal's step bar: invalid actions, then tokens (what
        a narrow terminal cuts is the end)."""
        return ", ".join([f"invalid {self.invalid_actions}/{self.actions}",
                          f"tokens {self.input_tokens:,} in / {self.output_tokens:,} out",
                          *self.extras()])


def episodes_text(done: int, total: int, failed: int = 0) -> str:
    """``episodes D/T``, ``T`` as ``?`` when 0 (unknown), with `` (F failed)`` when F > 0."""
    return (f"episodes {done}/{total or '?'}" + (f" ({failed} failed)" if failed else ""))


def episode_name(env: str, task: str, index: int) -> str:
    """``env/task-leaf #index``: how progress output names an episode."""
    return f"{env}/{task.rsplit('/', 1)[-1]} #{index}"


def elapsed_text(seconds: float) -> str:
    """``H:MM:SS`` of ``seconds`` (never negative)."""
    whole = max(0, int(seconds))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


class PlainLines:
    """The plain ``progress:`` lines of one command on ``console`` (a log file or a pipe):
    ``progress: <what> | <status()> | elapsed H:MM:SS``. ``line`` writes one when forced or when
    ``interval_s`` passed since the last (``None``: ``plain_interval()``; ``0``: every unforced
    line is written); ``beat`` writes a ``running`` line whenever the interval passes without
    one. Nothing is written unless ``enabled``. ``clock``: monotonic seconds (injectable)."""

    def __init__(self, console: Console, status: Callable[[], str], *, enabled: bool = True,
                 interval_s: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console
        self.status = status
        self.enabled = enabled
        self.interval_s = plain_interval(interval_s)
        self.clock = clock
        self.started = self.last = clock()

    def restart(self) -> None:
        """Count the elapsed time from now (the run's start)."""
        self.started = self.clock()

    def line(self, what: str, *, force: bool = False) -> None:
        """Write ``progress: <what> | ...`` when ``force`` or the interval has passed."""
        if not self.enabled:
            return
        now = self.clock()
        if not force and now - self.last < self.interval_s:
            return
        self.last = now
        self.console.print(f"{PLAIN_PREFIX} {what} | {self.status()} | elapsed "
                           f"{elapsed_text(now - self.started)}", markup=False,
                           highlight=False, emoji=False, soft_wrap=True)

    async def beat(self, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        """Write a ``running`` line each time ``interval_s`` passes without a line, until
        cancelled (returns at once when not enabled or the interval is 0: then every event
        writes its own line)."""
        if not self.enabled or self.interval_s <= 0:
            return
        while True:
            await sleep(max(self.interval_s - (self.clock() - self.last), 0.5))
            self.line("running")
