"""The scheduler: plans episodes, runs them concurrently, emits the run's events, resumes.

What happens is said once, on the run's event stream (``orchestrator.core.events``): the
result files, telemetry and the progress bar are its subscribers (``orchestrator.core.sinks``),
and so is the OrchestratorService when it runs the evaluation.

A single asyncio process keeps ``eval.num_workers`` episodes in flight and at most
``eval.max_concurrent_model_calls`` model calls in the whole run (all policy replicas together;
unset: no cap beyond the episodes in flight).
An episode hit by an infrastructure fault (a lost or draining server) is re-queued up to
``eval.max_episode_retries`` times, then recorded as ``env_error``; agent mistakes are never
retried. Rerunning into the same output directory runs only the episodes that have no completed
result.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import sys
import tempfile
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any

import grpc
from rich.console import Console

import moria
from moria.clients import EnvClient, PolicyClient, close_channels
from moria.config import NON_MODEL_AGENT_TYPES
from moria.env.v1 import env_service_pb2 as env_pb
from moria.families import server_environment
from moria.files import atomic_write_text, remove_stale_temp_files
from moria.policy.v1 import policy_service_pb2 as pol_pb
from moria.quoting import quote_names
from moria.records import EndReason, EpisodeRecord, StepRecord
from moria.strategies import strategy_facts
from orchestrator.core.budget import BUDGET_FILE, CostLedger, usd
from orchestrator.core.episode import (
    EpisodeConfig,
    EpisodePlan,
    EpisodeSetupError,
    InfrastructureFault,
    PlayerSetupError,
    StartCallback,
    StepCallback,
    rehearse_start,
    run_episode,
)
from orchestrator.core.episode_config import episode_config
from orchestrator.core.events import EventSink, EventStream
from orchestrator.core.gate import RunGate, RunRateLimits
from orchestrator.core.replicas import NoReplicaError, ReplicaSet, env_load, policy_load
from orchestrator.core.sinks import EpisodeFilesSink, ProgressSink, TelemetrySink
from orchestrator.core.stack import LocalStack, local_env_restarts
from orchestrator.plan.seeds import derive_seed
from orchestrator.plan.spec import (
    RunSpec,
    SpecError,
    local_server_counts,
    local_server_notes,
)
from orchestrator.report.accounting import PriceError, PriceTable, prices_for
from orchestrator.report.outcome import RunVerdict, verdict_from_summary
from orchestrator.report.summary import summarize
from orchestrator.store.demos import MissingDemonstrationsError, check_demonstrations
from orchestrator.store.episodes import completed_keys, episode_paths
from orchestrator.store.frames import FrameRecorder, frames_dir
from orchestrator.store.protocol_record import NOT_CHECKED
from orchestrator.store.telemetry import TelemetryWriter, dumps

log = logging.getLogger("moria.run")


class PreflightError(RuntimeError):
    """The run cannot start (missing API key, unreachable server, bad config)."""


@dataclass
class RunOutcome:
    """What ``run_evaluation`` did: the summary, counts of this invocation and the run's
    verdict over all its planned episodes (``orchestrator.report.outcome``; also in
    ``summary["outcome"]``)."""

    run_id: str
    output_dir: Path
    summary: dict[str, Any]
    ran: int = 0
    skipped: int = 0
    verdict: RunVerdict | None = None


def prepare_output_dir(path: str | Path) -> Path:
    """Create ``eval.output_dir`` (relative to the current directory) and check it is a
    writable directory. Raises PreflightError naming the resolved path and the problem."""
    out = Path(path).expanduser().resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise PreflightError(f"eval.output_dir {out} exists and is not a directory; give a "
                             "directory (it is created when missing)") from None
    except OSError as exc:
        raise PreflightError(f"eval.output_dir {out} cannot be created: "
                             f"{exc.strerror or exc}") from None
    try:
        with tempfile.NamedTemporaryFile(dir=out, prefix=".moria-write-check-"):
            pass
    except OSError as exc:
        raise PreflightError(f"eval.output_dir {out} is not writable: "
                             f"{exc.strerror or exc}") from None
    return out


async def run_evaluation(spec: RunSpec, *, console: Console | None = None,
                         show_progress: bool = True,
                         sinks: Sequence[EventSink] = ()) -> RunOutcome:
    """Run (or resume) the whole evaluation described by ``spec``.

    The run's events (``orchestrator.core.events``) go to the result files, the telemetry
    files and the progress bar (``orchestrator.core.sinks``), then to each of ``sinks``.

    Episodes are planned lazily (``RunSpec.episodes``): memory does not grow with the plan.
    Raises PreflightError before any episode starts when the output directory is unusable,
    a task is unknown to its env server, or the policy server rejects the agent or client
    config (e.g. a missing API key); StackError when a local server exits mid-run.
    """
    console = console or Console(stderr=True)
    out = prepare_output_dir(spec.eval.output_dir)
    for stale in remove_stale_temp_files(out):  # left by a run killed mid-write
        log.info("removed %s, a temp file of an interrupted write", stale)
    run_id = _run_id(spec, out)
    done = completed_keys(out)
    skipped = sum(1 for key in spec.episodes() if key in done)

    def todo() -> Iterator[tuple[str, str, int]]:
        return (key for key in spec.episodes() if key not in done)

    try:  # few_shot: each (env, task)'s demonstrations, chosen once for the whole run
        demos = check_demonstrations(
            spec, ((env, task, derive_seed(spec.eval.seed, env, task, index))
                   for env, task, index in spec.episodes()))
    except MissingDemonstrationsError as exc:
        raise PreflightError(str(exc)) from None
    try:
        if spec.endpoints.configured:
            try:
                spec.endpoints.configure_clients()
            except SpecError as exc:
                raise PreflightError(str(exc)) from None
            return await _run_with(spec, out, run_id, todo, skipped,
                                   _endpoint_targets(spec), console, show_progress, sinks,
                                   demos=demos)
        env_vars = server_environment({env: spec.envs.kwargs_for(env)
                                       for env in spec.envs.env_list})
        env_servers, policy_servers = local_server_counts(spec)
        for note in local_server_notes(spec, (env_servers, policy_servers)):
            console.print(f"note: {note}", highlight=False, markup=False)
        async with LocalStack(spec.envs.env_list, out / "logs",
                              env_capacity=max(64, spec.eval.num_workers * 2),
                              env_vars=env_vars, env_servers=env_servers,
                              policy_servers=policy_servers,
                              env_restarts=local_env_restarts(spec.envs.env_list)) as stack:
            targets = ({env: stack.env_targets for env in spec.envs.env_list},
                       stack.policy_targets)
            return await _run_with(spec, out, run_id, todo, skipped, targets,
                                   console, show_progress, sinks, on_fault=stack.check_alive,
                                   watchdog=stack.watch, demos=demos)
    finally:
        await close_channels()


def _endpoint_targets(spec: RunSpec) -> tuple[dict[str, list[str]], list[str]]:
    """Every configured replica: ({env: its env server targets}, policy server targets)."""
    missing = [env for env in spec.envs.env_list if not spec.endpoints.env.get(env)]
    if missing or not spec.endpoints.policy:
        raise PreflightError(
            "endpoints are partly configured: give endpoints.env.<family> for "
            + ", ".join(spec.envs.env_list) + " and endpoints.policy"
            + (f" (missing env endpoint for {missing[0]!r})" if missing else ""))
    return ({env: list(spec.endpoints.env[env]) for env in spec.envs.env_list},
            list(spec.endpoints.policy))


@dataclass
class _Servers:
    """The run's replicas: per env family its env servers, and the policy servers."""

    env: dict[str, ReplicaSet]
    policy: ReplicaSet

    @classmethod
    def of(cls, targets: tuple[dict[str, list[str]], list[str]]) -> _Servers:
        env_targets, policy_targets = targets
        try:
            return cls({env: ReplicaSet(f"env server for {env}", t, env_load)
                        for env, t in env_targets.items()},
                       ReplicaSet("policy server", policy_targets, policy_load))
        except ValueError as exc:
            raise PreflightError(str(exc)) from None


