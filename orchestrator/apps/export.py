"""``moria export --format inspect RUN_DIR OUT_DIR``: a run as Inspect AI eval logs, written
with ``inspect_ai``'s own log API (``inspect_ai.log.write_eval_log``), so ``inspect view`` and
``inspect_ai.analysis.samples_df`` read Moria's runs.

One log per env (``<OUT_DIR>/<run_id>_<env>.eval``): the task is ``moria/<env>``, the model the
run's models (``", "``-joined; a run of non-model players names its strategy), and every
episode is one sample:

- ``id`` ``<task>#<episode index>``, epoch 1; ``input``: the episode's first observation;
  ``target``: the goal where the env states one apart from its instruction (BabyAI's
  mission), else "";
- ``messages``: the transcript, per recorded turn: what the model read (the observation text,
  and the feedback on its previous answer when it was shown one; the frame as an image when the
  run saved frames), then what it answered (the raw completion; a seat of a multi-agent game is
  named in front);
- ``scores["progression"]``: the episode's progression in [0, 1], for a scored episode; a failed
  one (``agent_error``, ``env_error``, ``cancelled``) carries its error instead, never a score;
- ``metadata``: env, task, seed, end reason, steps, invalid actions, episode return, protocol.

The log's results hold the mean progression and its standard error (BALROG's: population
standard deviation over sqrt(n)) over the scored episodes. Needs the ``inspect`` extra
(``pip install 'moria[inspect]'``; ``make install`` has it).
"""

from __future__ import annotations

import argparse
import base64
import math
import statistics
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from rich.console import Console
from rich.markup import escape

from moria.records import EpisodeRecord
from moria.results import ResultsError, Run, load_run
from orchestrator.store.episodes import GOAL_STAT, episode_paths
from orchestrator.store.frames import frame_name, list_frames

#: The formats ``moria export`` writes.
FORMATS: Final = ("inspect",)
#: The score's name in every sample and in the results.
SCORE: Final = "progression"


def _frame_uri(folder: Path | None, step: int) -> str | None:
    if folder is None:
        return None
    path = folder / frame_name(step)
    if not path.is_file() or path.is_symlink():
        return None
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _messages(record: EpisodeRecord, frames: Path | None) -> list[Any]:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageUser, ContentImage, ContentText

    seats = len({s.agent_id for s in record.steps}) > 1
    messages: list[Any] = []
    feedback: dict[str, str] = {}
    for step in record.steps:
        text = step.observation
        if feedback.get(step.agent_id):
            text = f"{feedback[step.agent_id]}\n\n{text}"
        if seats:
            text = f"[{step.agent_id}] {text}"
        image = _frame_uri(frames, step.step)
        content: Any = ([ContentText(text=text), ContentImage(image=image)] if image else text)
        messages.append(ChatMessageUser(content=content))
        answer = step.raw_completion or step.action
        messages.append(ChatMessageAssistant(
            content=f"[{step.agent_id}] {answer}" if seats else answer,
            model=step.model or None))
        feedback[step.agent_id] = step.feedback
    return messages


def episode_sample(run: Run, record: EpisodeRecord) -> Any:
    """The Inspect sample of one episode (module docstring)."""
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import Score

    json_path, _ = episode_paths(run.path, record.env, record.task, record.episode_index)
    folder = json_path.parent / record.frames if record.frames else None
    if folder is not None and not list_frames(folder):
        folder = None
    messages = _messages(record, folder)
    last = next((m for m in reversed(messages) if m.role == "assistant"), None)
    metadata = {"env": record.env, "task": record.task, "seed": str(record.seed),
                "episode_index": record.episode_index, "end_reason": record.end_reason,
                "num_steps": record.num_steps,
                "invalid_actions": sum(not s.valid for s in record.steps),
                "episode_return": record.episode_return, "protocol": record.protocol_name}
    return EvalSample(
        id=f"{record.task}#{record.episode_index}", epoch=1,
        input=record.steps[0].observation if record.steps else "",
        target=str(record.stats.get(GOAL_STAT) or ""), messages=messages,
        output=ModelOutput.from_content(model=last.model or "", content=last.text)
        if last is not None else ModelOutput(),
        scores={SCORE: Score(value=record.progression, answer=None,
                             explanation=f"{record.end_reason} after {record.num_steps} steps")}
        if record.scored else None,
        metadata=metadata, total_time=record.wall_time_s,
        error=None if record.scored else _error(record))


