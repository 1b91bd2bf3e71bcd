"""``llm-worker`` / ``vlm-worker``: one player over one env, through the Env/Policy gRPC
contract.

Without ``--env-endpoint`` / ``--policy-endpoint`` the worker starts the local stack (env and
agent servers as child processes, logs under ``<telemetry-dir>/logs/<run_id>/``). With
``--agent-type human`` the worker plays the human seat itself, in its own process
(``worker.human``), with the moves the interactive protocol supplies.

The run's outcome is decided by ``orchestrator.report.outcome`` over the worker's episode records:
exit 0 when every episode was scored (ended ``terminated`` or ``truncated``), 1 when any
failed (``agent_error``; ``env_error`` when a server failed under it; an autonomous run's
episodes never played), printing the count and the first distinct errors; 2 for bad settings,
refused before the first episode (the preflight opens the first game and begins every seat's
player once); 130 when interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import signal
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import grpc
from rich.console import Console
from rich.markup import escape

from moria import aio
from moria.clients import (
    PolicyClient,
    StreamClosedError,
    close_channels,
    serve_in_process,
    stop_in_process,
)
from moria.config import API_KEY_ENV, CLIENT_ALIASES, NON_MODEL_AGENT_TYPES
from moria.env.v1 import env_service_pb2 as env_pb
from moria.records import EpisodeRecord
from orchestrator.core.episode import EpisodeSetupError, InfrastructureFault, PlayerSetupError
from orchestrator.core.stack import LocalStack, StackError
from orchestrator.plan.spec import TasksConfig
from orchestrator.report.outcome import RunVerdict
from worker.config import WorkerConfigError, WorkerSettings, load_settings
from worker.human import HumanPlayer, QueueConsole
from worker.protocol import JsonLineWriter, Protocol, serve, stdin_lines
from worker.selector import ActionSelector
from worker.session import CommandError, GameSession, Targets, probe_agents, rehearse
from worker.telemetry import WorkerTelemetry

log = logging.getLogger("moria.worker")


def llm_main(argv: list[str] | None = None) -> int:
    """Entry point of ``llm-worker`` (text observations)."""
    return main(sys.argv[1:] if argv is None else argv, prog="llm-worker", vlm=False)


def vlm_main(argv: list[str] | None = None) -> int:
    """Entry point of ``vlm-worker`` (frames in the prompt; ``--max-image-history``)."""
    return main(sys.argv[1:] if argv is None else argv, prog="vlm-worker", vlm=True)


def main(argv: list[str], *, prog: str, vlm: bool) -> int:
    """Parse settings, then run autonomously or interactively. Returns the exit code."""
    try:
        settings, api_key = load_settings(argv, prog=prog, vlm=vlm)
    except WorkerConfigError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.DEBUG if settings.verbose else logging.INFO,
                        stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if vlm and settings.render_mode == "human":
        log.warning("--render-mode human opens no window in this worker (it runs headless); "
                    "frames are sent as rgb_array render payloads instead")
        settings.render_mode = "rgb_array"
    if api_key:
        _export_api_key(settings, api_key)
    if settings.run_id is None:
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        settings.run_id = f"{prog}-{stamp}-{secrets.token_hex(2)}"
    out: IO[str] = sys.stdout
    if settings.interactive:
        out = _claim_stdout()
    try:
        return aio.run(_run_cancellable(settings, out))
    except (KeyboardInterrupt, asyncio.CancelledError):
        return 130


async def _run_cancellable(settings: WorkerSettings, out: IO[str]) -> int:
    """``run_worker`` with SIGTERM/SIGINT turned into a cancellation, so the run ends with a
    ``run_cancelled`` event and the child servers are stopped."""
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    assert task is not None
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, task.cancel)
    return await run_worker(settings, out)


def _export_api_key(settings: WorkerSettings, api_key: str) -> None:
    """Put ``--api-key`` into the provider's key variable (read by the policy server, which
    is this process or its child); never logged."""
    client = CLIENT_ALIASES.get(settings.client_name, settings.client_name)
    names = API_KEY_ENV.get(client, ())
    if not names:
        log.warning("--api-key is ignored: client %s takes no API key", client)
        return
    if settings.policy_endpoint:
        log.warning("--api-key cannot reach a remote policy server (--policy-endpoint): set "
                    "%s in that server's environment", names[0])
    os.environ[names[0]] = api_key


def _claim_stdout() -> IO[str]:
    """Reserve the real stdout for protocol answers: a private copy of fd 1 is returned, and
    fd 1 (and ``sys.stdout``) then point at stderr, so stray prints of libraries (including C
    code) cannot corrupt the protocol."""
    private = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(private, "w", encoding="utf-8", buffering=1)


@asynccontextmanager
async def _human_server(console: QueueConsole) -> AsyncIterator[str]:
    """The human seat, played in this process (``worker.human.HumanPlayer``); yields its
    target (``inproc:human``)."""
    target = serve_in_process("human", HumanPlayer(console))
    try:
        yield target
    finally:
        console.close()
        stop_in_process(target)


@asynccontextmanager
async def _servers(settings: WorkerSettings, console: QueueConsole | None,
                   ) -> AsyncIterator[Targets]:
    """The env and policy targets: the given endpoints, else a local stack; plus, for a human
    player, the human seat played in this process (``Targets.human``; the opponents' seats
    still go to the policy server)."""
    async with contextlib.AsyncExitStack() as stack:
        human = None
        if console is not None:
            human = await stack.enter_async_context(_human_server(console))
        need_env = settings.env_endpoint is None
        need_agent = settings.policy_endpoint is None
        local: LocalStack | None = None
        if need_env or need_agent:
            log_dir = (Path(tempfile.mkdtemp(prefix="moria-worker-logs-")) if settings.no_jsonl
                       else Path(settings.telemetry_dir) / "logs" / str(settings.run_id))
            # LocalStack always starts an env server (the agent server is optional)
            local = LocalStack([settings.family], log_dir, env_capacity=16,
                               with_agent=need_agent)
            log.info("starting the local stack (logs in %s)", log_dir)
            await stack.enter_async_context(local)
        env_target = settings.env_endpoint or (local.env_target if local else "")
        policy_target = settings.policy_endpoint or (local.policy_target if local else "")
        try:
            yield Targets(env=env_target, policy=policy_target, human=human)
        finally:
            await close_channels()


#: Config keys the policy server's messages name -> the worker flag that sets them.
_CONFIG_FLAGS: dict[str, str] = {
    "agent.max_image_history": "--max-image-history", "agent.checkpoint": "--checkpoint",
    "agent.type": "--agent-type", "client.client_name": "--client", "client.model_id": "--model",
    "client.base_url": "--base-url", "agent.max_text_history": "--max-text-history",
}
_CONFIG_KEY = re.compile(r"\b(agent|client)\.(\w+)(=\S*)?")


def _in_flags(message: str) -> str:
    """``message`` with the config keys the worker sets by flags written as those flags
    (``agent.max_image_history=0`` -> ``--max-image-history 0``)."""
    def flag(match: re.Match[str]) -> str:
        name = _CONFIG_FLAGS.get(f"{match[1]}.{match[2]}")
        if name is None:
            return match[0]
        value = (match[3] or "")[1:]
        return f"{name} {value}" if value else name
    return _CONFIG_KEY.sub(flag, message)


def _player_flags(settings: WorkerSettings, own: bool) -> str:
    """The flags that chose a seat's player: the worker's own (``own``) or the opponents'."""
    kind = settings.agent_type if own else settings.opponent
    flags = f"--agent-type {kind}" if own else f"--opponent {kind}"
    if kind == "rl":
        flags += f" --checkpoint {settings.checkpoint}"
    elif kind not in NON_MODEL_AGENT_TYPES:
        flags += f" with --client {settings.client_name}"
    return flags


