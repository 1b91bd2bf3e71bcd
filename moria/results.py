"""Reading the results of a run: the one reader of Moria's result files, used by ``moria
report``, ``moria compare``, ``moria leaderboard``, ``moria view``, the exports and your own
analysis.

    >>> from moria.results import load_run
    >>> run = load_run("results")            # a directory written by moria eval
    >>> run.episodes_frame().groupby("env")["progression"].mean()
    >>> run.steps_frame().query("not valid")[["env", "task", "step", "raw_completion"]]

A run directory holds one JSON file per episode (``<env>/<task_dir>/<task_dir>_run_<NN>.json``;
the layout is documented in docs/architecture.md), the run's ``run.json`` (its spec, versions
and id) and ``summary.json``. ``load_run`` reads them all; a file that cannot be read or is no
episode is skipped with a warning (``Run.warnings``), never guessed at. The DataFrame methods
need pandas (``pip install 'moria[results]'``; ``make install`` has it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pydantic import ValidationError

from moria.records import EpisodeRecord

if TYPE_CHECKING:
    import pandas as pd

#: The largest episode file read (bytes): a file above it is skipped with a warning (a long
#: NetHack episode with its trajectory is tens of MB; JSON takes several times its size in
#: memory once parsed).
MAX_EPISODE_BYTES: Final = 128 * 1024 * 1024
#: The glob of episode files under a run directory.
EPISODE_GLOB: Final = "*/*/*_run_*.json"


class ResultsError(ValueError):
    """A path that is not a run directory (the message says what was found)."""


def read_episode(path: str | Path, *, max_bytes: int = MAX_EPISODE_BYTES) -> EpisodeRecord:
    """The episode of one JSON file.

    Raises OSError when it cannot be read, ValueError when it is larger than ``max_bytes``
    or is no episode (not JSON, a top level that is no object, or fields that fail
    ``EpisodeRecord``'s validation: pydantic's ValidationError is a ValueError).
    """
    file = Path(path)
    size = file.stat().st_size
    if size > max_bytes:
        raise ValueError(f"{size:,} bytes, more than the {max_bytes:,} an episode file may be")
    doc = json.loads(file.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise ValueError("the top level is not a JSON object")
    return record_from_document(doc)


def record_from_document(doc: Mapping[str, Any]) -> EpisodeRecord:
    """An ``EpisodeRecord`` from an episode JSON document (BALROG's ``agent``/``client`` keys
    name the configs). Raises pydantic.ValidationError for a document that is no episode."""
    fields = {k: doc[k] for k in EpisodeRecord.model_fields if k in doc}
    fields.setdefault("agent_config", doc.get("agent") or {})
    fields.setdefault("client_config", doc.get("client") or {})
    return EpisodeRecord.model_validate(fields)


def scan_episodes(out_dir: str | Path) -> tuple[list[EpisodeRecord], list[str]]:
    """Parse every episode file under ``out_dir``; return ``(episodes, warnings)``.

    Episodes are sorted by ``(env, task, episode_index)``. Unreadable, oversized, partial or
    invalid files yield one warning each and are otherwise ignored; never raises for bad
    files. A missing ``out_dir`` gives ``([], [])``.
    """
    root = Path(out_dir)
    episodes: list[EpisodeRecord] = []
    warnings: list[str] = []
    if not root.is_dir():
        return episodes, warnings
    for path in sorted(root.glob(EPISODE_GLOB)):
        try:
            episodes.append(read_episode(path))
        except (OSError, ValueError, ValidationError) as exc:  # incl. JSONDecodeError
            summary = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            warnings.append(f"ignoring unreadable episode file {path}: {summary}")
    episodes.sort(key=lambda e: e.key)
    return episodes, warnings


def _read_json(path: Path) -> dict[str, Any]:
    """A small JSON document of the run (``run.json``, ``summary.json``); {} when missing or
    unreadable."""
    try:
        if path.stat().st_size > MAX_EPISODE_BYTES:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


@dataclass
class Run:
    """One run directory as read: ``path``, ``run_id`` (from ``run.json``, else the episodes',
    else the directory name), ``spec`` (the validated run spec as saved, {} when missing),
    ``summary`` (``summary.json``, {} when missing), ``episodes`` (sorted by env, task,
    index), ``warnings`` (files skipped) and ``source``: where the run was played when it was
    not here (``run.json``'s ``source``: a run the viewer mirrors from an orchestrator service,
    whose episodes carry their outcome but no steps); "" for a local run."""

    path: Path
    run_id: str
    spec: dict[str, Any]
    summary: dict[str, Any]
    episodes: list[EpisodeRecord] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    source: str = ""

    @property
    def protocol(self) -> str:
        """The protocol the run's episodes were played under: ``moria``, ``balrog`` or
        ``mixed`` (episodes of several); ``moria`` for a run without episodes."""
        names = {e.protocol_name for e in self.episodes}
        return names.pop() if len(names) == 1 else ("mixed" if names else "moria")

    @property
    def models(self) -> list[str]:
        """The models that answered in the run (``<client_name>/<model_id>``), sorted; for a
        run of non-model players, their strategy names."""
        found = {model for e in self.episodes for model in e.usage_by_model}
        if not found:
            found = {str(e.agent_config.get("type") or "") for e in self.episodes} - {""}
        return sorted(found)

    def episode(self, env: str, task: str, episode_index: int) -> EpisodeRecord:
        """The episode ``(env, task, episode_index)``. Raises KeyError when the run has none."""
        for record in self.episodes:
            if record.key == (env, task, episode_index):
                return record
        raise KeyError((env, task, episode_index))

    def episodes_frame(self) -> pd.DataFrame:
        """One row per episode: ``env``, ``task``, ``episode_index``, ``seed``,
        ``end_reason``, ``scored`` (bool), ``progression`` (0..1), ``num_steps``,
        ``episode_return``, ``input_tokens``, ``output_tokens``, ``cached_input_tokens``,
        ``reasoning_tokens``, ``actions`` and ``invalid_actions`` (recorded turns and those the
        env judged invalid), ``models`` (", "-joined), ``protocol``, ``wall_time_s``,
        ``attempts``, ``frame_count``, ``error``. Raises ImportError without pandas."""
        import pandas as pd

        rows = [{
            "run_id": e.run_id, "env": e.env, "task": e.task, "episode_index": e.episode_index,
            "seed": e.seed, "end_reason": e.end_reason, "scored": e.scored,
            "progression": e.progression, "num_steps": e.num_steps,
            "episode_return": e.episode_return, "input_tokens": e.input_tokens,
            "output_tokens": e.output_tokens, "cached_input_tokens": e.cached_input_tokens,
            "reasoning_tokens": e.reasoning_tokens, "actions": len(e.steps),
            "invalid_actions": sum(1 for s in e.steps if not s.valid),
            "models": ", ".join(sorted(e.usage_by_model)), "protocol": e.protocol_name,
            "wall_time_s": e.wall_time_s, "attempts": e.attempts,
            "frame_count": e.frame_count, "error": e.error,
        } for e in self.episodes]
        return pd.DataFrame(rows, columns=list(_EPISODE_COLUMNS))

    def steps_frame(self) -> pd.DataFrame:
        """One row per recorded agent turn: the episode's ``env``, ``task``,
        ``episode_index`` and ``seed``, then the step's fields (``moria.records.StepRecord``:
        ``step``, ``agent_id``, ``observation``, ``raw_completion``, ``reasoning``, ``action``,
        ``valid``, ``feedback``, ``reward``, ``done``, tokens, ``latency_s``, ``model``,
        ``stop_reason``, ``attempts``). Raises ImportError without pandas."""
        import pandas as pd

        rows = [{"env": e.env, "task": e.task, "episode_index": e.episode_index,
                 "seed": e.seed, **s.model_dump()} for e in self.episodes for s in e.steps]
        return pd.DataFrame(rows, columns=list(_STEP_COLUMNS))


_EPISODE_COLUMNS: Final = (
    "run_id", "env", "task", "episode_index", "seed", "end_reason", "scored", "progression",
    "num_steps", "episode_return", "input_tokens", "output_tokens", "cached_input_tokens",
    "reasoning_tokens", "actions", "invalid_actions", "models", "protocol", "wall_time_s",
    "attempts", "frame_count", "error")
_STEP_COLUMNS: Final = (
    "env", "task", "episode_index", "seed", "step", "agent_id", "observation",
    "raw_completion", "reasoning", "action", "valid", "feedback", "reward", "done",
    "input_tokens", "output_tokens", "cached_input_tokens", "reasoning_tokens", "latency_s",
    "model", "stop_reason", "attempts")


def load_run(path: str | Path) -> Run:
    """Read the run directory ``path``.

    Raises ResultsError when ``path`` is not a directory, or holds neither episode files nor
    a ``run.json`` (then it is no run directory of ``moria eval``).
    """
    root = Path(path)
    if not root.is_dir():
        raise ResultsError(f"{root} is not a directory (a run directory of moria eval holds "
                           "run.json and <env>/<task>/<task>_run_NN.json files)")
    meta = _read_json(root / "run.json")
    episodes, warnings = scan_episodes(root)
    if not meta and not episodes:
        raise ResultsError(f"{root} holds no run.json and no episode files: not a run "
                           "directory of moria eval")
    run_id = str(meta.get("run_id") or (episodes[0].run_id if episodes else "") or root.name)
    spec = meta.get("spec")
    return Run(path=root, run_id=run_id, spec=spec if isinstance(spec, dict) else {},
               summary=_read_json(root / "summary.json"), episodes=episodes,
               warnings=warnings, source=str(meta.get("source") or ""))