@dataclass
class _Queued:
    """A planned episode waiting for a worker: its config (``episode_config``, built once for
    all its attempts), its attempt number (0 = first) and why the earlier attempts failed."""

    plan: EpisodePlan
    config: EpisodeConfig
    attempt: int = 0
    errors: tuple[str, ...] = ()


async def _run_with(spec: RunSpec, out: Path, run_id: str,
                    todo: Callable[[], Iterator[tuple[str, str, int]]],
                    skipped: int, targets: tuple[dict[str, list[str]], list[str]],
                    console: Console, show_progress: bool, sinks: Sequence[EventSink],
                    on_fault: Callable[[], None] | None = None,
                    watchdog: Callable[[], Awaitable[None]] | None = None, *,
                    demos: Mapping[tuple[str, str], list[pol_pb.Demonstration]],
                    ) -> RunOutcome:
    """Run the episodes ``todo()`` yields against the given replicas ({env: env server
    targets}, policy server targets); each attempt of an episode takes the replicas with the
    most room (``orchestrator.core.replicas``). ``on_fault`` is called after each infrastructure
    fault and may raise to stop the whole run (a dead local server); ``watchdog``, when given,
    runs beside the episodes and stops the whole run with its exception the moment it raises
    (``LocalStack.watch``). ``demos``: (env, task) -> the demonstrations every episode of it
    gets (``check_demonstrations``'s answer for the whole plan; empty unless few_shot)."""
    servers = _Servers.of(targets)
    env_targets = {env: t[0] for env, t in targets[0].items()}
    policy_target = targets[1][0]
    try:
        prices = prices_for(spec.eval.prices)
    except PriceError as exc:
        raise PreflightError(str(exc)) from None
    ledger = _cost_ledger(spec, prices, out)
    limits = RunRateLimits.of(spec.seat_configs())
    gate = RunGate(limits, ledger) if limits is not None or ledger is not None else None
    versions = await _preflight(spec, targets[0], targets[1])
    await _check_env_options(spec, run_id, todo(), env_targets, policy_target, demos)
    _write_run_metadata(out, run_id, spec, versions)
    _note_model_call_cap(spec, len(targets[1]), console)
    await _note_peer_caps(spec, targets, console)
    outcome = RunOutcome(run_id=run_id, output_dir=out, summary={}, skipped=skipped)
    with TelemetryWriter(out, run_id) as telemetry, ProgressSink(console, show_progress) as bar:
        if ledger is not None:
            bar.tally.budget_status = ledger.status
        events = EventStream([EpisodeFilesSink(out), TelemetrySink(telemetry), bar, *sinks])
        await events.emit("run_started", planned=spec.episode_count(), skipped=skipped,
                          run_seed=spec.eval.seed,
                          max_steps=spec.eval.max_steps_per_episode or 0)
        pending = (_queued(spec, run_id, env, task, index, versions, demos)
                   for env, task, index in todo())
        retries: asyncio.Queue[_Queued] = asyncio.Queue()
        cap = spec.eval.max_concurrent_model_calls
        model_slots = asyncio.Semaphore(cap) if cap is not None else None

        step_caps: dict[tuple[str, str, int], int] = {}  # the cap each open episode got
        frames_for = (partial(_frame_recorder, out) if spec.eval.save_images else None)

        async def on_start(plan: EpisodePlan, opened: env_pb.OpenResponse) -> None:
            step_caps[(plan.env, plan.task, plan.episode_index)] = int(opened.max_steps)

        async def on_step(plan: EpisodePlan, step: StepRecord) -> None:
            await events.emit("step", step=step, env=plan.env, task=plan.task,
                              episode_index=plan.episode_index,
                              max_steps=step_caps.get((plan.env, plan.task, plan.episode_index),
                                                      0))

        def next_episode() -> _Queued | None:
            try:
                return retries.get_nowait()  # re-queued episodes first
            except asyncio.QueueEmpty:
                return next(pending, None)

        async def worker() -> None:
            while (queued := next_episode()) is not None:
                record = await _attempt(queued, servers, spec, model_slots, on_step, events,
                                        retries, on_fault, on_start, frames_for, gate)
                plan = queued.plan
                step_caps.pop((plan.env, plan.task, plan.episode_index), None)
                if record is None:
                    continue  # re-queued
                await events.emit("episode_finished", episode=record)
                if ledger is not None:
                    await events.emit("budget", **ledger.snapshot())
                outcome.ran += 1

        await _run_workers([worker() for _ in range(spec.eval.num_workers)], watchdog)
        outcome.summary = summarize(out, envs=spec.envs.env_list, prices=prices,
                                    planned=spec.episodes(),
                                    extra={"run_id": run_id, "run_seed": spec.eval.seed,
                                           "versions": versions,
                                           **({"budget": ledger.snapshot()} if ledger else {}),
                                           "env_kwargs": {env: spec.envs.kwargs_for(env)
                                                          for env in spec.envs.env_list}})
        outcome.verdict = verdict_from_summary(outcome.summary)
        await events.emit("run_finished", ran=outcome.ran, skipped=skipped,
                          average_progress=outcome.summary.get("average_progress"),
                          outcome=outcome.summary.get("outcome"))
    return outcome


