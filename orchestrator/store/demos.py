"""Recorded demonstration episodes for the few_shot strategy: the file format, seeds, loading.

Format (``moria-demo/1``, see docs/demos.md): one JSON-lines file per (env, task) at
``<demos_dir>/<env>/<task with "/" replaced by "__">.jsonl``; each line is one episode::

    {"format": "moria-demo/1", "env": "babyai", "task": "...", "seed": 123, "source": "babyai-bot",
     "instruction": "...", "progression": 1.0,
     "steps": [{"observation": "...", "action": "go forward", "reward": 0.0}, ...],
     "recorded_at": "2025-01-01T00:00:00+00:00", "versions": {...}, "env_kwargs": {...}}

Files are only ever rewritten whole (temp file + ``os.replace``) under a ``file_lock``, so a
reader never sees a half-written line and appending keeps the file valid.

Seeds: demonstration seeds come from their own namespace (``demo_seed``), so they never repeat
an evaluation seed in practice; at load time any demo that would replay an evaluation game of
the run is excluded anyway (the same seed, or for envs that pick one of n fixed games by
``seed mod n``, such as TextWorld, the same game).
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from moria.cache import cache_path, file_lock
from moria.families import oracle_sources, seed_cycles
from moria.files import atomic_write_text
from moria.policy.v1 import policy_service_pb2 as pol_pb
from moria.records import StepRecord
from orchestrator.plan.seeds import derive_seed
from orchestrator.plan.spec import RunSpec

#: The ``format`` tag of every demo line.
DEMO_FORMAT = "moria-demo/1"

#: Envs with an oracle player that ``moria record-demos`` can record, and the source name each
#: demo records (the player that produced it): the families' manifests say.
ORACLE_SOURCES: dict[str, str] = oracle_sources()

#: Prefix that puts demo seeds in their own namespace of ``seeds.derive_seed`` (no evaluation
#: env is named like this, so no evaluation seed is derived from the same text).
DEMO_SEED_NAMESPACE = "demos/"

#: The command that records demos, as error messages show it.
RECORD_COMMAND = "moria record-demos"


class DemoFormatError(ValueError):
    """A demo file line is not a valid ``moria-demo/1`` record (message: file and line)."""


class MissingDemonstrationsError(ValueError):
    """few_shot needs demonstrations that are missing or too few (message: the file and the
    ``moria record-demos`` command that creates them)."""


@dataclass(frozen=True)
class DemoStepRecord:
    """One step of a recorded demo: the observation text, the action taken, the reward got."""

    observation: str
    action: str
    reward: float = 0.0

    @classmethod
    def from_step(cls, step: StepRecord) -> DemoStepRecord:
        """The demo step of one played turn (``orchestrator.core.episode.run_episode``'s step
        record): the observation text the player saw, the action the env applied (the
        player's own answer when the env names none) and the reward."""
        return cls(observation=step.observation, action=step.action or step.raw_completion,
                   reward=float(step.reward))


@dataclass(frozen=True)
class DemoRecord:
    """One recorded demonstration episode (one line of a demo file).

    ``seed``: the episode seed (non-negative, < 2**64). ``source``: the player that produced it
    (``ORACLE_SOURCES``). ``progression``: the env's progression at the end (0..1; recorded
    demos are kept only at 1.0). ``recorded_at``: ISO-8601 UTC time. ``versions``: api, package
    and env versions. ``env_kwargs``: the env options the episode was opened with.
    """

    env: str
    task: str
    seed: int
    source: str
    instruction: str
    progression: float
    steps: tuple[DemoStepRecord, ...]
    recorded_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())
    versions: dict[str, str] = field(default_factory=dict)
    env_kwargs: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The JSON object of this record (one line of the file)."""
        return {
            "format": DEMO_FORMAT, "env": self.env, "task": self.task, "seed": self.seed,
            "source": self.source, "instruction": self.instruction,
            "progression": self.progression,
            "steps": [{"observation": s.observation, "action": s.action, "reward": s.reward}
                      for s in self.steps],
            "recorded_at": self.recorded_at, "versions": dict(self.versions),
            "env_kwargs": dict(self.env_kwargs),
        }

    @classmethod
    def from_json(cls, data: Any) -> DemoRecord:
        """Parse one line's object. Raises ValueError naming the bad or missing key."""
        if not isinstance(data, dict):
            raise ValueError("a demo line must be a JSON object")
        if data.get("format") != DEMO_FORMAT:
            raise ValueError(f"format must be {DEMO_FORMAT!r}, got {data.get('format')!r}")
        for key, kind in (("env", str), ("task", str), ("source", str), ("instruction", str),
                          ("steps", list)):
            if not isinstance(data.get(key), kind):
                raise ValueError(f"key {key!r} must be a {kind.__name__}")
        seed = data.get("seed")
        if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**64:
            raise ValueError(f"key 'seed' must be an integer in [0, 2**64), got {seed!r}")
        steps = []
        for index, raw in enumerate(data["steps"]):
            if (not isinstance(raw, dict) or not isinstance(raw.get("observation"), str)
                    or not isinstance(raw.get("action"), str)):
                raise ValueError(f"steps[{index}] needs string 'observation' and 'action'")
            steps.append(DemoStepRecord(raw["observation"], raw["action"],
                                        float(raw.get("reward", 0.0))))
        return cls(env=data["env"], task=data["task"], seed=seed, source=data["source"],
                   instruction=data["instruction"],
                   progression=float(data.get("progression", 0.0)), steps=tuple(steps),
                   recorded_at=str(data.get("recorded_at", "")),
                   versions={str(k): str(v) for k, v in (data.get("versions") or {}).items()},
                   env_kwargs=dict(data.get("env_kwargs") or {}))

    def to_proto(self) -> pol_pb.Demonstration:
        """The ``Demonstration`` message sent in ``Begin.demonstrations``."""
        return pol_pb.Demonstration(
            task=self.task, seed=self.seed, instruction=self.instruction, source=self.source,
            steps=[pol_pb.DemonstrationStep(observation=s.observation, action=s.action,
                                            reward=s.reward) for s in self.steps])


