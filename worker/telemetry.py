"""The worker's JSON-lines telemetry, with MOSAIC's field names.

Files (under ``--telemetry-dir``; none with ``--no-jsonl``):

- ``<run_id>_steps.jsonl``: one line per agent turn (every seat; ``agent_id`` tells whose);
- ``<run_id>_episodes.jsonl``: one line per finished episode;
- ``<run_id>_events.jsonl``: lifecycle events (``event`` = run_started, run_completed,
  run_failed, run_cancelled, heartbeat).

Every line is scrubbed of secrets (``orchestrator.store.telemetry.dumps``) and written with one
``write`` call followed by ``flush``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.store.telemetry import JsonlAppender, RunFiles, dumps, utc_now_iso

#: Fields of a step line, in order.
STEP_FIELDS: tuple[str, ...] = (
    "run_id", "episode_id", "step_index", "agent_id", "observation", "action", "reward",
    "terminated", "truncated", "info", "llm_response", "llm_input_tokens", "llm_output_tokens",
    "timestamp",
)
#: Fields of an episode line, in order.
EPISODE_FIELDS: tuple[str, ...] = (
    "run_id", "episode_id", "episode_index", "env_name", "task", "total_reward", "num_steps",
    "terminated", "truncated", "success", "start_time", "end_time", "duration_seconds",
    "llm_calls", "total_input_tokens", "total_output_tokens",
)
#: Lifecycle event names.
EVENTS: tuple[str, ...] = ("run_started", "run_completed", "run_failed", "run_cancelled",
                           "heartbeat")


def episode_id(run_id: str, episode_index: int) -> str:
    """``<run_id>-ep%06d``."""
    return f"{run_id}-ep{episode_index:06d}"


class WorkerTelemetry(RunFiles):
    """Append-only writer of the three files. ``enabled=False`` writes nothing (--no-jsonl).

    ``echo``: called with every event object too (interactive ``--stdout-events``).
    Thread-safe; ``close()`` is idempotent and later writes are ignored.
    """

    def __init__(self, out_dir: str | Path, run_id: str, *, enabled: bool = True,
                 echo: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.out_dir = Path(out_dir)
        self.run_id = run_id
        self.enabled = enabled
        self.echo = echo
        self._files = JsonlAppender()

    def step(self, record: dict[str, Any]) -> None:
        """Append one step line (``record`` holds ``STEP_FIELDS``; extra keys are kept)."""
        self._write(self.steps_path, {"run_id": self.run_id, **record})

    def episode(self, record: dict[str, Any]) -> None:
        """Append one episode line (``record`` holds ``EPISODE_FIELDS``)."""
        self._write(self.episodes_path, {"run_id": self.run_id, **record})

    def event(self, name: str, **fields: Any) -> None:
        """Append one lifecycle event ``{"event": name, "run_id", "timestamp", **fields}``.

        Raises ValueError for a name not in ``EVENTS``.
        """
        if name not in EVENTS:
            raise ValueError(f"unknown event {name!r}; allowed: {', '.join(EVENTS)}")
        body = {"event": name, "run_id": self.run_id, "timestamp": utc_now_iso(), **fields}
        self._write(self.events_path, body)
        if self.echo is not None:
            self.echo({"type": "event", **body})

    def _write(self, path: Path, payload: dict[str, Any]) -> None:
        if self.enabled:
            self._files.append(path, dumps(payload))

    def close(self) -> None:
        """Flush and close the files."""
        self._files.close()