async def _preflight(settings: WorkerSettings, targets: Targets) -> tuple[str, str]:
    """The task and the worker's agent id, checked against the env and policy servers: the
    task and seat exist, each player's config passes the policy server's check (GetInfo
    ``config_errors``), and the first game opens with every seat's player begun (a player
    that cannot play this game is refused at its Begin).

    Raises WorkerConfigError naming the flag (unknown task, unknown agent id, missing API key,
    bad agent settings, an rl checkpoint for another task, frames for a model that takes no
    images), one line. Raises InfrastructureFault / ``grpc.aio.AioRpcError`` when a server
    fails.
    """
    task = settings.game_task or TasksConfig().for_env(settings.family)[0]
    request = env_pb.OpenRequest(task=f"{settings.family}:{task}", seed=settings.seed,
                                 max_steps=settings.max_steps)
    try:
        agents = await probe_agents(targets.env, request)
    except grpc.aio.AioRpcError as exc:
        if exc.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT,
                          grpc.StatusCode.FAILED_PRECONDITION):  # the last: task unavailable
            raise WorkerConfigError(f"--task {task!r}: {exc.details()}") from None
        raise
    agent_id = settings.agent_id or agents[0]
    if agent_id not in agents:
        raise WorkerConfigError(f"--agent-id {agent_id!r} is not a seat of {task}; allowed: "
                                + ", ".join(agents))
    client = settings.client_config()
    checks = [(targets.human or targets.policy, settings.agent_config(), "--agent-type")]
    if len(agents) > 1:
        checks.append((targets.policy, settings.opponent_config(), "--opponent"))
    for target, agent, flag in checks:
        info = await PolicyClient(target).get_info(check=(agent, client))
        if info.config_errors:
            raise WorkerConfigError(_in_flags(
                f"{flag} {agent.type} with --client {client.client_name}: "
                + "; ".join(info.config_errors)))
    try:
        await rehearse(settings, task, agent_id, targets)
    except PlayerSetupError as exc:
        own = f"the player of {agent_id} (" in str(exc)
        raise WorkerConfigError(_in_flags(f"{_player_flags(settings, own)}: {exc}")) from None
    except EpisodeSetupError as exc:
        raise WorkerConfigError(f"--env {settings.env_name} --task {task}: the env refuses "
                                f"these settings: {exc}") from None
    return task, agent_id