def _queued(spec: RunSpec, run_id: str, env: str, task: str, index: int,
            versions: dict[str, str],
            demos: Mapping[tuple[str, str], list[pol_pb.Demonstration]]) -> _Queued:
    """The first attempt of episode ``index`` of (``env``, ``task``): its plan (no servers
    yet) and its config, with the demonstrations ``demos`` holds for (env, task)."""
    seed = derive_seed(spec.eval.seed, env, task, index)
    plan = EpisodePlan(run_id=run_id, env=env, task=task, episode_index=index, seed=seed,
                       env_target="", policy_target="", versions=versions)
    return _Queued(plan, episode_config(spec, env, task, seed,
                                        demonstrations=demos.get((env, task))))


def _cost_ledger(spec: RunSpec, prices: PriceTable, out: Path) -> CostLedger | None:
    """The run's ledger under ``eval.max_cost_usd`` (None without a cap), continuing the
    spending saved in ``out`` by an earlier invocation. Raises PreflightError when a seat's
    model has no price (a cap cannot bound it) or the saved ledger cannot be read."""
    cap = spec.eval.max_cost_usd
    if cap is None:
        return None
    unpriced = sorted({f"{client.client_name}/{client.model_id or 'default'}"
                       for agent, client in spec.seat_configs()
                       if agent.type not in NON_MODEL_AGENT_TYPES
                       and prices.price_for(f"{client.client_name}/"
                                            f"{client.model_id or 'default'}") is None})
    if unpriced:
        raise PreflightError(
            f"eval.max_cost_usd is set but {', '.join(unpriced)} has no price in "
            f"{prices.source}, so no call of it can be bounded: add the model to the price "
            "table (eval.prices) or run without a cap")
    try:
        ledger = CostLedger(cap, prices, out / BUDGET_FILE)
    except ValueError as exc:
        raise PreflightError(str(exc)) from None
    if ledger.spent_usd >= cap:
        raise PreflightError(
            f"eval.max_cost_usd {usd(cap)} is already spent by this run's earlier "
            f"invocations ({usd(ledger.spent_usd)}, {out / BUDGET_FILE}): resume with a "
            "higher cap")
    return ledger


