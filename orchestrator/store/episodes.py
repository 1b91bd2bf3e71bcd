r"""Episode result files of a run: per-episode JSON and CSV, reading them back, resume.

Layout (a superset of BALROG's)::

    <out>/<env>/<task_dir>/<task_dir>_run_<NN>.json   one per episode (NN: 2+ digit index)
    <out>/<env>/<task_dir>/<task_dir>_run_<NN>.csv    its trajectory

**Task directory names.** BALROG nests a folder per "/" in a task name
(``babyai/BabyAI-MixedTrainLocal-v0/goto/goto_run_00.json``). We instead use one *flat, safe* name:
every "/" (and "\\") becomes ``"__"``, so ``BabyAI-MixedTrainLocal-v0/goto`` is stored as
``babyai/BabyAI-MixedTrainLocal-v0__goto/BabyAI-MixedTrainLocal-v0__goto_run_00.json``. The
original task name is kept in the file (``"task"``), and everything here reads names from the
files, never from paths.

**Atomicity.** Every file goes through ``moria.files.atomic_write_text`` (temp file in the same
directory, fsync, ``os.replace``), so readers see the old or the new file, never a partial one.
An episode's CSV is written before its JSON, so an episode JSON marks a complete episode.
Summaries and the report are ``orchestrator.report.summary``'s.
"""

from __future__ import annotations

import csv
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from moria.files import atomic_write_text
from moria.records import (
    EpisodeRecord,
)
from moria.results import scan_episodes
from orchestrator.plan.spec import RunSpec
from orchestrator.store.telemetry import dumps, scrub

logger = logging.getLogger(__name__)


#: CSV trajectory columns: BALROG's six, then ours: the model's whole answer, whether the env
#: took it, the feedback its player was shown (``StepRecord.feedback``), and the episode's
#: goal where the env states one apart from the instruction (BabyAI's ``mission``; "" else).
CSV_COLUMNS: Final[tuple[str, ...]] = (
    "Step",
    "Action",
    "Reasoning",
    "Observation",
    "Reward",
    "Done",
    "RawCompletion",
    "Valid",
    "Feedback",
    "Goal",
)
#: The ``stats`` key of an episode's goal, for the envs that state one (BabyAI).
GOAL_STAT: Final = "mission"


_FORMAT_VERSION: Final[int] = 1


def safe_name(name: str) -> str:
    r"""The flat directory/file name used for an env or task: "/" and "\\" become ``"__"``.

    ``"BabyAI-MixedTrainLocal-v0/goto"`` -> ``"BabyAI-MixedTrainLocal-v0__goto"``. Raises
    ``ValueError`` for an empty name or one that maps to ``"."``/``".."``.
    """
    flat = name.replace("/", "__").replace("\\", "__")
    if flat in ("", ".", ".."):
        raise ValueError(f"not usable as a file name: {name!r}")
    return flat


def episode_paths(
    out_dir: str | Path, env: str, task: str, episode_index: int
) -> tuple[Path, Path]:
    """``(json_path, csv_path)`` of one episode: ``<out>/<env>/<td>/<td>_run_<NN>.{json,csv}``."""
    task_dir = safe_name(task)
    stem = f"{task_dir}_run_{episode_index:02d}"
    base = Path(out_dir) / safe_name(env) / task_dir
    return base / f"{stem}.json", base / f"{stem}.csv"


def prompts_path(json_path: Path) -> Path:
    """Where an episode's saved prompts go: its JSON path with ``.prompts.jsonl``. Each line is
    ``{"step", "agent_id", "model", "prompt": [{"role", "content", "images": [sha256]}]}``."""
    return json_path.with_name(json_path.stem + ".prompts.jsonl")