def demos_dir(spec: RunSpec) -> Path:
    """The demo folder of a run: ``eval.icl_dataset`` (``~`` expanded) or ``<cache>/demos``."""
    if spec.eval.icl_dataset:
        return Path(spec.eval.icl_dataset).expanduser()
    return cache_path("demos")


def demo_file(directory: str | os.PathLike[str], env: str, task: str) -> Path:
    """``<directory>/<env>/<task with "/" replaced by "__">.jsonl``."""
    return Path(directory) / env / (task.replace("/", "__") + ".jsonl")


def read_demos(path: str | os.PathLike[str]) -> list[DemoRecord]:
    """Every record of a demo file, in file order (blank lines are skipped).

    Raises:
        FileNotFoundError: no such file.
        DemoFormatError: a line is not valid JSON or not a ``moria-demo/1`` record (the message
            names the file and the line number).
    """
    records = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                records.append(DemoRecord.from_json(json.loads(line)))
            except ValueError as exc:  # json.JSONDecodeError is a ValueError
                raise DemoFormatError(f"{path}, line {number}: {exc}") from None
    return records


def append_demos(path: str | os.PathLike[str], records: Iterable[DemoRecord]) -> Path:
    """Append ``records`` to a demo file (created with its folders if missing); returns it.

    The whole file is rewritten atomically (temp file + ``os.replace``) while holding a
    ``file_lock`` on the hidden ``.<name>.lock`` beside it, so concurrent writers never lose
    lines and readers see either the old or the new file. Raises DemoFormatError when the
    existing file is invalid, OSError on write failures (the old file is then untouched).
    """
    target = Path(path)
    with file_lock(target.with_name(f".{target.name}.lock")):
        existing = target.read_text(encoding="utf-8") if target.is_file() else ""
        if existing:
            read_demos(target)  # never extend a corrupt file
            if not existing.endswith("\n"):
                existing += "\n"
        lines = "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in records)
        return atomic_write_text(target, existing + lines)


