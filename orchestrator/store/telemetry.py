"""JSON-lines telemetry of a run, and the secret scrubber applied to everything we write.

``TelemetryWriter(out_dir, run_id)`` appends one JSON object per line to three files:

- ``<out>/<run_id>_steps.jsonl``: one line per agent turn (``type`` = ``"step"``);
- ``<out>/<run_id>_episodes.jsonl``: one line per finished episode, its summary fields without
  the trajectory (``type`` = ``"episode"``);
- ``<out>/<run_id>_events.jsonl``: lifecycle events (``type`` = ``"run_started"``,
  ``"episode_started"``, ``"episode_retried"``, ``"run_finished"``, ...).

A run resumed after a crash first cuts an unterminated last line off each file
(``drop_partial_line``), so every line of every file is whole JSON.

Every line starts with ``ts`` (ISO-8601, UTC), ``run_id`` and ``type``. Each line is written with a
single ``write`` call under a lock and flushed at once, so lines never interleave within one
process (threads or asyncio tasks) and a crash loses at most the line being written.

Secrets never reach a file: ``scrub`` is applied to every line, and ``orchestrator.store.episodes``
uses
it for episode files and summaries too.
"""

from __future__ import annotations

import functools
import json
import math
import os
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Final, Self

from pydantic import BaseModel

from moria.records import EpisodeRecord, StepRecord

#: A key whose (lower-cased) name contains one of these holds a secret when its value is text.
SECRET_KEY_PARTS: Final[tuple[str, ...]] = (
    "api_key",
    "apikey",
    "authorization",
    "token",
    "secret",
    "password",
)
#: For these, any non-numeric value is dropped (e.g. a header dict under "authorization").
_ALWAYS_SECRET_PARTS: Final[tuple[str, ...]] = (
    "api_key",
    "apikey",
    "authorization",
    "secret",
    "password",
)
_RESERVED: Final[frozenset[str]] = frozenset({"ts", "run_id", "type"})


def _harmless(value: object) -> bool:
    return value is None or isinstance(value, int | float)  # bool is an int


@functools.lru_cache(maxsize=4096)
def _secret_kind(key: str) -> int:
    """0: an ordinary key name; 1: a secret-bearing name whose numbers are kept (``token``);
    2: one whose every non-numeric value is dropped. Cached: a run writes the same few dozen
    key names on every step."""
    name = key.lower()
    if not any(part in name for part in SECRET_KEY_PARTS):
        return 0
    return 2 if any(part in name for part in _ALWAYS_SECRET_PARTS) else 1


def _drop(key: str, value: object) -> bool:
    kind = _secret_kind(key)
    if not kind:
        return False
    if isinstance(value, str | bytes | bytearray):
        return True
    return kind == 2 and not _harmless(value)


def scrub(obj: Any) -> Any:
    """Return a copy of ``obj`` with secret-bearing keys removed, at any depth.

    A mapping key is dropped when its name (case-insensitive) contains ``api_key``, ``apikey``,
    ``authorization``, ``token``, ``secret`` or ``password`` and its value is a string (or bytes).
    For the names other than ``token``, any non-numeric value (a dict, a list) is dropped too.
    Numeric values are kept, so usage counts such as ``input_tokens`` or ``max_tokens`` survive,
    as do lists under names like ``stop_tokens``. Pydantic models are dumped to dicts first;
    tuples and sets become lists; other values are returned unchanged. Never raises for
    JSON-like input.
    """
    return _clean(obj, finite=False)


def _clean(obj: Any, *, finite: bool) -> Any:
    """``scrub``'s walk; with ``finite``, non-finite floats also become None (one pass for
    ``dumps``). Leaves of the common types return first: a step line is mostly strings."""
    kind = type(obj)
    if kind is str or kind is int or kind is bool or obj is None:
        return obj
    if kind is float:
        return None if finite and not math.isfinite(obj) else obj
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json")
    if isinstance(obj, Mapping):
        return {str(k): _clean(v, finite=finite) for k, v in obj.items()
                if not _drop(str(k), v)}
    if isinstance(obj, list | tuple | set | frozenset):
        return [_clean(v, finite=finite) for v in obj]
    if finite and isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def json_default(value: Any) -> Any:
    """``json.dumps`` fallback: pydantic models, paths, datetimes, numpy scalars/arrays, sets."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    for attr in ("tolist", "item"):  # numpy arrays and scalars, without importing numpy
        method = getattr(value, attr, None)
        if callable(method):
            return method()
    return str(value)


def dumps(obj: Any, *, indent: int | None = None) -> str:
    """Scrub ``obj`` and serialise it as JSON (UTF-8 text; non-finite floats become null)."""
    return json.dumps(_clean(obj, finite=True), default=json_default, ensure_ascii=False,
                      indent=indent)


def utc_now_iso() -> str:
    """The current UTC time as ISO-8601 with microseconds: ``2025-01-31T12:00:00.123456+00:00``."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def drop_partial_line(path: Path) -> int:
    """Cut an unterminated last line off ``path`` (a writer killed mid-line leaves one), so a
    resumed run appends whole lines only. Returns the bytes removed (0 when the file is whole
    or missing)."""
    try:
        with path.open("rb+") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size == 0:
                return 0
            handle.seek(size - 1)
            if handle.read(1) == b"\n":
                return 0
            keep = 0
            block = 65536
            position = size
            while position > 0:
                start = max(0, position - block)
                handle.seek(start)
                chunk = handle.read(position - start)
                newline = chunk.rfind(b"\n")
                if newline >= 0:
                    keep = start + newline + 1
                    break
                position = start
            handle.truncate(keep)
            return size - keep
    except FileNotFoundError:
        return 0


