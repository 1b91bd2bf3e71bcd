"""A run's outcome: the one place that decides whether a run succeeded.

Every entry point (``moria eval``, ``moria harness``, ``moria tournament``, the MOSAIC workers
and the orchestrator service) computes its verdict here, from the episode records, never from
what the invocation happened to see. The rules:

- **succeeded** (exit code 0, ``RUN_STATE_SUCCEEDED``): every planned episode has a scored
  record (``end_reason`` ``terminated`` or ``truncated``);
- **failed** (exit code 1, ``RUN_STATE_FAILED``): any planned episode ended ``agent_error``,
  ``env_error`` (an infrastructure fault after its retries counts here), ``cancelled``, or has no
  record at all. The verdict names how many of each and the first distinct error messages.

Failed episodes are never scored (``orchestrator.report.summary``); rerunning into the same
directory
plays them again. Usage errors (bad config, bad input) are exit code 2 and never reach this
module: they stop a run before its first episode.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from moria.records import EpisodeRecord

#: How many distinct error messages a verdict keeps (the first ones, in episode order).
MAX_DISTINCT_ERRORS: Final[int] = 5
#: How many characters of each kept error message are kept.
MAX_ERROR_CHARS: Final[int] = 500

EXIT_SUCCEEDED: Final[int] = 0
EXIT_FAILED: Final[int] = 1
#: Bad usage or configuration: the run never started (not decided here; listed for the docs).
EXIT_USAGE: Final[int] = 2

SUCCEEDED: Final[str] = "succeeded"
FAILED: Final[str] = "failed"


@dataclass(frozen=True)
class RunVerdict:
    """What a run's episode records say about the run as a whole.

    ``planned``: episodes the run spec plans; ``scored``: of those, episodes with a scored
    record; ``failed``: {end_reason: count} of planned episodes whose record is not scored;
    ``missing``: planned episodes with no record; ``errors``: the first distinct error
    messages (at most ``MAX_DISTINCT_ERRORS``, each cut to ``MAX_ERROR_CHARS``), each prefixed
    by its first episode (``env/task#index``) and followed by how many episodes share it.
    """

    planned: int
    scored: int
    failed: dict[str, int] = field(default_factory=dict)
    missing: int = 0
    errors: tuple[str, ...] = ()

    @property
    def failed_total(self) -> int:
        """Planned episodes that did not end with a score (failed records plus missing)."""
        return sum(self.failed.values()) + self.missing

    @property
    def succeeded(self) -> bool:
        """True when every planned episode was scored."""
        return self.failed_total == 0 and self.scored == self.planned

    @property
    def state(self) -> str:
        """``"succeeded"`` or ``"failed"``."""
        return SUCCEEDED if self.succeeded else FAILED

    @property
    def exit_code(self) -> int:
        """0 when succeeded, 1 otherwise."""
        return EXIT_SUCCEEDED if self.succeeded else EXIT_FAILED

    def headline(self) -> str:
        """One line: ``"all 10 episodes scored"`` or ``"3 of 10 episodes failed (agent_error:
        2, missing: 1); scored 7"``."""
        if self.succeeded:
            return f"all {self.planned} episode(s) scored"
        parts = [f"{reason}: {count}" for reason, count in sorted(self.failed.items())]
        if self.missing:
            parts.append(f"not played: {self.missing}")
        return (f"{self.failed_total} of {self.planned} episode(s) failed "
                f"({', '.join(parts)}); {self.scored} scored")

    def describe(self) -> str:
        """``headline`` followed by the distinct error messages, one per line."""
        lines = [self.headline()]
        lines.extend(f"  {error}" for error in self.errors)
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        """The ``outcome`` entry of ``summary.json`` and of the service's ``Run.summary``."""
        return {"state": self.state, "exit_code": self.exit_code, "episodes_planned": self.planned,
                "episodes_scored": self.scored, "episodes_failed": self.failed_total,
                "failed_by_reason": dict(sorted(self.failed.items())),
                "episodes_missing": self.missing, "errors": list(self.errors)}


def verdict(records: Iterable[EpisodeRecord],
            planned: Iterable[tuple[str, str, int]] | None = None) -> RunVerdict:
    """The verdict over ``records`` for the ``planned`` episode keys ``(env, task, index)``.

    ``planned`` may be a lazy iterable (it is consumed once). Records outside ``planned`` are
    ignored; when ``planned`` is None, the records themselves are the plan (nothing can be
    missing). A key with several records (not written by Moria) counts once, scored if any is.
    """
    by_key: dict[tuple[str, str, int], EpisodeRecord] = {}
    for record in records:
        kept = by_key.get(record.key)
        if kept is None or (record.scored and not kept.scored):
            by_key[record.key] = record
    if planned is None:
        keys: Iterable[tuple[str, str, int]] = list(by_key)
    else:
        keys = planned
    total = scored = missing = 0
    failed: Counter[str] = Counter()
    first: dict[str, str] = {}
    repeats: Counter[str] = Counter()
    for key in keys:
        total += 1
        chosen = by_key.get(key)
        if chosen is None:
            missing += 1
        elif chosen.scored:
            scored += 1
        else:
            failed[chosen.end_reason] += 1
            message = (chosen.error or chosen.end_reason)[:MAX_ERROR_CHARS]
            repeats[message] += 1
            if message not in first and len(first) < MAX_DISTINCT_ERRORS:
                first[message] = f"{chosen.env}/{chosen.task}#{chosen.episode_index}"
    errors = tuple(f"{where}: {message}" + (f" (and {repeats[message] - 1} more episode(s))"
                                            if repeats[message] > 1 else "")
                   for message, where in first.items())
    return RunVerdict(planned=total, scored=scored, failed=dict(failed), missing=missing,
                      errors=errors)


def verdict_from_summary(summary: dict[str, Any]) -> RunVerdict:
    """The verdict kept in a ``summary.json`` (its ``outcome`` entry, ``RunVerdict.as_json``).
    Raises KeyError when the summary has none (written before outcomes existed)."""
    data = summary["outcome"]
    return RunVerdict(planned=int(data["episodes_planned"]), scored=int(data["episodes_scored"]),
                      failed={str(k): int(v) for k, v in data["failed_by_reason"].items()},
                      missing=int(data["episodes_missing"]),
                      errors=tuple(str(e) for e in data["errors"]))