async def run_worker(settings: WorkerSettings, out: IO[str]) -> int:
    """Run the worker to the end (all episodes, or until ``stop``/EOF). Returns the exit
    code."""
    assert settings.run_id is not None
    emit = JsonLineWriter(out)
    telemetry = WorkerTelemetry(settings.telemetry_dir, settings.run_id,
                                enabled=not settings.no_jsonl,
                                echo=emit if settings.interactive and settings.stdout_events
                                else None)
    console = QueueConsole() if settings.agent_type == "human" else None
    if console is not None and not settings.interactive:
        print("error: --agent-type human needs --interactive (moves come as step commands)",
              file=sys.stderr)
        return 2
    heartbeat: asyncio.Task[None] | None = None
    try:
        async with _servers(settings, console) as targets:
            try:
                task, agent_id = await _preflight(settings, targets)
            except WorkerConfigError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            except (InfrastructureFault, StreamClosedError, grpc.aio.AioRpcError) as exc:
                message = _server_failure(exc)
                print(f"error: a server failed before the first episode: {message}",
                      file=sys.stderr)
                telemetry.event("run_failed", error=f"preflight: {message}")
                return 1
            game = GameSession(settings, task, agent_id, targets, telemetry, console=console)
            telemetry.event("run_started", **_run_fields(settings, task, agent_id))
            heartbeat = asyncio.create_task(_heartbeat(telemetry, settings.heartbeat_s, game))
            try:
                if settings.interactive:
                    selector = ActionSelector(settings, targets.human or targets.policy,
                                              console=console)
                    protocol = Protocol(game, selector, emit)
                    try:
                        how = await serve(protocol, stdin_lines(sys.stdin))
                    finally:
                        await game.abandon()
                        await selector.close()
                    outcome = game.verdict()
                    telemetry.event("run_completed", episodes=game.episodes_started,
                                    ended_by=how, outcome=outcome.as_json(),
                                    **_action_counts(game))
                    _report(outcome, "", _invalid_actions(game, settings))
                    return outcome.exit_code
                stopped_by, unfinished = await _autonomous(settings, game)
                outcome = game.verdict(game.planned(), unfinished)
                if stopped_by:
                    telemetry.event("run_failed", error=stopped_by,
                                    episodes=game.episodes_started, outcome=outcome.as_json(),
                                    **_action_counts(game))
                else:
                    telemetry.event("run_completed", episodes=game.episodes_started,
                                    outcome=outcome.as_json(), **_action_counts(game))
                _report(outcome, _mean_reward(game), _invalid_actions(game, settings))
                return outcome.exit_code
            except (asyncio.CancelledError, KeyboardInterrupt):
                await game.abandon()
                telemetry.event("run_cancelled", episodes=game.episodes_started)
                raise
            except Exception as exc:
                await game.abandon()
                log.exception("the run failed")
                telemetry.event("run_failed", error=f"{type(exc).__name__}: {exc}")
                return 1
    except StackError as exc:
        print(f"error: the local stack did not start: {exc}", file=sys.stderr)
        telemetry.event("run_failed", error=f"local stack: {exc}")
        return 1
    finally:
        if heartbeat is not None:
            heartbeat.cancel()
        telemetry.close()