def _frame_recorder(out: Path, plan: EpisodePlan) -> FrameRecorder:
    """The recorder of ``plan``'s frames, beside its episode JSON under ``out``."""
    json_path, _ = episode_paths(out, plan.env, plan.task, plan.episode_index)
    return FrameRecorder(frames_dir(json_path))


async def _run_workers(workers: list[Coroutine[Any, Any, None]],
                       watchdog: Callable[[], Awaitable[None]] | None) -> None:
    """Run the episode workers to the end. One failure (or Ctrl-C) stops every worker; a
    ``watchdog`` that raises stops them all with its exception; it is cancelled once the
    workers are done."""
    tasks = [asyncio.create_task(w) for w in workers]
    guard = asyncio.ensure_future(watchdog()) if watchdog is not None else None
    try:
        if guard is None:
            await asyncio.gather(*tasks)
            return
        everything: asyncio.Future[Any] = asyncio.gather(*tasks)
        waiting: list[asyncio.Future[Any]] = [everything, guard]
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if guard.done():
            guard.result()  # raises the watchdog's exception
        await everything
    except BaseException:
        for running in tasks:
            running.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    finally:
        if guard is not None:
            guard.cancel()
            await asyncio.gather(guard, return_exceptions=True)


async def _attempt(queued: _Queued, servers: _Servers, spec: RunSpec,
                   model_slots: asyncio.Semaphore | None, on_step: StepCallback,
                   events: EventStream,
                   queue: asyncio.Queue[_Queued],
                   on_fault: Callable[[], None] | None,
                   on_start: StartCallback | None = None,
                   frames_for: Callable[[EpisodePlan], FrameRecorder] | None = None,
                   gate: RunGate | None = None,
                   ) -> EpisodeRecord | None:
    """One attempt at one episode on the replicas with the most room. Returns its record, or
    None when an infrastructure fault re-queued it (same seed, a new session). ``frames_for``
    gives the episode's frame recorder (``eval.save_images``)."""
    plan, attempt = queued.plan, queued.attempt
    end_reason: EndReason = "env_error"
    env_set, policy_set = servers.env[plan.env], servers.policy
    try:
        env_target = await env_set.acquire()
        try:
            policy_target = await policy_set.acquire()
        except BaseException:
            env_set.release(env_target)
            raise
    except NoReplicaError as exc:
        error = str(exc)
    else:
        plan = dataclasses.replace(plan, env_target=env_target, policy_target=policy_target)
        await events.emit("episode_started", env=plan.env, task=plan.task,
                          episode_index=plan.episode_index, seed=plan.seed, attempt=attempt,
                          env_server=env_target, policy_server=policy_target)
        try:
            record = await run_episode(plan, queued.config, model_slots=model_slots,
                                       on_step=on_step, on_start=on_start,
                                       frames=frames_for(plan) if frames_for else None,
                                       gate=gate)
            record.attempts, record.retry_errors = attempt + 1, list(queued.errors)
            return record
        except InfrastructureFault as exc:
            if exc.code == grpc.StatusCode.RESOURCE_EXHAUSTED:  # full: try the others first
                if exc.server == "env":
                    env_set.mark_full(env_target)
                elif exc.server == "policy":
                    policy_set.mark_full(policy_target)
            if on_fault is not None:
                on_fault()
            if attempt < spec.eval.max_episode_retries:
                log.warning("infrastructure fault in %s/%s #%d (attempt %d): %s; re-queued",
                            plan.env, plan.task, plan.episode_index, attempt + 1, exc)
                await events.emit("episode_retried", env=plan.env, task=plan.task,
                                  episode_index=plan.episode_index, error=str(exc),
                                  env_server=env_target, policy_server=policy_target)
                await asyncio.sleep(min(5.0, 0.5 * 2**attempt))
                queue.put_nowait(_Queued(queued.plan, queued.config, attempt + 1,
                                         (*queued.errors, str(exc))))
                return None
            error = f"infrastructure fault after {attempt + 1} attempt(s): {exc}"
        except EpisodeSetupError as exc:
            error = f"episode could not start: {exc}"
            if isinstance(exc, PlayerSetupError):
                end_reason = "agent_error"
        finally:
            env_set.release(env_target)
            policy_set.release(policy_target)
    log.error("%s/%s #%d failed: %s", plan.env, plan.task, plan.episode_index, error)
    return EpisodeRecord(run_id=plan.run_id, env=plan.env, task=plan.task,
                         episode_index=plan.episode_index, seed=plan.seed,
                         end_reason=end_reason, error=error,
                         agent_config=spec.agent.model_dump(mode="json"),
                         client_config=spec.client.model_dump(mode="json"),
                         versions=plan.versions, attempts=attempt + 1,
                         retry_errors=list(queued.errors),
                         started_at=datetime.now(UTC).isoformat(),
                         ended_at=datetime.now(UTC).isoformat())


