"""``moria record-demos``: record few_shot demonstrations with Moria's own oracle players.

Each demonstration is one ``orchestrator.core.episode.run_episode`` with ``agent.type=oracle``,
as ``moria eval agent.type=oracle`` plays it: the env session is opened with the oracle option
(``OpenRequest.oracle``) and the policy server's oracle player plays the ``expert_action`` hint
of every observation. A ``DemoSink`` builds the demo from what ``run_episode`` reports (the
instruction at the start, one step record per turn). An episode is kept only when it ends with
progression 1.0; kept episodes are appended to ``<out>/<env>/<task>.jsonl`` (format:
``orchestrator.store.demos``, docs/demos.md). The servers are the local stack
(``orchestrator.core.stack.LocalStack``) unless ``endpoints.env.<env>`` / ``endpoints.policy``
are set with ``--set``.

Seeds come from the demo namespace (``demos.demo_seed``), never from a run seed. ``--episodes N``
is the number of demos wanted per task; demos already in the file count, so rerunning the same
command only fills what is missing. A candidate seed that failed is dropped and the next one is
tried, up to ``--max-attempts`` candidates per task.

Exit codes: 0 every task has its demos; 1 some task has fewer (the oracle failed too often, the
task has no oracle, or a server failed); 2 bad usage.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from moria import aio
from orchestrator.apps.say import error_line, literal, stderr_console, warning

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from moria.env.v1 import env_service_pb2 as env_pb
    from moria.records import StepRecord
    from orchestrator.core.episode import EpisodePlan
    from orchestrator.plan.spec import RunSpec
    from orchestrator.store.demos import DemoRecord, DemoStepRecord

#: Default demos wanted per task.
DEFAULT_EPISODES = 3
#: Candidate seeds tried per task, as a multiple of the demos still wanted (``--max-attempts``
#: overrides it).
ATTEMPTS_PER_DEMO = 3
#: Safety stop for one oracle episode when neither the env nor ``--max-steps`` ends it.
STEP_GUARD = 10_000
#: How the oracle player's reasoning starts when the observation held no hint and it played the
#: default action instead (``agent_server/strategies/oracle.py``; a unit test checks they agree).
NO_HINT_REASONING = "oracle hint 'expert_action' was absent"


class RecordError(RuntimeError):
    """Recording cannot go on (a server failed); the message says why."""


class DroppedEpisode(Exception):
    """The oracle episode cannot become a demo (the message says why). Raised from a
    ``run_episode`` callback, it ends the episode there."""


@dataclass
class DemoSink:
    """Builds one oracle episode's demonstration from what ``run_episode`` reports: pass
    ``on_start`` and ``on_step`` to it. ``on_start`` keeps the instruction (single-player games
    only); ``on_step`` keeps one ``DemoStepRecord`` per turn and ends the episode
    (``DroppedEpisode``) at the first turn where the oracle had no hint or played an invalid
    action, or after ``STEP_GUARD`` steps without an end."""

    instruction: str = ""
    steps: list[DemoStepRecord] = field(default_factory=list)

    async def on_start(self, plan: EpisodePlan, opened: env_pb.OpenResponse) -> None:
        """Keep the instruction of the game's one agent. Raises RecordError for several."""
        if len(opened.agents) != 1:
            raise RecordError(f"{plan.env}:{plan.task} has {len(opened.agents)} players; "
                              "record-demos records single-player games only")
        self.instruction = next(iter(opened.agents.values())).instruction

    async def on_step(self, plan: EpisodePlan, step: StepRecord) -> None:
        """Keep one turn. Raises DroppedEpisode when it cannot be part of a demo."""
        from orchestrator.store.demos import DemoStepRecord

        index = len(self.steps)
        if step.reasoning.startswith(NO_HINT_REASONING):
            raise DroppedEpisode(f"the oracle gave no action at step {index}")
        if not step.valid:
            raise DroppedEpisode(f"the oracle's action {step.raw_completion!r} was invalid at "
                                 f"step {index}")
        self.steps.append(DemoStepRecord.from_step(step))
        if len(self.steps) >= STEP_GUARD and not step.done:
            raise DroppedEpisode(f"no end after {STEP_GUARD} steps")


