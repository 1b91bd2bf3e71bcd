"""``moria replay``: play recorded episodes again through a real Env server, from their seed and
the actions the env applied, to verify the record (``--verify``) or to draw the frames a run
did not save (``--frames``).

An episode replays when its env is deterministic given the seed (its family's manifest names
no ``replay_refusal``), its trajectory was saved (``eval.save_trajectories``, the default) and
the run's spec is beside it (``<out>/run.json``, written by ``moria eval``): the game is opened
as the run opened it (``orchestrator.core.episode.open_env``: the same task, seed, options and
step cap), then every recorded env step is applied with the applied actions of its seats.

``--verify`` compares, step by step, what each seat saw (the observation text), the reward and
the done flag each seat got and the progression after the step (when the record has it), then
the step count and, for an episode that ended normally, the final progression; the first
difference names its step, seat and field. The policy side is not replayed: completions and
prompts are what the record says.

Results: per episode ``verified``, ``differs``, ``replayed`` (no ``--verify``) or
``not_replayable`` (with the reason); a run directory gets ``replay.json`` with the counts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from itertools import groupby
from pathlib import Path
from typing import Any, Final, Literal

from rich.console import Console
from rich.markup import escape

from moria.clients import EnvClient, close_channels
from moria.common.v1 import types_pb2
from moria.families import families
from moria.files import atomic_write_text
from moria.observations import observation_text
from moria.quoting import quote
from moria.records import SCORED_END_REASONS, EpisodeRecord, StepRecord
from moria.results import read_episode
from orchestrator.core.episode import EpisodePlan, call_server, open_env
from orchestrator.core.episode_config import episode_config
from orchestrator.core.stack import LocalStack
from orchestrator.plan.spec import RunSpec
from orchestrator.store.frames import FrameRecorder, frames_dir
from orchestrator.store.telemetry import dumps

Status = Literal["verified", "differs", "replayed", "not_replayable"]
#: Name of the verification summary written into a run directory.
SUMMARY_FILE: Final = "replay.json"
#: How much of a differing value a report quotes (characters).
QUOTE_CHARS: Final = 200
#: Rewards and progressions equal within this absolute difference (float32 round trips).
TOLERANCE: Final = 1e-6


class ReplayError(ValueError):
    """The input cannot be replayed at all (no episode file, no run spec): the message says
    what was given and what is expected."""


@dataclass(frozen=True)
class Difference:
    """The first place a replay differs from its record: env step, seat, field and the two
    values (quoted, bounded)."""

    step: int
    agent_id: str
    field: str
    recorded: str
    replayed: str

    def describe(self) -> str:
        """One line: ``step 3, agent_0, reward: recorded 0.0, replayed 1.0``."""
        return (f"step {self.step}, {self.agent_id or 'agent'}, {self.field}: "
                f"recorded {self.recorded}, replayed {self.replayed}")


@dataclass
class EpisodeReplay:
    """What replaying one episode file gave."""

    path: str
    status: Status
    reason: str = ""
    difference: Difference | None = None
    steps: int = 0
    frames: int = 0


@dataclass
class ReplaySummary:
    """Counts of a replay over several episodes, and each episode's result."""

    episodes: list[EpisodeReplay] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """{status: episodes}, every status present."""
        out = dict.fromkeys(("verified", "differs", "replayed", "not_replayable"), 0)
        for episode in self.episodes:
            out[episode.status] += 1
        return out

    def as_json(self) -> dict[str, Any]:
        """The ``replay.json`` document."""
        return {"counts": self.counts(), "episodes": [asdict(e) for e in self.episodes]}


def episode_files(target: Path) -> tuple[Path | None, list[Path]]:
    """(the run directory, the episode JSON files) of ``target``: a run directory (every
    ``<env>/<task_dir>/*_run_*.json`` under it) or one episode file (its run directory is three
    levels up). Raises ReplayError for anything else."""
    if target.is_dir():
        files = sorted(target.glob("*/*/*_run_*.json"))
        if not files:
            raise ReplayError(f"{target} holds no episode files (<env>/<task>/<task>_run_NN.json)"
                              "; give a results directory of moria eval or one episode file")
        return target, files
    if target.is_file() and target.suffix == ".json":
        return None, [target]
    raise ReplayError(f"{target} is neither a results directory nor an episode .json file")