async def _preflight(spec: RunSpec, env_targets: dict[str, list[str]],
                     policy_targets: list[str]) -> dict[str, str]:
    """Check every replica answers, the env servers host their family and the policy servers
    accept each seat's config; collect versions (of the first replica of each). The policy
    servers and the env servers are checked at the same time (each check waits on its own
    server's first-use imports, e.g. the model SDK or the game package)."""
    checks = [asyncio.ensure_future(_check_policy_servers(spec, policy_targets)),
              asyncio.ensure_future(_check_env_servers(spec, env_targets))]
    try:
        first, _ = await asyncio.wait(checks, return_when=asyncio.FIRST_EXCEPTION)
        # The other check ends on its own (each call has a deadline) before anything is
        # raised: one cancelled with its RPC in flight leaves a completion for this loop, and
        # under the orchestrator service (a loop per run, closed when the run ends) grpc aio's
        # one poller then met a closed loop and dropped the service's own events.
        await asyncio.wait(checks)
    finally:  # only when the preflight itself is cancelled
        for check in checks:
            check.cancel()
    failures = [(c in first, error) for c in checks if (error := c.exception()) is not None]
    if failures:  # the first failure is raised
        raise max(failures, key=lambda failure: failure[0])[1]
    policy_versions, env_versions = (c.result() for c in checks)
    return {"api": moria.API_VERSION, "moria": moria.__version__,
            "python": sys.version.split()[0], **policy_versions, **env_versions}