def _error(record: EpisodeRecord) -> Any:
    from inspect_ai.log import EvalError

    message = f"{record.end_reason}: {record.error}" if record.error else record.end_reason
    return EvalError(message=message, traceback="", traceback_ansi="")


def env_log(run: Run, env: str) -> Any:
    """The Inspect eval log of ``run``'s episodes of ``env``."""
    from inspect_ai.log import (
        EvalConfig,
        EvalDataset,
        EvalLog,
        EvalMetric,
        EvalResults,
        EvalScore,
        EvalSpec,
    )

    episodes = [e for e in run.episodes if e.env == env]
    scored = [e.progression for e in episodes if e.scored]
    metrics = {}
    if scored:
        mean = statistics.fmean(scored)
        metrics = {"mean": EvalMetric(name="mean", value=mean),
                   "stderr": EvalMetric(name="stderr", value=statistics.pstdev(scored, mu=mean)
                                        / math.sqrt(len(scored)))}
    created = min((e.started_at for e in episodes if e.started_at),
                  default=datetime.now(UTC).isoformat())
    return EvalLog(
        status="success",
        eval=EvalSpec(created=created, task=f"moria/{env}", task_id=f"{run.run_id}/{env}",
                      run_id=run.run_id, eval_id=f"{run.run_id}-{env}",
                      dataset=EvalDataset(name=env, samples=len(episodes)),
                      model=", ".join(run.models) or "none", config=EvalConfig(),
                      metadata={"moria_run": str(run.path), "protocol": run.protocol,
                                "spec": run.spec}),
        results=EvalResults(total_samples=len(episodes), completed_samples=len(scored),
                            scores=[EvalScore(name=SCORE, scorer=SCORE, metrics=metrics)]),
        samples=[episode_sample(run, e) for e in episodes])


def export_inspect(run: Run, out: Path) -> list[Path]:
    """Write one Inspect log per env of ``run`` into ``out``; returns their paths."""
    from inspect_ai.log import write_eval_log

    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for env in sorted({e.env for e in run.episodes}):
        path = out / f"{run.run_id}_{env}.eval"
        write_eval_log(env_log(run, env), str(path), format="eval")
        paths.append(path)
    return paths


def add_arguments(sub: Any) -> None:
    """Register ``moria export`` on the CLI's subparsers."""
    ex = sub.add_parser("export", help="write a run in another tool's format (inspect: "
                        "Inspect AI eval logs, for inspect view and inspect_ai.analysis)")
    ex.add_argument("--format", choices=FORMATS, required=True, help="the format to write")
    ex.add_argument("run", type=Path, metavar="RUN_DIR", help="a results directory")
    ex.add_argument("out", type=Path, metavar="OUT_DIR", help="where the files go")
    ex.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    """``moria export``: 0 when written, 2 on bad input or without the inspect extra."""
    console = Console(highlight=False, soft_wrap=True)
    try:
        run = load_run(args.run)
    except ResultsError as exc:
        console.print(f"error: {escape(str(exc))}")
        return 2
    for warning in run.warnings:
        console.print(f"warning: {escape(warning)}", style="yellow")
    try:
        paths = export_inspect(run, args.out)
    except ImportError as exc:
        console.print(f"error: moria export --format inspect needs inspect-ai ({exc.name} is "
                      "missing): pip install 'moria[inspect]'")
        return 2
    for path in paths:
        console.print(f"wrote {escape(str(path))}")
    console.print(f"inspect view --log-dir {escape(str(args.out))}")
    return 0