def run_spec_of(episode_path: Path) -> RunSpec:
    """The spec of the run that wrote ``episode_path`` (``<out>/run.json``, three levels up).
    Raises ReplayError when it is missing or unreadable."""
    meta = episode_path.resolve().parents[2] / "run.json"
    try:
        return RunSpec.model_validate(json.loads(meta.read_text(encoding="utf-8"))["spec"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReplayError(f"cannot read the run spec {meta} ({type(exc).__name__}): a replay "
                          "opens the game as the run did, from the run.json that moria eval "
                          "writes beside the results") from None


def refusal(record: EpisodeRecord) -> str:
    """Why ``record`` cannot be replayed ("" when it can)."""
    manifest = families().get(record.env)
    if manifest is None:
        return f"env {record.env!r} is not a family this Moria knows"
    if manifest.replay_refusal:
        return manifest.replay_refusal
    if record.num_steps and not record.steps:
        return "its trajectory was not saved (eval.save_trajectories=false)"
    return ""


def env_steps(record: EpisodeRecord) -> Iterator[tuple[int, list[StepRecord]]]:
    """The recorded env steps in order: (step index, the seats' records of that step)."""
    for step, group in groupby(record.steps, key=lambda s: s.step):
        yield step, list(group)


def _quote(value: Any) -> str:
    return quote(value, QUOTE_CHARS)


def _differs(a: float, b: float) -> bool:
    return not math.isclose(a, b, rel_tol=0.0, abs_tol=TOLERANCE)


@dataclass(frozen=True)
class Recorded:
    """One episode file as read: its path, its record and the spec of its run (None when the
    episode is not replayable: ``refusal`` says why)."""

    path: Path
    record: EpisodeRecord
    spec: RunSpec | None


def read_recorded(files: list[Path]) -> list[Recorded]:
    """Read each episode file once, and each run's spec once for its replayable episodes.
    Raises ReplayError naming a file that is no episode or a run without its spec."""
    specs: dict[Path, RunSpec] = {}
    out = []
    for path in files:
        try:
            record = read_episode(path)
        except (OSError, ValueError) as exc:
            summary = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ReplayError(f"{path} is no episode file: {summary}") from None
        spec = None
        if not refusal(record):
            run_dir = path.resolve().parents[2]
            if run_dir not in specs:
                specs[run_dir] = run_spec_of(path)
            spec = specs[run_dir]
        out.append(Recorded(path, record, spec))
    return out


async def replay_episode(recorded: Recorded, env_target: str, *, verify: bool,
                         frames: bool) -> EpisodeReplay:
    """Replay one recorded episode on the env server at ``env_target``.

    With ``verify``, stops at the first difference (``differs``). With ``frames``, writes
    every frame into the episode's frame folder and names it in the episode JSON. Raises
    OSError and the Env server's errors (grpc.aio.AioRpcError).
    """
    path, record, spec = recorded.path, recorded.record, recorded.spec
    reason = refusal(record)
    if reason or spec is None:
        return EpisodeReplay(str(path), "not_replayable", reason=reason)
    plan = EpisodePlan(run_id=record.run_id, env=record.env, task=record.task,
                       episode_index=record.episode_index, seed=record.seed,
                       env_target=env_target, policy_target="")
    recorder = FrameRecorder(frames_dir(path)) if frames else None
    session = EnvClient(env_target).session()
    result = EpisodeReplay(str(path), "verified" if verify else "replayed")
    try:
        # opens the game only: no player begins, so no demonstrations are read
        opened = await open_env(session, plan, episode_config(spec, record.env, record.task,
                                                              record.seed, demonstrations=[]))
        seen = {agent_id: start.observation for agent_id, start in opened.agents.items()}
        progression, num_steps = opened.progression, 0
        if recorder is not None:
            await recorder.start()
            await recorder.add(0, await session.render())
        for step, seats in env_steps(record):
            if verify and (diff := _observation_difference(step, seats, seen)):
                result.status, result.difference = "differs", diff
                break
            actions = {s.agent_id: types_pb2.Action(text=s.action) for s in seats}
            response = await call_server(session.step, actions, server="env")
            if response.error.code != 0:
                result.status = "differs"
                result.difference = Difference(step, "", "step", "applied",
                                               _quote(response.error.message))
                break
            num_steps = int(response.step)
            for agent_id, agent in response.agents.items():
                seen[agent_id] = agent.observation
            progression = (response.episode_end.progression
                           if response.HasField("episode_end") else response.progression)
            if recorder is not None:
                await recorder.add(num_steps, await session.render())
            if verify and (diff := _transition_difference(step, seats, response)):
                result.status, result.difference = "differs", diff
                break
        result.steps = num_steps
        if verify and result.difference is None:
            result.difference = _end_difference(record, num_steps, progression)
            if result.difference is not None:
                result.status = "differs"
    finally:
        await session.close()
    if recorder is not None:
        result.frames = recorder.count
        await asyncio.to_thread(_name_frames, path, recorder)
    return result


def _observation_difference(step: int, seats: list[StepRecord],
                            seen: dict[str, types_pb2.Observation]) -> Difference | None:
    for seat in seats:
        text = observation_text(seen[seat.agent_id]) if seat.agent_id in seen else None
        if text != seat.observation:
            return Difference(step, seat.agent_id, "observation", _quote(seat.observation),
                              _quote(text))
    return None


def _transition_difference(step: int, seats: list[StepRecord], response: Any
                           ) -> Difference | None:
    progression = (response.episode_end.progression if response.HasField("episode_end")
                   else response.progression)
    for seat in seats:
        agent = response.agents.get(seat.agent_id)
        if agent is None:
            return Difference(step, seat.agent_id, "reward", _quote(seat.reward), "no answer")
        if _differs(agent.reward, seat.reward):
            return Difference(step, seat.agent_id, "reward", _quote(seat.reward),
                              _quote(agent.reward))
        done = agent.terminated or agent.truncated
        if done != seat.done:
            return Difference(step, seat.agent_id, "done", _quote(seat.done), _quote(done))
        if seat.progression is not None and _differs(seat.progression,
                                                     min(1.0, max(0.0, progression))):
            return Difference(step, seat.agent_id, "progression", _quote(seat.progression),
                              _quote(progression))
    return None


def _end_difference(record: EpisodeRecord, num_steps: int, progression: float
                    ) -> Difference | None:
    if num_steps != record.num_steps:
        return Difference(num_steps, "", "num_steps", _quote(record.num_steps),
                          _quote(num_steps))
    if record.end_reason in SCORED_END_REASONS and _differs(progression, record.progression):
        return Difference(num_steps, "", "progression", _quote(record.progression),
                          _quote(progression))
    return None


def _name_frames(path: Path, recorder: FrameRecorder) -> None:
    """Name the replayed frames in the episode JSON (every other key kept as it is)."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["frames"], doc["frame_count"] = recorder.folder.name, recorder.count
    atomic_write_text(path, dumps(doc, indent=2) + "\n")


async def replay_files(episodes: list[Recorded], env_endpoint: str, *, verify: bool,
                       frames: bool, log_dir: Path, console: Console) -> ReplaySummary:
    """Replay ``episodes`` in order on ``env_endpoint`` (empty: an env server started for
    them, its log under ``log_dir``), printing one line per episode."""
    summary = ReplaySummary()
    families = sorted({e.record.env for e in episodes if e.spec is not None})
    try:
        if env_endpoint or not families:
            await _replay_all(episodes, env_endpoint, verify, frames, summary, console)
        else:
            async with LocalStack(families, log_dir, with_agent=False) as stack:
                await _replay_all(episodes, stack.env_target, verify, frames, summary,
                                  console)
    finally:
        await close_channels()
    return summary


async def _replay_all(episodes: list[Recorded], target: str, verify: bool, frames: bool,
                      summary: ReplaySummary, console: Console) -> None:
    for recorded in episodes:
        result = await replay_episode(recorded, target, verify=verify, frames=frames)
        summary.episodes.append(result)
        line = f"{result.status}: {escape(str(recorded.path))}"
        if result.difference is not None:
            line += f" (first difference: {escape(result.difference.describe())})"
        elif result.reason:
            line += f" ({escape(result.reason)})"
        console.print(line, highlight=False)


def add_arguments(sub: Any) -> None:
    """Register ``moria replay`` on the CLI's subparsers."""
    rp = sub.add_parser("replay", help="replay recorded episodes through an Env server: verify "
                        "them, or draw their frames")
    rp.add_argument("target", type=Path, nargs="+", metavar="EPISODE_FILE|RUN_DIR",
                    help="episode .json files or results directories of moria eval")
    rp.add_argument("--verify", action="store_true",
                    help="check every observation, reward, done flag and the final progression "
                         "against the record; exit 1 at any difference")
    rp.add_argument("--frames", action="store_true",
                    help="write every step's frame beside the episode file (as "
                         "eval.save_images does) and name them in its JSON")
    rp.add_argument("--env-endpoint", default="",
                    help="replay on this Env server (default: start one for the episodes' "
                         "families)")
    rp.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """``moria replay``: 0 when every replayable episode verified (or replayed), 1 when any
    differs, 2 on bad input or when no episode given could be replayed."""
    console = Console(highlight=False, soft_wrap=True)
    try:
        targets = [episode_files(t) for t in args.target]
        files = [f for _, fs in targets for f in fs]
        episodes = read_recorded(files)
        log_dir = (targets[0][0] or files[0].resolve().parents[2]) / "logs"
        summary = asyncio.run(replay_files(episodes, args.env_endpoint, verify=args.verify,
                                           frames=args.frames, log_dir=log_dir,
                                           console=console))
    except (ReplayError, OSError) as exc:
        console.print(f"error: {escape(str(exc))}")
        return 2
    for run_dir, run_files in targets:
        if run_dir is not None:
            own = ReplaySummary([e for e in summary.episodes if Path(e.path) in run_files])
            atomic_write_text(run_dir / SUMMARY_FILE, dumps(own.as_json(), indent=2) + "\n")
    counts = summary.counts()
    console.print(", ".join(f"{n} {status.replace('_', ' ')}" for status, n in counts.items()))
    if counts["differs"]:
        return 1
    return 0 if counts["verified"] + counts["replayed"] else 2