class JsonlAppender:
    """Appends JSON lines to files, each file opened once (append mode) and kept open.

    Thread-safe: each line goes out in one ``write`` plus ``flush`` under a lock, so lines
    never interleave; before the first append to a file, a partial last line left by a killed
    writer is cut off (``drop_partial_line``). After ``close`` appends are refused.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[Path, IO[str]] = {}
        self._closed = False

    def append(self, path: Path, line: str) -> bool:
        """Append ``line`` (no newline inside; one is added). False when closed."""
        with self._lock:
            if self._closed:
                return False
            handle = self._files.get(path)
            if handle is None:
                path.parent.mkdir(parents=True, exist_ok=True)
                drop_partial_line(path)
                handle = path.open("a", encoding="utf-8", newline="\n")
                self._files[path] = handle
            handle.write(line + "\n")
            handle.flush()
            return True

    def close(self) -> None:
        """Flush and close every file. Idempotent."""
        with self._lock:
            self._closed = True
            files, self._files = self._files, {}
        for handle in files.values():
            handle.close()


class RunFiles:
    """The three JSON-lines files of a run under ``out_dir``, named by ``run_id`` (the names
    MOSAIC's workers use; the worker's telemetry shares them)."""

    out_dir: Path
    run_id: str

    @property
    def steps_path(self) -> Path:
        """``<out>/<run_id>_steps.jsonl``."""
        return self.out_dir / f"{self.run_id}_steps.jsonl"

    @property
    def episodes_path(self) -> Path:
        """``<out>/<run_id>_episodes.jsonl``."""
        return self.out_dir / f"{self.run_id}_episodes.jsonl"

    @property
    def events_path(self) -> Path:
        """``<out>/<run_id>_events.jsonl``."""
        return self.out_dir / f"{self.run_id}_events.jsonl"


class TelemetryWriter(RunFiles):
    """Append-only JSON-lines writer for one run's steps, episodes and lifecycle events.

    Files are created under ``out_dir`` (made if missing) on first use, opened in append mode so a
    resumed run continues the same files. Use as a context manager or call ``close()``. Writing
    after ``close()`` raises ``RuntimeError``.
    """

    def __init__(self, out_dir: str | Path, run_id: str) -> None:
        if not run_id or "/" in run_id or "\\" in run_id:
            raise ValueError(f"run_id must be a non-empty name without path separators: {run_id!r}")
        self.out_dir = Path(out_dir)
        self.run_id = run_id
        self._files = JsonlAppender()


    # -- writers -----------------------------------------------------------------------------
    def write_step(
        self,
        step: StepRecord | Mapping[str, Any],
        *,
        env: str,
        task: str,
        episode_index: int,
        **fields: Any,
    ) -> None:
        """Append one ``type="step"`` line: the step's fields plus env, task, episode_index."""
        body = step.model_dump(mode="json") if isinstance(step, StepRecord) else dict(step)
        payload = {"env": env, "task": task, "episode_index": episode_index, **body, **fields}
        self._write(self.steps_path, "step", payload)

    def write_episode(self, record: EpisodeRecord, **fields: Any) -> None:
        """Append one ``type="episode"`` line: the episode's summary fields, without its steps.

        The line's ``run_id`` is the writer's; a record from another run id keeps its own as
        ``record_run_id``.
        """
        body = record.summary_fields()
        record_run_id = body.pop("run_id")
        if record_run_id != self.run_id:
            body["record_run_id"] = record_run_id
        self._write(self.episodes_path, "episode", {**body, **fields})

    def event(self, kind: str, **fields: Any) -> None:
        """Append one lifecycle event line of ``type`` = ``kind``.

        E.g. ``event("episode_retried", env="babyai", task=..., episode_index=3, attempt=2)``.
        Raises ``ValueError`` for an empty ``kind`` or a reserved field (ts, run_id, type).
        """
        if not kind:
            raise ValueError("event kind must be a non-empty string")
        self._write(self.events_path, kind, fields)

    def _write(self, path: Path, kind: str, payload: Mapping[str, Any]) -> None:
        clash = _RESERVED.intersection(payload)
        if clash:
            raise ValueError(f"telemetry fields may not use reserved keys: {sorted(clash)}")
        line = dumps({"ts": utc_now_iso(), "run_id": self.run_id, "type": kind, **payload})
        if "\n" in line:  # json.dumps escapes newlines in strings; guard the invariant anyway
            raise AssertionError("telemetry line contains a raw newline")
        if not self._files.append(path, line):
            raise RuntimeError("TelemetryWriter is closed")

    def close(self) -> None:
        """Flush and close all files. Idempotent."""
        self._files.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
