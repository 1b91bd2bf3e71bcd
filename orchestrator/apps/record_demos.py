"""``moria record-demos``: record few_shot demonstrations with Moria's own oracle players.

For each (env, task) it opens env sessions with the oracle option (``OpenRequest.oracle``) and
plays the ``expert_action`` hint of every observation, exactly what the ``oracle`` agent plays,
but without a policy server. An episode is kept only when it ends with progression 1.0; kept
episodes are appended to ``<out>/<env>/<task>.jsonl`` (format: ``orchestrator.store.demos``,
docs/demos.md). The env servers are the local stack (``orchestrator.core.stack.LocalStack``, env
server only) unless ``endpoints.env.<env>`` is set with ``--set``.

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

from moria.observations import observation_text

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, TaskID

    from moria.env.v1 import env_service_pb2 as env_pb
    from orchestrator.plan.spec import RunSpec
    from orchestrator.store.demos import DemoRecord

#: Default demos wanted per task.
DEFAULT_EPISODES = 3
#: Candidate seeds tried per task, as a multiple of the demos still wanted (``--max-attempts``
#: overrides it).
ATTEMPTS_PER_DEMO = 3
#: Safety stop for one oracle episode when neither the env nor ``--max-steps`` ends it.
STEP_GUARD = 10_000


class RecordError(RuntimeError):
    """Recording cannot go on (a server failed); the message says why."""


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
    from rich.console import Console

    console = Console(stderr=True)
    try:
        spec, plan, out = _resolve(args)
    except ValueError as exc:  # SpecError is a ValueError
        console.print(f"[red]error:[/red] {exc}", highlight=False)
        return 2
    try:
        outcomes = asyncio.run(record_demos(
            spec, plan, episodes=args.episodes, out=out, max_attempts=args.max_attempts,
            workers=args.workers, console=console, show_progress=not args.no_progress))
    except RecordError as exc:
        console.print(f"[red]error:[/red] {exc}\ndemos kept so far are saved; rerun the same "
                      "command to fill in the rest", highlight=False)
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
            targets: dict[str, str] = {}
            if spec.endpoints.configured:
                spec.endpoints.configure_clients()
            local = [env for env in envs if not spec.endpoints.env.get(env)]
            for env in envs:
                if spec.endpoints.env.get(env):
                    targets[env] = spec.endpoints.env[env][0]
            if local:
                started = await stack.enter_async_context(LocalStack(
                    local, out / "logs", env_capacity=max(8, 2 * workers), with_agent=False))
                targets.update({env: started.env_target for env in local})
            versions = {env: await _versions(EnvClient(targets[env])) for env in envs}
            return await _record_all(spec, plan, targets, versions, episodes=episodes,
                                     out=out, max_attempts=max_attempts, workers=workers,
                                     console=console, show_progress=show_progress)
    except StackError as exc:
        raise RecordError(f"a local env server failed: {exc}") from None
    finally:
        await close_channels()


async def _versions(client: Any) -> dict[str, str]:
    import moria

    try:
        info = await client.get_info()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the server is fatal here
        raise RecordError(f"env server {client.target} did not answer: {exc}") from None
    versions = {"api": moria.API_VERSION, "moria": moria.__version__}
    versions.update({f"env.{k}": v for k, v in info.version.components.items()})
    return versions


async def _record_all(spec: RunSpec, plan: list[tuple[str, str]], targets: dict[str, str],
                      versions: dict[str, dict[str, str]], *, episodes: int, out: Path,
                      max_attempts: int | None, workers: int, console: Console,
                      show_progress: bool) -> list[TaskOutcome]:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

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
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, disable=not show_progress,
                  transient=False) as progress:
        bar = progress.add_task("demos", total=needed)
        tasks = [asyncio.create_task(_record_task(
            spec, outcome, seeds, targets[outcome.env], versions[outcome.env],
            max_attempts, slots, progress, bar)) for outcome, seeds in outcomes]
        try:
            await asyncio.gather(*tasks)
        except BaseException:
            for running in tasks:
                running.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
    return [o for o, _ in outcomes]


async def _record_task(spec: RunSpec, outcome: TaskOutcome, known: set[int], target: str,
                       versions: dict[str, str], max_attempts: int | None,
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
                    target, spec, outcome.env, outcome.task, seed, versions)
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


async def play_oracle_episode(target: str, spec: RunSpec, env: str, task: str, seed: int,
                              versions: dict[str, str] | None = None,
                              ) -> tuple[DemoRecord | None, str]:
    """Play one episode of (env, task, seed) on the env server at ``target`` with the oracle's
    hints (``info["expert_action"]``: an action name, or an index into the action names).

    Returns ``(record, "")`` when the episode ended with progression 1.0, else ``(None,
    reason)``: the episode ended below 1.0, the oracle gave no hint, or its action was invalid.

    Raises:
        EpisodeSetupError: the env rejects the task or the oracle option (the message is the
            server's: unknown task, no expert for the task).
        RecordError: the server failed or was lost.
    """
    from moria.clients import EnvClient
    from moria.codecs import dict_from_struct
    from moria.common.v1 import types_pb2
    from orchestrator.core.episode import EpisodePlan, InfrastructureFault, open_env
    from orchestrator.store.demos import ORACLE_SOURCES, DemoRecord, DemoStepRecord

    plan = EpisodePlan(run_id="record-demos", env=env, task=task, episode_index=0, seed=seed,
                       env_target=target, policy_target="")
    session = EnvClient(target).session()
    try:
        try:
            opened = await open_env(session, plan, spec)
        except InfrastructureFault as exc:
            raise RecordError(f"env server {target} failed: {exc}") from None
        if len(opened.agents) != 1:
            raise RecordError(f"{env}:{task} has {len(opened.agents)} players; record-demos "
                              "records single-player games only")
        agent_id, start = next(iter(opened.agents.items()))
        names = [a.name for a in start.action_space.actions]
        observation = start.observation
        steps: list[DemoStepRecord] = []
        while len(steps) < STEP_GUARD:
            hint = _hint(dict_from_struct(observation.info).get("expert_action"), names)
            if not hint:
                return None, f"the oracle gave no action at step {len(steps)}"
            response = await _step(session, {agent_id: types_pb2.Action(text=hint)}, target)
            result = response.agents[agent_id]
            if not result.action_result.valid:
                return None, f"the oracle's action {hint!r} was invalid at step {len(steps)}"
            steps.append(DemoStepRecord(observation=observation_text(observation),
                                        action=result.action_result.applied_action.text or hint,
                                        reward=float(result.reward)))
            observation = result.observation
            if response.HasField("episode_end") or not response.next_agents:
                metrics = (dict_from_struct(response.episode_end.metrics)
                           or dict_from_struct(response.metrics))
                progression = float(metrics.get("progression", 0.0))
                if progression < 1.0:
                    return None, (f"the episode ended after {len(steps)} steps with "
                                  f"progression {progression:.2f}")
                return DemoRecord(
                    env=env, task=task, seed=seed, source=ORACLE_SOURCES.get(env, "oracle"),
                    instruction=start.instruction, progression=progression,
                    steps=tuple(steps), recorded_at=datetime.now(UTC).isoformat(),
                    versions=dict(versions or {}), env_kwargs=spec.envs.kwargs_for(env)), ""
        return None, f"no end after {STEP_GUARD} steps"
    finally:
        await session.close()


async def _step(session: Any, actions: dict[str, Any], target: str) -> env_pb.StepResponse:
    import grpc

    from moria.clients import StreamClosedError

    try:
        response = await session.step(actions)
    except (grpc.aio.AioRpcError, StreamClosedError) as exc:
        detail = f"{exc.code().name}: {exc.details()}" if isinstance(
            exc, grpc.aio.AioRpcError) else str(exc)
        raise RecordError(f"env server {target} failed during an episode: {detail}") from None
    if response.error.code != 0:
        raise RecordError(f"env server {target} rejected a step: {response.error.message}")
    return response


def _hint(hint: object, names: list[str]) -> str:
    """The action an ``expert_action`` hint names ("" when unusable), as the oracle agent
    reads it: a string as given, an integer as an index into ``names``."""
    if isinstance(hint, bool):
        return ""
    if isinstance(hint, float) and hint.is_integer():  # Struct numbers arrive as floats
        hint = int(hint)
    if isinstance(hint, int):
        return names[hint] if 0 <= hint < len(names) else ""
    return hint.strip() if isinstance(hint, str) else ""


def _print_outcomes(outcomes: list[TaskOutcome], out: Path, console: Console) -> None:
    from rich.table import Table

    table = Table(title=f"demonstrations in {out}")
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
            console.print(f"{o.env}/{o.task}: {o.path}", highlight=False, soft_wrap=True)
    dropped = sum(len(o.dropped) for o in outcomes)
    if dropped:
        console.print(f"dropped {dropped} episode(s) the oracle did not finish with "
                      "progression 1.0:", highlight=False)
        for o in outcomes:
            for line in o.dropped:
                console.print(f"  {o.env}/{o.task}: {line}", highlight=False)
    for o in outcomes:
        if o.problem:
            console.print(f"[yellow]{o.env}/{o.task}: not recorded: {o.problem}[/yellow]",
                          highlight=False)
        elif not o.complete:
            console.print(f"[yellow]{o.env}/{o.task}: only {o.existing + o.kept} of "
                          f"{o.wanted} demos after the attempts allowed; rerun with a larger "
                          "--max-attempts[/yellow]", highlight=False)
    console.print(f"demos written under {out}", highlight=False)
