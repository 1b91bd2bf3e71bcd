"""The run service's durable event log and its JSON <-> protobuf conversions.

One append-only JSON-lines file per run; line N is event sequence N (1-based), so sequences
survive a restart. The service appends its own lifecycle events and the runner's events it
receives from the run's event stream (``orchestrator.core.events``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
from pathlib import Path
from typing import Any, Final

from google.protobuf import struct_pb2

from orchestrator.plan.spec import RunSpec
from orchestrator.store.telemetry import dumps

log = logging.getLogger("moria.orchestrator.apps.service")

_MAX_EXACT_INT: Final[int] = 2**53

# -- conversions -------------------------------------------------------------------------------
def integral_numbers(obj: Any) -> Any:
    """Return ``obj`` with floats that hold whole numbers (below 2**53) turned into ints, at any
    depth: a Struct carries every number as a double, and options such as
    ``envs.babyai_kwargs.num_dists`` must reach the env as ints."""
    if isinstance(obj, float) and obj.is_integer() and abs(obj) < _MAX_EXACT_INT:
        return int(obj)
    if isinstance(obj, dict):
        return {k: integral_numbers(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [integral_numbers(v) for v in obj]
    return obj


def struct_safe(obj: Any) -> Any:
    """Return ``obj`` ready for a protobuf Struct: ints beyond 2**53 (64-bit seeds) become
    decimal strings instead of losing digits as doubles; non-finite floats become None."""
    if isinstance(obj, bool) or obj is None:
        return obj
    if isinstance(obj, int):
        return str(obj) if abs(obj) >= _MAX_EXACT_INT else obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {str(k): struct_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [struct_safe(v) for v in obj]
    return obj


def to_struct(data: dict[str, Any] | None) -> struct_pb2.Struct:
    """A JSON-like dict as a Struct (see ``struct_safe``)."""
    out = struct_pb2.Struct()
    if data:
        out.update(struct_safe(data))
    return out


def normalised_spec(spec: RunSpec) -> dict[str, Any]:
    """The spec as stored and compared: a JSON round trip of its scrubbed dump."""
    return dict(json.loads(dumps(spec.model_dump(mode="json"))))


def comparable_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` without ``eval.output_dir`` (the server's choice, not the client's)."""
    evaluation = {k: v for k, v in dict(spec.get("eval") or {}).items() if k != "output_dir"}
    return {**spec, "eval": evaluation}


# -- the event log -----------------------------------------------------------------------------
class EventLog:
    """The durable, ordered event log of one run: ``service_events.jsonl``, one JSON object per
    line, line N (1-based) being the event of sequence N.

    Each line holds ``sequence``, ``type``, ``ts`` (Unix seconds) and ``payload`` (logs written
    by earlier versions may also hold a ``source``, which is ignored). Appends are flushed and
    fsynced before they become visible to readers.
    Must be used from one event loop (the server's).
    """

    def __init__(self, path: Path):
        self.path = path
        self.events: list[dict[str, Any]] = []
        self._changed = asyncio.Event()

    @classmethod
    def load(cls, path: Path) -> EventLog:
        """Read ``path`` (missing: empty log). A last line without its newline (a crash while
        writing it) is cut off the file, so sequences stay dense. Raises OSError."""
        events = cls(path)
        if not path.exists():
            return events
        data = path.read_bytes()
        keep = data.rfind(b"\n") + 1
        if keep < len(data):
            log.warning("%s: dropping an incomplete last line (%d bytes)", path, len(data) - keep)
            with path.open("r+b") as handle:
                handle.truncate(keep)
                handle.flush()
                os.fsync(handle.fileno())
        for number, raw in enumerate(data[:keep].splitlines(), start=1):
            try:
                event = json.loads(raw)
                if not isinstance(event, dict):
                    raise ValueError("not an object")
            except ValueError:
                log.warning("%s: line %d is unreadable; kept as an 'unreadable' event", path,
                            number)
                event = {"type": "unreadable", "ts": 0.0, "payload": {}}
            event["sequence"] = number
            events.events.append(event)
        return events

    @property
    def last_sequence(self) -> int:
        """The sequence of the last event (0: none)."""
        return len(self.events)

    @property
    def changed(self) -> asyncio.Event:
        """An event set at the next append (take it before reading ``events``)."""
        return self._changed

    def append(self, items: list[tuple[str, float, dict[str, Any]]]) -> None:
        """Append ``(type, unix ts, payload)`` items in order, durably. Raises OSError."""
        if not items:
            return
        new: list[dict[str, Any]] = []
        for kind, ts, payload in items:
            event: dict[str, Any] = {"sequence": len(self.events) + len(new) + 1, "type": kind,
                                     "ts": ts, "payload": payload}
            new.append(json.loads(dumps(event)))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8", newline="\n") as handle:
            handle.write("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in new))
            handle.flush()
            os.fsync(handle.fileno())
        self.events.extend(new)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