def episode_document(record: EpisodeRecord) -> dict[str, Any]:
    """The episode JSON as a dict: BALROG's keys first, then ours, secrets scrubbed.

    BALROG keys: ``task`` (original name), ``action_frequency``, ``input_tokens``,
    ``output_tokens``, ``done``, ``episode_return``, ``num_steps``, ``failed_candidates``,
    ``progression`` (top level, as BALROG merges the env stats there) and ``stats`` (which also
    holds ``progression``), ``seed``, ``agent`` and ``client`` (configs). Ours: format_version,
    run_id, env, episode_index, task_dir, end_reason, error, cached/reasoning tokens, versions,
    ``protocol`` (the prompting protocol, ``EpisodeRecord.protocol``; {} in files written
    before it existed, which means Moria's own), timestamps, wall_time_s, ``attempts`` and
    ``retry_errors`` (re-queues after server faults), ``frames`` and ``frame_count`` (the saved
    frames' folder, ``orchestrator.store.frames``) and the ``steps`` trajectory.
    """
    data = record.model_dump(mode="json")
    stats = {**data["stats"], "progression": record.progression}
    doc: dict[str, Any] = {
        "task": record.task,
        "action_frequency": data["action_frequency"],
        "input_tokens": record.input_tokens,
        "output_tokens": record.output_tokens,
        "done": record.done,
        "episode_return": record.episode_return,
        "num_steps": record.num_steps,
        "failed_candidates": data["failed_candidates"],
        "progression": record.progression,
        "stats": stats,
        "seed": record.seed,
        "agent": data["agent_config"],
        "client": data["client_config"],
        "format_version": _FORMAT_VERSION,
        "run_id": record.run_id,
        "env": record.env,
        "episode_index": record.episode_index,
        "task_dir": safe_name(record.task),
        "end_reason": record.end_reason,
        "error": record.error,
        "cached_input_tokens": record.cached_input_tokens,
        "reasoning_tokens": record.reasoning_tokens,
        "usage_by_model": data["usage_by_model"],
        "players": data["players"],
        "versions": data["versions"],
        "protocol": data["protocol"],
        "started_at": record.started_at,
        "ended_at": record.ended_at,
        "wall_time_s": record.wall_time_s,
        "attempts": record.attempts,
        "retry_errors": data["retry_errors"],
        "frames": record.frames,
        "frame_count": record.frame_count,
        "steps": data["steps"],
    }
    scrubbed: dict[str, Any] = scrub(doc)
    return scrubbed


def trajectory_csv(record: EpisodeRecord) -> str:
    """The CSV trajectory text: header ``CSV_COLUMNS``, one row per step (RFC 4180 quoting)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    goal = str(record.stats.get(GOAL_STAT) or "")
    for s in record.steps:
        writer.writerow(
            [
                s.step,
                s.action,
                s.reasoning,
                s.observation,
                s.reward,
                s.done,
                s.raw_completion,
                s.valid,
                s.feedback,
                goal,
            ]
        )
    return buffer.getvalue()


def write_episode(out_dir: str | Path, record: EpisodeRecord) -> tuple[Path, Path]:
    """Write one episode's CSV then JSON atomically; return ``(json_path, csv_path)``.

    Reproduces BALROG's per-episode ``<task>_run_<NN>.json``/``.csv`` (with the flat task
    directory described in the module docstring). Agent/client config and every other field are
    passed through ``scrub``, so API keys never land on disk. Overwrites an earlier attempt of
    the same episode. With saved prompts (``eval.save_prompts``) they go first, one JSON line
    per model call, to ``<task_dir>_run_<NN>.prompts.jsonl`` (see ``prompts_path``). Raises
    ``OSError`` on I/O failure.
    """
    json_path, csv_path = episode_paths(out_dir, record.env, record.task, record.episode_index)
    if record.prompts:
        lines = (dumps(scrub(p)) for p in record.prompts)
        atomic_write_text(prompts_path(json_path), "\n".join(lines) + "\n")
    atomic_write_text(csv_path, trajectory_csv(record))
    atomic_write_text(json_path, dumps(episode_document(record), indent=2) + "\n")
    return json_path, csv_path


# -- reading / resume --------------------------------------------------------------------------
def load_episodes(out_dir: str | Path) -> list[EpisodeRecord]:
    """All readable episodes under ``out_dir`` (see ``scan_episodes``); bad files are logged."""
    episodes, warnings = scan_episodes(out_dir)
    for warning in warnings:
        logger.warning("%s", warning)
    return episodes


def completed_keys(out_dir: str | Path) -> set[tuple[str, str, int]]:
    """``{(env, task, episode_index)}`` of episodes that need not be re-run on resume.

    An episode is completed when its JSON exists, parses and its ``end_reason`` is
    ``terminated`` or ``truncated``; ``agent_error``/``env_error``/``cancelled`` episodes and
    corrupt files are left out so they are re-run (BALROG skips any existing JSON).
    """
    return {e.key for e in load_episodes(out_dir) if e.scored}


def planned_from_run_file(out_dir: str | Path) -> Iterator[tuple[str, str, int]] | None:
    """The planned episode keys of the run spec saved in ``<out>/run.json``; None when there
    is no readable spec (a directory not written by ``moria eval``)."""
    try:
        meta = json.loads((Path(out_dir) / "run.json").read_text(encoding="utf-8"))
        return RunSpec.model_validate(meta["spec"]).episodes()
    except (OSError, ValueError, KeyError, TypeError):
        return None