async def _check_policy_servers(spec: RunSpec, policy_targets: list[str]) -> dict[str, str]:
    """Every policy replica accepts every seat's config (``GetInfo`` with a check); the first
    replica's component versions as ``policy.<name>``. Raises PreflightError."""
    info: Any = None
    for target in reversed(policy_targets):  # the first replica's versions are kept
        policy = PolicyClient(target)
        for agent, client in spec.seat_configs():  # the run's own, then each distinct seat's
            with _answering("policy server", target, "endpoints.policy"):
                info = await policy.get_info(check=(agent, client))
            if info.config_errors:
                raise PreflightError("the agent/client config cannot be used: "
                                     + "; ".join(info.config_errors))
    return {f"policy.{k}": v for k, v in info.version.components.items()}


async def _check_env_servers(spec: RunSpec, env_targets: dict[str, list[str]],
                             ) -> dict[str, str]:
    """Every env replica hosts its family and offers the run's tasks; the component versions
    of each family's first replica as ``env.<name>``. Raises PreflightError."""
    versions: dict[str, str] = {}
    for env, targets in env_targets.items():
        for target in reversed(targets):  # the first replica's versions are kept
            with _answering(f"env server for {env}", target, f"endpoints.env.{env}"):
                env_info = await EnvClient(target).get_info()
            if env not in env_info.families:
                raise PreflightError(f"env server {target} does not host {env!r} "
                                     f"(hosts: {', '.join(env_info.families)})")
        versions.update({f"env.{k}": v for k, v in env_info.version.components.items()})
        await _check_tasks(spec, env, targets[0])
    return versions


@contextlib.contextmanager
def _answering(server: str, target: str, setting: str) -> Iterator[None]:
    """Turn a preflight call's RPC failure (a server down, a wrong address, a TLS or token
    mismatch) into PreflightError naming the server, its target, gRPC's status and the
    setting that names the target."""
    try:
        yield
    except grpc.aio.AioRpcError as exc:
        details = (exc.details() or "").splitlines()
        raise PreflightError(
            f"the {server} at {target} did not answer the preflight ({exc.code().name}: "
            f"{details[0] if details else 'no details'}); start it or fix {setting}") from None