def _server_failure(exc: BaseException) -> str:
    """One line for a server that failed (a gRPC status with its details, or the message)."""
    if isinstance(exc, grpc.aio.AioRpcError):
        return f"{exc.code().name}: {exc.details()}"
    return str(exc) or type(exc).__name__


def _mean_reward(game: GameSession) -> str:
    """The worker's seat's mean total reward over the scored episodes (failed ones are never
    averaged), or a note that none was scored."""
    scored = [r.episode_return for r in game.records if r.scored]
    if not scored:
        return "no episode scored"
    return f"mean reward {sum(scored) / len(scored):.3f} over {len(scored)} scored episode(s)"


def _action_counts(game: GameSession) -> dict[str, int]:
    """The worker's own moves over the finished episodes, for the run's last event."""
    return {"actions": game.actions, "invalid_actions": game.invalid_actions}


def _invalid_actions(game: GameSession, settings: WorkerSettings) -> str:
    """How many of the worker's own moves the env judged invalid (it then played its default
    action), e.g. ``invalid actions 4 of 4 (100%): ...``; empty before any move."""
    if game.actions == 0:
        return ""
    share = game.invalid_actions / game.actions
    text = f"invalid actions {game.invalid_actions} of {game.actions} ({share:.0%})"
    if not game.invalid_actions:
        return text
    text += ": the env played its default action instead"
    if settings.agent_type not in NON_MODEL_AGENT_TYPES and not settings.constrain_actions:
        text += " (--constrain-actions limits the model's answers to the action names)"
    return text


def _report(outcome: RunVerdict, detail: str = "", invalid: str = "") -> None:
    """The run's outcome on stderr, last: ``done: <headline>; <detail>; <invalid>`` or, when
    it failed, the ``invalid`` line (the invalid actions of the finished episodes), then
    ``failed: <headline>`` and the first distinct errors."""
    if outcome.succeeded:
        if outcome.planned == 0:
            print("done: no episode was played", file=sys.stderr)
        else:
            print("; ".join(filter(None, (f"done: {outcome.headline()}", detail, invalid))),
                  file=sys.stderr)
        return
    if invalid:
        print(invalid, file=sys.stderr)
    print(f"failed: {outcome.describe()}", file=sys.stderr)


def _run_fields(settings: WorkerSettings, task: str, agent_id: str) -> dict[str, Any]:
    return {"env_name": settings.env_name, "task": task, "agent_id": agent_id,
            "agent_type": settings.agent_type, "opponent": settings.opponent,
            "client_name": settings.client_name, "model_id": settings.model_id,
            "constrain_actions": settings.constrain_actions,
            "num_episodes": settings.num_episodes, "max_steps": settings.max_steps,
            "seed": settings.seed, "interactive": settings.interactive,
            "max_image_history": settings.max_image_history}


async def _heartbeat(telemetry: WorkerTelemetry, every_s: float, game: GameSession) -> None:
    while True:
        await asyncio.sleep(every_s)
        episode = game.episode
        telemetry.event("heartbeat", episodes_started=game.episodes_started,
                        episode_id=episode.id if episode else None,
                        step=episode.driver.num_steps if episode else 0)


async def _autonomous(settings: WorkerSettings, game: GameSession,
                      ) -> tuple[str, list[EpisodeRecord]]:
    """Play ``--num-episodes`` episodes, a progress line each. A failed episode (a player's
    error) is recorded and the run goes on; a server failing under an episode stops the run.

    Returns ``("", [])`` when every episode was played, else (why the run stopped, the
    stopped episode's ``env_error`` record, for the verdict only: it is not written)."""
    console = Console(stderr=True, highlight=False, soft_wrap=True)  # never wrapped: grep-able
    for index in range(settings.num_episodes):
        try:
            record = await game.play_episode()
        except (CommandError, InfrastructureFault, StreamClosedError,
                grpc.aio.AioRpcError) as exc:
            message = _server_failure(exc)
            console.print(f"[red]episode {index + 1}/{settings.num_episodes} stopped:[/] "
                          f"{escape(message)}; the run stops here")
            failed = game.failed_record(message)
            await game.abandon()
            return message, [failed] if failed is not None else []
        console.print(f"[bold]{record['episode_id']}[/] ({index + 1}/{settings.num_episodes}) "
                      f"reward {record['total_reward']:.2f}, {record['num_steps']} steps, "
                      f"{record['end_reason']}, {record['llm_calls']} model calls, "
                      f"{record['invalid_actions']} of {record['actions']} actions invalid")
        if record.get("error"):
            console.print(f"  [red]error:[/] {escape(record['error'])}")
    return "", []