def demo_seed(env: str, task: str, index: int) -> int:
    """The seed of candidate demo ``index`` of (env, task): ``seeds.derive_seed`` with the env
    name prefixed by ``DEMO_SEED_NAMESPACE`` (a text no evaluation seed is derived from).

    For envs that play game ``seed mod n`` (``moria.families.seed_cycles``: TextWorld's 25 games),
    candidate i is moved onto game ``n - 1 - i mod n``, so demos use the games an evaluation
    reaches last (episode i plays game i).
    """
    seed = derive_seed(0, DEMO_SEED_NAMESPACE + env, task, index)
    cycle = seed_cycles().get(env)
    if cycle:
        seed = max(0, seed - seed % cycle - cycle) + (cycle - 1 - index % cycle)
    return seed


def same_game(env: str, a: int, b: int) -> bool:
    """Whether seeds ``a`` and ``b`` play the same game of ``env`` (equal, or equal mod n for
    envs in ``moria.families.seed_cycles``)."""
    if a == b:
        return True
    cycle = seed_cycles().get(env)
    return cycle is not None and cycle > 0 and a % cycle == b % cycle


def reads_demonstrations(spec: RunSpec) -> bool:
    """Whether the run's player reads demonstrations (``agent.type`` few_shot)."""
    return spec.agent.type == "few_shot"


def evaluation_seeds(spec: RunSpec, env: str, task: str) -> set[int]:
    """The seeds of every planned episode of (env, task) in ``spec`` (``spec.episodes()`` with
    ``seeds.derive_seed``): what a demo must not replay."""
    return {derive_seed(spec.eval.seed, e, t, i) for e, t, i in spec.episodes()
            if e == env and t == task}


# Parsed files, read once per process: resolved path -> ((mtime_ns, size), records).
_CACHE: dict[Path, tuple[tuple[int, int], list[DemoRecord]]] = {}


def cached_demos(path: Path) -> list[DemoRecord]:
    """``read_demos(path)``, parsed once per process (re-read only if the file changed).

    Raises FileNotFoundError or DemoFormatError as ``read_demos``.
    """
    key = path.resolve()
    stat = key.stat()
    stamp = (stat.st_mtime_ns, stat.st_size)
    hit = _CACHE.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    records = read_demos(key)
    _CACHE[key] = (stamp, records)
    return records


def clear_cache() -> None:
    """Forget every parsed demo file (tests; after rewriting files in place)."""
    _CACHE.clear()


def record_command(env: str, task: str, episodes: int, directory: Path | None) -> str:
    """The ``moria record-demos`` command line that creates the demos of (env, task)."""
    parts = [RECORD_COMMAND, "--env", env, "--tasks", shlex.quote(task)]
    if episodes > 1:
        parts += ["--episodes", str(episodes)]
    if directory is not None:
        parts += ["--out", shlex.quote(str(directory))]
    return " ".join(parts)