async def _check_tasks(spec: RunSpec, env: str, target: str) -> None:
    """Every task the spec lists for ``env`` is one the env server at ``target`` offers
    (``ListTasks``) and can open. Raises PreflightError, before any episode or folder exists,
    naming the unknown tasks (at most 20 quoted, then a count) and the allowed ones; or, when
    every task is known, the tasks the server lists as unavailable, each with its reason
    (``TaskInfo.unavailable``)."""
    tasks = spec.tasks.for_env(env)
    if not tasks:
        return
    with _answering(f"env server for {env}", target, f"endpoints.env.{env}"):
        listed = {t.task: t for t in await EnvClient(target).list_tasks(env)}
    unknown = [task for task in tasks if task not in listed]
    if unknown:
        offered = sorted(t.task for t in listed.values() if not t.unavailable)
        raise PreflightError(
            f"{len(unknown)} unknown task(s) in tasks.{env}_tasks: {quote_names(unknown)}; "
            f"the env server offers {len(offered)}: {quote_names(offered)} "
            f"(`moria tasks --env {env}` lists them)")
    unavailable = [task for task in dict.fromkeys(tasks) if listed[task].unavailable]
    if unavailable:
        reasons: dict[str, list[str]] = {}
        for task in unavailable:
            reasons.setdefault(listed[task].unavailable, []).append(task)
        raise PreflightError(
            f"{len(unavailable)} task(s) in tasks.{env}_tasks cannot be opened on this env "
            "server: " + "; ".join(f"{quote_names(names)}: {reason}"
                                   for reason, names in reasons.items())
            + f" (`moria tasks --env {env}` marks them UNAVAILABLE)")


async def _check_env_options(spec: RunSpec, run_id: str, todo: Iterable[tuple[str, str, int]],
                             env_targets: dict[str, str], policy_target: str,
                             demos: Mapping[tuple[str, str], list[pol_pb.Demonstration]],
                             ) -> None:
    """Open (and close) the first planned game of each env with the run's options, so a bad
    option (an unknown ``<env>_kwargs`` key, ``agent.type=oracle`` on an env without an
    oracle) stops the run before any episode instead of failing every episode. ``demos``: as
    ``_run_with``'s.

    Raises PreflightError naming the env and the server's message. Lost servers are left to
    the episodes' own fault handling.
    """
    first: dict[str, tuple[str, int]] = {}
    for env, task, index in todo:
        first.setdefault(env, (task, index))
        if len(first) == len(spec.envs.env_list):
            break
    for env, (task, index) in first.items():
        plan = EpisodePlan(run_id=run_id, env=env, task=task, episode_index=index,
                           seed=derive_seed(spec.eval.seed, env, task, index),
                           env_target=env_targets[env], policy_target=policy_target)
        session = EnvClient(plan.env_target).session()
        try:
            config = episode_config(spec, env, task, plan.seed,
                                    demonstrations=demos.get((env, task)))
            rehearsal = await rehearse_start(session, plan, config)
            opened = rehearsal.opened
            _warn_unchecked_protocol(env, rehearsal.protocol)
            if spec.agent.max_image_history > 0 and not any(
                    a.observation.HasField("image") and a.observation.image.data
                    for a in opened.agents.values()):
                log.warning("env %r renders no frames: its episodes run text-only although "
                            "agent.max_image_history=%d", env, spec.agent.max_image_history)
        except PlayerSetupError as exc:
            raise PreflightError(f"{env}/{task}: {exc}") from None
        except EpisodeSetupError as exc:
            raise PreflightError(f"env {env!r} rejects the run's options: {exc}") from None
        except InfrastructureFault:
            pass
        finally:
            await session.close()