@dataclass
class TaskOutcome:
    """What recording did for one (env, task).

    ``existing``: demos already in the file; ``kept``: demos added now; ``dropped``: one line per
    candidate episode that was not kept (seed and reason); ``problem``: why the task stopped
    early (no oracle, unknown task, unreadable file), empty otherwise.
    """

    env: str
    task: str
    path: Path
    wanted: int
    existing: int = 0
    kept: int = 0
    dropped: list[str] = field(default_factory=list)
    problem: str = ""

    @property
    def complete(self) -> bool:
        """Whether the file now holds the demos wanted."""
        return self.existing + self.kept >= self.wanted


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``record-demos`` flags to ``parser``."""
    parser.add_argument("--env", action="append", required=True, metavar="NAME",
                        help="env to record (repeatable): babyai, minihack, textworld, babaisai")
    parser.add_argument("--tasks", nargs="+", action="extend", metavar="TASK",
                        help="tasks to record (default: the env's evaluation tasks); with "
                             "several --env, write ENV:TASK or give tasks of the default lists")
    parser.add_argument("--episodes", type=int, default=DEFAULT_EPISODES, metavar="N",
                        help=f"demos wanted per task, those already recorded included "
                             f"(default {DEFAULT_EPISODES})")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="demo folder (default: eval.icl_dataset, else <cache>/demos)")
    parser.add_argument("--max-steps", type=int, metavar="N",
                        help="step cap per episode (default: the env's own)")
    parser.add_argument("--max-attempts", type=int, metavar="N",
                        help=f"candidate seeds tried per task (default {ATTEMPTS_PER_DEMO} x "
                             "the demos still wanted)")
    parser.add_argument("--workers", type=int, default=4, metavar="N",
                        help="episodes recorded at once (default 4)")
    parser.add_argument("--config", type=Path, help="YAML or JSON run spec (env options)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="run-spec override, as for eval (e.g. envs.babyai_kwargs.num_dists=2"
                             " or endpoints.env.babyai=[host:port]); repeatable")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run_command(args: argparse.Namespace) -> int:
    """Run ``moria record-demos`` from parsed ``args``; returns the exit code."""
    console = stderr_console()  # errors and hints are never wrapped
    try:
        spec, plan, out = _resolve(args)
    except ValueError as exc:  # SpecError is a ValueError
        console.print(error_line(exc))
        return 2
    try:
        outcomes = aio.run(record_demos(
            spec, plan, episodes=args.episodes, out=out, max_attempts=args.max_attempts,
            workers=args.workers, console=console, show_progress=not args.no_progress))
    except RecordError as exc:
        console.print(error_line(f"{exc}\ndemos kept so far are saved; rerun the same "
                                 "command to fill in the rest"))
        return 1
    except KeyboardInterrupt:
        console.print("interrupted; demos kept so far are saved")
        return 130
    _print_outcomes(outcomes, out, console)
    return 0 if all(o.complete for o in outcomes) else 1


def _resolve(args: argparse.Namespace) -> tuple[RunSpec, list[tuple[str, str]], Path]:
    """(the spec, the (env, task) plan, the demo folder). Raises ValueError on bad usage."""
    from orchestrator.plan.spec import DEFAULT_NUM_EPISODES, load_spec
    from orchestrator.store.demos import ORACLE_SOURCES, demos_dir

    envs = list(dict.fromkeys(args.env))
    for env in envs:
        if env not in DEFAULT_NUM_EPISODES:
            raise ValueError(f"unknown env {env!r}; allowed: "
                             + ", ".join(sorted(DEFAULT_NUM_EPISODES)))
        if env not in ORACLE_SOURCES:
            raise ValueError(f"env {env!r} has no oracle player to record demos with; "
                             "envs with one: " + ", ".join(ORACLE_SOURCES))
    if args.episodes < 1:
        raise ValueError(f"--episodes must be >= 1, got {args.episodes}")
    if args.workers < 1:
        raise ValueError(f"--workers must be >= 1, got {args.workers}")
    if args.max_attempts is not None and args.max_attempts < 1:
        raise ValueError(f"--max-attempts must be >= 1, got {args.max_attempts}")
    overrides = ["envs.names=" + "-".join(envs), *args.overrides, "agent.type=oracle"]
    if args.max_steps is not None:
        overrides.append(f"eval.max_steps_per_episode={args.max_steps}")
    spec = load_spec(args.config, overrides)
    plan = _plan(spec, envs, args.tasks or [])
    out = args.out.expanduser() if args.out is not None else demos_dir(spec)
    return spec, plan, out


def _plan(spec: RunSpec, envs: list[str], tasks: list[str]) -> list[tuple[str, str]]:
    """The (env, task) pairs to record. Raises ValueError for a task no env claims."""
    if not tasks:
        return [(env, task) for env in envs for task in spec.tasks.for_env(env)]
    plan: list[tuple[str, str]] = []
    for task in tasks:
        prefix, _, rest = task.partition(":")
        if rest and prefix in envs:
            plan.append((prefix, rest))
            continue
        if len(envs) == 1:
            plan.append((envs[0], task))  # the env server checks the name
            continue
        owners = [env for env in envs if task in spec.tasks.for_env(env)]
        if len(owners) != 1:
            raise ValueError(f"task {task!r} is not in the task list of exactly one of "
                             f"{', '.join(envs)}; write it as ENV:TASK")
        plan.append((owners[0], task))
    return list(dict.fromkeys(plan))


async def record_demos(spec: RunSpec, plan: list[tuple[str, str]], *, episodes: int, out: Path,
                       max_attempts: int | None = None, workers: int = 4,
                       console: Console | None = None, show_progress: bool = True,
                       ) -> list[TaskOutcome]:
    """Record up to ``episodes`` demos for every (env, task) of ``plan`` into ``out``.

    Tasks are recorded concurrently (``workers`` episodes at once); within a task, candidate
    seeds are tried in order, so the demos kept are deterministic. Returns one outcome per
    (env, task), in ``plan`` order.

    Raises:
        RecordError: an env server could not be started or was lost.
    """
    from rich.console import Console

    from moria.clients import EnvClient, close_channels
    from orchestrator.core.stack import LocalStack, StackError

    console = console or Console(stderr=True)
    envs = list(dict.fromkeys(env for env, _ in plan))
    try:
        async with contextlib.AsyncExitStack() as stack:
            if spec.endpoints.configured:
                spec.endpoints.configure_clients()
            targets = {env: spec.endpoints.env[env][0] for env in envs
                       if spec.endpoints.env.get(env)}
            policy = spec.endpoints.policy[0] if spec.endpoints.policy else ""
            local = [env for env in envs if env not in targets]
            if local or not policy:
                # LocalStack always starts an env server: with every env remote it hosts one
                # unused family beside the policy server
                started = await stack.enter_async_context(LocalStack(
                    local or envs[:1], out / "logs", env_capacity=max(8, 2 * workers),
                    with_agent=not policy))
                targets.update({env: started.env_target for env in local})
                policy = policy or started.policy_target
            versions = {env: await _versions(EnvClient(targets[env])) for env in envs}
            return await _record_all(spec, plan, targets, policy, versions, episodes=episodes,
                                     out=out, max_attempts=max_attempts, workers=workers,
                                     console=console, show_progress=show_progress)
    except StackError as exc:
        raise RecordError(f"a local server failed: {exc}") from None
    finally:
        await close_channels()


async def _versions(client: Any) -> dict[str, str]:
    """The ``versions`` of the env server's demos: api, moria, then its components by name
    (a protobuf map iterates in no fixed order, so they are sorted: the same server gives the
    same bytes)."""
    import moria

    try:
        info = await client.get_info()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the server is fatal here
        raise RecordError(f"env server {client.target} did not answer: {exc}") from None
    versions = {"api": moria.API_VERSION, "moria": moria.__version__}
    versions.update({f"env.{k}": v for k, v in sorted(info.version.components.items())})
    return versions


async def _record_all(spec: RunSpec, plan: list[tuple[str, str]], targets: dict[str, str],
                      policy_target: str, versions: dict[str, dict[str, str]], *,
                      episodes: int, out: Path,
                      max_attempts: int | None, workers: int, console: Console,
                      show_progress: bool) -> list[TaskOutcome]:
    from orchestrator.report.progress import progress_bar
    from orchestrator.store.demos import DemoFormatError, demo_file, read_demos

    outcomes = []
    for env, task in plan:
        path = demo_file(out, env, task)
        outcome = TaskOutcome(env=env, task=task, path=path, wanted=episodes)
        try:
            existing = read_demos(path) if path.is_file() else []
        except DemoFormatError as exc:
            outcome.problem = f"cannot extend an invalid file: {exc}"
            existing = []
        outcome.existing = sum(1 for r in existing if r.env == env and r.task == task)
        outcomes.append((outcome, {r.seed for r in existing}))
    needed = sum(max(0, o.wanted - o.existing) for o, _ in outcomes if not o.problem)
    slots = asyncio.Semaphore(workers)
    with progress_bar(console, show_progress, eta=False) as progress:
        bar = progress.add_task("demos", total=needed)
        tasks = [asyncio.create_task(_record_task(
            spec, outcome, seeds, targets[outcome.env], policy_target, versions[outcome.env],
            max_attempts, slots, progress, bar)) for outcome, seeds in outcomes]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for running in tasks:
                running.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
    return [o for o, _ in outcomes]


async def _record_task(spec: RunSpec, outcome: TaskOutcome, known: set[int], env_target: str,
                       policy_target: str, versions: dict[str, str], max_attempts: int | None,
                       slots: asyncio.Semaphore, progress: Progress, bar: TaskID) -> None:
    from orchestrator.core.episode import EpisodeSetupError
    from orchestrator.store.demos import append_demos, demo_seed

    if outcome.problem:
        return
    missing = outcome.wanted - outcome.existing
    budget = max_attempts if max_attempts is not None else ATTEMPTS_PER_DEMO * max(0, missing)
    attempts, index = 0, 0
    while outcome.kept < missing and attempts < budget:
        seed = demo_seed(outcome.env, outcome.task, index)
        index += 1
        if seed in known:
            continue
        attempts += 1
        try:
            async with slots:
                record, reason = await play_oracle_episode(
                    env_target, policy_target, spec, outcome.env, outcome.task, seed,
                    versions)
        except EpisodeSetupError as exc:
            outcome.problem = str(exc)
            break
        if record is None:
            outcome.dropped.append(f"seed {seed}: {reason}")
        else:
            await asyncio.to_thread(append_demos, outcome.path, [record])
            known.add(seed)
            outcome.kept += 1
            progress.advance(bar)
        short = outcome.task.rsplit("/", 1)[-1]
        progress.update(bar, description=f"{outcome.env}/{short}: {outcome.kept} kept, "
                                         f"{len(outcome.dropped)} dropped")
    if outcome.kept < missing:
        progress.advance(bar, missing - outcome.kept)  # the bar counts settled slots


async def play_oracle_episode(env_target: str, policy_target: str, spec: RunSpec, env: str,
                              task: str, seed: int, versions: dict[str, str] | None = None,
                              ) -> tuple[DemoRecord | None, str]:
    """Play one episode of (env, task, seed) with ``run_episode``: the env server at
    ``env_target``, the oracle player (``spec``'s ``agent.type=oracle``) on the policy server at
    ``policy_target``; a ``DemoSink`` builds the demo from what ``run_episode`` reports.

    Returns ``(record, "")`` when the episode ended with progression 1.0, else ``(None,
    reason)``: the episode ended below 1.0 or in an error, the oracle gave no hint, or its
    action was invalid.

    Raises:
        EpisodeSetupError: the env rejects the task or the oracle option (the message is the
            server's: unknown task, no expert for the task), or the player its seat.
        RecordError: a server failed or was lost, or the game has several players.
    """
    from orchestrator.core.episode import EpisodePlan, InfrastructureFault, run_episode
    from orchestrator.core.episode_config import episode_config
    from orchestrator.store.demos import ORACLE_SOURCES, DemoRecord

    plan = EpisodePlan(run_id="record-demos", env=env, task=task, episode_index=0, seed=seed,
                       env_target=env_target, policy_target=policy_target,
                       versions=dict(versions or {}))
    sink = DemoSink()
    try:
        episode = await run_episode(plan, episode_config(spec, env, task, seed),
                                    on_start=sink.on_start, on_step=sink.on_step)
    except DroppedEpisode as exc:
        return None, str(exc)
    except InfrastructureFault as exc:
        server = f"the {exc.server} server" if exc.server else "a server"
        raise RecordError(f"{server} failed during an episode of {env}:{task} (seed {seed}): "
                          f"{exc}") from None
    if not episode.scored:
        return None, (f"the episode ended with {episode.end_reason} after {len(sink.steps)} "
                      f"steps: {episode.error}")
    if episode.progression < 1.0:
        return None, (f"the episode ended after {len(sink.steps)} steps with progression "
                      f"{episode.progression:.2f}")
    return DemoRecord(
        env=env, task=task, seed=seed, source=ORACLE_SOURCES.get(env, "oracle"),
        instruction=sink.instruction, progression=episode.progression, steps=tuple(sink.steps),
        recorded_at=datetime.now(UTC).isoformat(), versions=dict(plan.versions),
        env_kwargs=spec.envs.kwargs_for(env)), ""


def _print_outcomes(outcomes: list[TaskOutcome], out: Path, console: Console) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(f"demonstrations in {out}", style="table.title"))
    for column in ("env", "task", "demos", "added", "dropped"):
        table.add_column(column)
    for o in outcomes:
        total = o.existing + o.kept
        style = "" if o.complete else "yellow"
        table.add_row(o.env, o.task, f"{total}/{o.wanted}", str(o.kept), str(len(o.dropped)),
                      style=style)
    console.print(table)
    for o in outcomes:
        if o.path.is_file():
            console.print(literal(f"{o.env}/{o.task}: {o.path}"), soft_wrap=True)
    dropped = sum(len(o.dropped) for o in outcomes)
    if dropped:
        console.print(f"dropped {dropped} episode(s) the oracle did not finish with "
                      "progression 1.0:", highlight=False)
        for o in outcomes:
            for line in o.dropped:
                console.print(literal(f"  {o.env}/{o.task}: {line}"))
    for o in outcomes:
        if o.problem:
            console.print(warning(f"{o.env}/{o.task}: not recorded: {o.problem}"))
        elif not o.complete:
            console.print(warning(f"{o.env}/{o.task}: only {o.existing + o.kept} of "
                                  f"{o.wanted} demos after the attempts allowed; rerun with a "
                                  "larger --max-attempts"))
    console.print(literal(f"demos written under {out}"))