def _select(spec: RunSpec, env: str, task: str, eval_seeds: set[int],
            ) -> tuple[list[DemoRecord], str | None]:
    """(the chosen demos, None) or ([], the problem) for one (env, task)."""
    wanted = spec.eval.icl_episodes
    directory = demos_dir(spec)
    path = demo_file(directory, env, task)
    custom_dir = directory if spec.eval.icl_dataset else None
    if wanted < 1:
        return [], (f"agent.type=few_shot needs eval.icl_episodes >= 1 (got {wanted}); "
                    "use agent.type=naive to play without demonstrations")
    try:
        records = cached_demos(path)
    except FileNotFoundError:
        return [], (f"few_shot needs {wanted} demonstration(s) of {env}/{task} but "
                    f"{path} does not exist; create it with: "
                    + record_command(env, task, wanted, custom_dir))
    except DemoFormatError as exc:
        return [], f"few_shot cannot read its demonstrations: {exc}"
    matching = [r for r in records if r.env == env and r.task == task]
    usable = [r for r in matching
              if not any(same_game(env, r.seed, seed) for seed in eval_seeds)]
    if len(usable) < wanted:
        excluded = len(matching) - len(usable)
        why = (f" ({excluded} excluded because they replay a game of this evaluation)"
               if excluded else "")
        return [], (f"few_shot needs {wanted} demonstration(s) of {env}/{task} but {path} has "
                    f"{len(usable)} usable{why}; record more with: "
                    + record_command(env, task, wanted + excluded, custom_dir))
    return usable[:wanted], None


def load_demonstrations(spec: RunSpec, env: str, task: str, eval_seeds: set[int],
                        ) -> list[pol_pb.Demonstration]:
    """The demonstrations to send in ``Begin.demonstrations`` for one episode of (env, task).

    Returns [] unless ``spec.agent.type == "few_shot"``; otherwise the first
    ``spec.eval.icl_episodes`` records of ``demo_file(demos_dir(spec), env, task)`` in file
    order, leaving out any whose seed replays a game of ``eval_seeds`` (``same_game``). The file
    is parsed once per process.

    Raises:
        MissingDemonstrationsError: the file is missing, unreadable, or holds too few usable
            demos, or ``eval.icl_episodes`` is 0; the message names the file and the
            ``moria record-demos --env <env> --tasks <task>`` command that creates them.
    """
    if not reads_demonstrations(spec):
        return []
    chosen, problem = _select(spec, env, task, eval_seeds)
    if problem is not None:
        raise MissingDemonstrationsError(problem)
    return [r.to_proto() for r in chosen]


def episode_demonstrations(spec: RunSpec, env: str, task: str, seed: int,
                           ) -> list[pol_pb.Demonstration]:
    """``load_demonstrations`` for one episode of (env, task) played with ``seed``: no demo
    replays its game or a game of another planned episode of (env, task). Those seeds (a walk
    over the whole plan) are derived only when the player reads demonstrations, so that other
    runs pay nothing per episode for them. Raises as ``load_demonstrations``."""
    if not reads_demonstrations(spec):
        return []
    return load_demonstrations(spec, env, task, evaluation_seeds(spec, env, task) | {seed})


def check_demonstrations(spec: RunSpec, planned: Iterable[tuple[str, str, int]],
                         ) -> dict[tuple[str, str], list[pol_pb.Demonstration]]:
    """Preflight for few_shot: every planned (env, task, seed) has its demonstrations.

    ``planned``: the run's episodes as (env, task, episode seed). Each (env, task) is checked
    against all of its planned seeds at once. Returns (env, task) -> the demonstrations
    ``load_demonstrations`` gives with those seeds ({} unless ``agent.type`` is few_shot).

    Raises:
        MissingDemonstrationsError: listing every (env, task) whose demos are missing or too
            few, each with the file and the ``moria record-demos`` command to run.
    """
    if not reads_demonstrations(spec):
        return {}
    seeds: dict[tuple[str, str], set[int]] = {}
    for env, task, seed in planned:
        seeds.setdefault((env, task), set()).add(seed)
    found: dict[tuple[str, str], list[pol_pb.Demonstration]] = {}
    problems: list[str] = []
    for (env, task), eval_seeds in seeds.items():
        chosen, problem = _select(spec, env, task, eval_seeds)
        if problem is not None:
            problems.append(problem)
        else:
            found[(env, task)] = [r.to_proto() for r in chosen]
    if problems:
        unique = list(dict.fromkeys(problems))
        raise MissingDemonstrationsError("\n".join(unique))
    return found