def _warn_unchecked_protocol(env: str, protocol: dict[str, Any]) -> None:
    """Warn, before any episode, when a run under ``agent.protocol=balrog`` uses a BALROG
    checkout whose ``moria protocol-check`` has not passed for this env and strategy: its
    figures are plotted beside BALROG's leaderboard, which only a passed check makes
    comparable."""
    check = protocol.get("protocol_check")
    if protocol.get("name") != "balrog" or not isinstance(check, dict):
        return
    status = str(check.get("status", NOT_CHECKED))
    if status == "passed":
        return
    strategy = str(check.get("strategy") or "")
    verdict = ("is not checked" if status == NOT_CHECKED
               else f"{status} its moria protocol-check")
    log.warning("%s: BALROG commit %s %s for this env and strategy (%s); run `moria "
                "protocol-check --balrog %s --env %s --strategy %s` before comparing these "
                "figures with BALROG's leaderboard", env,
                protocol.get("balrog_commit") or "unknown", verdict, strategy or "?",
                protocol.get("balrog_source") or "PATH", env, strategy or "STRATEGY")


def _run_id(spec: RunSpec, out: Path) -> str:
    if spec.eval.run_id:
        return spec.eval.run_id
    meta = out / "run.json"
    if meta.is_file():
        try:
            return str(json.loads(meta.read_text())["run_id"])
        except (ValueError, KeyError):
            pass
    return "run-" + datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def _note_model_call_cap(spec: RunSpec, policy_replicas: int, console: Console) -> None:
    """Say so when more episodes run at once than the agent servers take model calls
    (``client.max_concurrency`` per server): the rest wait their turn, which a run must never
    do silently."""
    facts = strategy_facts().get(spec.agent.type)
    if facts is None or not facts.calls_model:
        return
    limit = spec.client.max_concurrency * max(1, policy_replicas)
    if spec.eval.num_workers > limit:
        console.print(
            f"note: eval.num_workers={spec.eval.num_workers} but at most {limit} model calls "
            f"run at once (client.max_concurrency={spec.client.max_concurrency} per agent "
            f"server x {policy_replicas}); raise client.max_concurrency to lift it",
            highlight=False)


async def _note_peer_caps(spec: RunSpec, targets: tuple[dict[str, list[str]], list[str]],
                          console: Console) -> None:
    """Say so when the servers let this client hold fewer sessions (streams) at once than the
    run has workers (each server's per-peer limit, ``GetInfo.peer_capacity``, summed over its
    replicas): the run then keeps at most that many episodes going, which it must never do
    silently. ``dns:///`` targets (one pod's figures) and servers that do not answer (the
    episodes will say) are left out."""
    env_targets, policy_targets = targets
    roles = [(f"env servers of {env}", [(t, env_load) for t in ts])
             for env, ts in env_targets.items()]
    roles.append(("policy servers", [(t, policy_load) for t in policy_targets]))
    for role, replicas in roles:
        if any(t.startswith("dns:") for t, _ in replicas):
            continue
        try:
            loads = await asyncio.gather(*(probe(t) for t, probe in replicas))
        except (grpc.aio.AioRpcError, OSError):
            continue
        share = sum(min(load.capacity, load.peer_capacity or load.capacity) for load in loads)
        if share < spec.eval.num_workers:
            console.print(
                f"note: eval.num_workers={spec.eval.num_workers} but the {role} let this "
                f"client hold at most {share} at once (their --capacity, or their "
                "--max-sessions-per-peer / --max-streams-per-peer); episodes beyond that wait "
                "for a slot", highlight=False)


def _write_run_metadata(out: Path, run_id: str, spec: RunSpec, versions: dict[str, str]) -> None:
    packages = {}
    for pkg in ("moria", "grpcio", "protobuf", "pydantic"):
        try:
            packages[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            continue
    atomic_write_text(out / "run.json", dumps({
        "run_id": run_id, "spec": spec.model_dump(mode="json"), "versions": versions,
        "packages": packages, "written_at": datetime.now(UTC).isoformat()}, indent=2))

