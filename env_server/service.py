"""EnvService servicer: one Session stream = one game instance.

Session rules (see protos/moria/env/v1/env_service.proto):
- the first request must be ``open``; anything else is FAILED_PRECONDITION;
- a task the family lists with ``TaskInfo.unavailable`` exists but cannot be opened here:
  ``open`` ends the stream with FAILED_PRECONDITION and that reason (an unknown task is
  NOT_FOUND);
- at most ``capacity`` sessions are open at once, and at most ``max_sessions_per_peer`` of them
  from one client address; more get RESOURCE_EXHAUSTED;
- while draining, new sessions get UNAVAILABLE; open ones run to completion;
- a session that sends nothing for ``idle_timeout_s`` (default ``DEFAULT_IDLE_TIMEOUT_S``,
  announced in ``OpenResponse.idle_timeout_s``) is ended with DEADLINE_EXCEEDED (the idle reaper);
  ``ping`` keeps an open session alive while its client waits on a model;
- every error message that quotes the request goes through ``moria.quoting`` and is cut to
  ``MAX_ERROR_BYTES`` (``moria.server.bounded_message``), so a hostile request cannot make an
  answer larger than itself;
- an Open's options are data: more than ``MAX_OPTION_KEYS`` keys (of the options or of a
  seat's) are refused before any is decoded, then every key and value is checked against the
  family's schema (its manifest's ``options``, ``moria.family_options``) before anything is
  constructed; a key the schema lacks never reaches a game (INVALID_ARGUMENT naming the key,
  the value and what is allowed). Options naming server files (a BALROG checkout, Melting
  Pot's assets, Boxoban levels) are resolved by the server's offered folders
  (``moria.server_files``), never taken as a client's path;
- an exception inside the game ends that session only, with INTERNAL (client input that a
  game refuses at construction is the family's ``GameOptionError``: INVALID_ARGUMENT);
- game code runs on a thread pool, never on the event loop, and so does turning its frames
  into PNG (building observations and renders);
- an Action text longer than ``max_action_chars`` (default 4096) is an invalid action, in band:
  the game applies its default action (see ``MAX_ACTION_CHARS``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import itertools
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from typing import Any, NoReturn, TypeVar

import grpc

import moria
from env_server.convert import (
    observation_to_proto as to_obs,
)
from env_server.convert import (
    start_to_proto,
    submitted_action,
)
from env_server.families import load_family
from env_server.game import (
    Family,
    Game,
    GameOptions,
    PlayerSpec,
    StepResult,
    SubmittedAction,
    TaskNotFoundError,
    TaskUnavailableError,
)
from env_server.isolation import ProcessGame
from moria.codecs import CodecError, dict_from_struct, image_from_rgb, struct_from_dict
from moria.common.v1 import types_pb2
from moria.env.v1 import env_service_pb2 as env_pb
from moria.env.v1 import env_service_pb2_grpc as env_grpc
from moria.family_options import OptionError, check_key_count
from moria.metrics import ENV_SERVICE, Metrics
from moria.quoting import quote, quote_names
from moria.server import (
    DEFAULT_IDLE_TIMEOUT_S,
    Drain,
    PeerSlots,
    RequestLimit,
    abort_call,
    bounded_message,
    default_peer_limit,
    method_path,
    peer_of,
)
from moria.server_files import ServerFileError, ServerFiles

log = logging.getLogger("moria.env")
T = TypeVar("T")

#: Longest Action text a game receives (characters). A longer text is judged an invalid action,
#: in band like any other answer that is not a legal move: the game receives the index -1 (no
#: family has it), applies its default action and reports ``valid=False`` with its usual
#: feedback. The stream and the episode go on; the text itself is never passed on or echoed.
MAX_ACTION_CHARS = 4096
#: What the game receives in place of an over-long text: an index no action list holds.
OVERSIZE_ACTION: SubmittedAction = -1
#: The longest task name an Open may give; every family's are far shorter (ListTasks). A longer
#: one is NOT_FOUND at once, before any family is asked.
MAX_TASK_CHARS = 256

_SERVICE = env_pb.DESCRIPTOR.services_by_name["EnvService"]
#: The largest request each method takes (bytes), checked before it is parsed
#: (``moria.server.RequestLimit``; larger: RESOURCE_EXHAUSTED): a session request (an Open
#: with its options, a step with one action per agent of at most ``max_action_chars``) is a few
#: KiB; gRPC refuses anything larger than 1 MiB before it is read, so a refused request never
#: holds more (``--max-message-mb`` still bounds what the server sends: observations, frames).
REQUEST_LIMITS: dict[str, RequestLimit] = {
    method_path(_SERVICE, "Session"): RequestLimit(1024 * 1024),
    method_path(_SERVICE, "GetInfo"): RequestLimit(64 * 1024),
    method_path(_SERVICE, "ListTasks"): RequestLimit(64 * 1024),
}



def progression_of(metrics: Mapping[str, Any]) -> float:
    """The typed ``progression`` field of a response: ``metrics["progression"]`` (every game
    reports it, in [0, 1]; ``env_server.game``), 0.0 when a game leaves it out."""
    return float(metrics.get("progression", 0.0))

class EnvServicer(env_grpc.EnvServiceServicer):
    """Hosts one or more families. ``capacity``: max concurrent sessions;
    ``idle_timeout_s``: idle reaper limit (seconds, > 0); ``workers``: game thread-pool size;
    ``process_families``: the hosted families whose games run in worker processes (None: those
    that declare ``isolation = "process"``); ``max_sessions_per_peer``: the most sessions one
    client address may hold (``moria.server.peer_of``; None: ``default_peer_limit``, three
    quarters of the capacity); ``files``: the server files clients may name
    (``moria.server_files``; default: none); ``metrics``:
    where open sessions, steps and RPC errors are counted (default: a fresh ``Metrics`` with
    its own registry; serve ``servicer.metrics.registry`` with
    ``moria.metrics.start_metrics_http``). Raises ValueError on a bad setting (a capacity,
    idle timeout or action cap out of range, a process family the server does not host)."""

    def __init__(self, families: Sequence[str], *, drain: Drain, capacity: int = 64,
                 idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S, workers: int = 8,
                 process_families: Sequence[str] | None = None,
                 metrics: Metrics | None = None,
                 max_action_chars: int = MAX_ACTION_CHARS,
                 files: ServerFiles | None = None,
                 max_sessions_per_peer: int | None = None):
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.peers = PeerSlots(min(capacity, max_sessions_per_peer or default_peer_limit(
            capacity)))
        self.families: dict[str, Family] = {name: load_family(name) for name in families}
        self.files = files if files is not None else ServerFiles()
        self.drain = drain
        self.metrics = metrics if metrics is not None else Metrics()
        self.capacity = capacity
        if max_action_chars < 1:
            raise ValueError(f"max_action_chars must be >= 1, got {max_action_chars}")
        self.max_action_chars = max_action_chars
        if not idle_timeout_s > 0:
            raise ValueError(f"idle_timeout_s must be > 0, got {idle_timeout_s}")
        self.idle_timeout_s = idle_timeout_s
        #: families whose games run in worker processes (default: those that ask for it)
        self.process_families = set(
            process_families if process_families is not None
            else [n for n, f in self.families.items() if f.isolation == "process"])
        strays = sorted(self.process_families - set(self.families))
        if strays:  # a typo would leave the family it meant without worker processes
            raise ValueError(f"process isolation asked for {strays[0]!r}, which this server "
                             f"does not host; hosted families: {', '.join(self.families)}")
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="game")
        self._open = 0
        self._ids = itertools.count(1)
        self.sessions: dict[str, _Session] = {}
        #: read once: package versions cannot change under a running server, and reading
        #: them (importlib.metadata scans site-packages) took milliseconds of the event loop
        #: on every GetInfo, which clients send before each episode
        self._version = _versions(self.families.values())
        self._family_names = sorted(self.families)

    # ---- unary -------------------------------------------------------------------------

    async def GetInfo(self, request: env_pb.GetInfoRequest, context: Any,
                      ) -> env_pb.GetInfoResponse:
        return env_pb.GetInfoResponse(
            version=self._version, families=self._family_names,
            capacity=self.capacity, active_sessions=self._open, draining=self.drain.draining,
            peer_capacity=self.peers.limit, peer_sessions=self.peers.held(peer_of(context)))

    async def ListTasks(self, request: env_pb.ListTasksRequest, context: Any,
                        ) -> env_pb.ListTasksResponse:
        with self.metrics.rpc(ENV_SERVICE, context):
            names = [request.family] if request.family else sorted(self.families)
            unknown = [n for n in names if n not in self.families]
            if unknown:
                await abort_call(context, grpc.StatusCode.NOT_FOUND,
                                 f"family {quote(unknown[0], 64)} is not hosted here; hosted: "
                                 + ", ".join(sorted(self.families)))
            tasks: list[env_pb.TaskInfo] = []
            for name in names:
                infos = await self._run(self.families[name].list_tasks)
                tasks.extend(env_pb.TaskInfo(
                    family=t.family, task=t.task, description=t.description,
                    max_steps=t.max_steps, default_action=t.default_action,
                    num_agents=t.num_agents, unavailable=t.unavailable) for t in infos)
            return env_pb.ListTasksResponse(tasks=tasks)

    # ---- the session stream -------------------------------------------------------------

    async def Session(self, request_iterator: Any, context: Any) -> None:
        session = _Session(self, context, f"s{next(self._ids)}-{uuid.uuid4().hex[:6]}")
        self.sessions[session.session_id] = session
        try:
            with self.metrics.rpc(ENV_SERVICE, context):
                await session.serve()
        finally:
            self.sessions.pop(session.session_id, None)
            try:
                await self._run(session.close_game)
            except RuntimeError:  # the game pool is already shut down (server stopping)
                session.close_game()
            finally:
                session.release()

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def _claim_slot(self, peer: str) -> str:
        """Take a capacity slot for ``peer``: '' when taken, else why not (the server's
        capacity, or the peer's share of it)."""
        if self._open >= self.capacity:
            return (f"session capacity reached ({self.capacity} open); retry later or use "
                    "another replica")
        if not self.peers.claim(peer):
            return (f"this client holds {self.peers.limit} sessions, the most one client "
                    f"address may hold on this server (--max-sessions-per-peer; capacity "
                    f"{self.capacity}); close one, retry later or use another replica")
        self._open += 1
        self.metrics.active_sessions.inc()
        return ""

    def _release_slot(self, peer: str) -> None:
        self._open -= 1
        self.peers.release(peer)
        self.metrics.active_sessions.dec()

    def open_game(self, family: Family, task: str, options: GameOptions) -> Game:
        """Open a game in-process or, for isolated families, in a worker process."""
        if family.name in self.process_families:
            target = f"{type(family).__module__}:{type(family).__qualname__}"
            return ProcessGame(target, task, options, preload=family.preload)
        return family.open(task, options)

    def resolve(self, task: str) -> tuple[Family, str]:
        """Map "family:task" or a bare task to (family, task). Raises TaskNotFoundError."""
        family_name, sep, bare = task.partition(":")
        if sep and family_name in self.families:
            return self.families[family_name], bare
        if len(self.families) == 1:
            return next(iter(self.families.values())), task
        for family in self.families.values():
            if any(t.task == task for t in family.list_tasks()):
                return family, task
        valid = [f"{f.name}:{t.task}" for f in self.families.values() for t in f.list_tasks()]
        raise TaskNotFoundError(task, valid)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


class _Session:
    """State of one Session stream."""

    def __init__(self, server: EnvServicer, context: Any, session_id: str):
        self.server = server
        self.context = context
        self.session_id = session_id
        self.game: Game | None = None
        self.family_name = ""
        self.inline_steps = False
        self.obs = env_pb.ObservationOptions()
        self.next_agents: list[str] = []
        self.returns: dict[str, float] = {}
        self.steps = 0
        self.ended: types_pb2.EpisodeEnd | None = None
        self._slot = False
        self.peer = ""
        self._tracked: contextlib.AbstractContextManager[Any] | None = None

    async def abort(self, code: grpc.StatusCode, message: str) -> NoReturn:
        """End the stream with ``code`` and ``message`` (cut by ``bounded_message``). The
        capacity slot is given back first, so a client that hears the status finds it free
        (the game itself is closed right after, on the game pool)."""
        self.release()
        await abort_call(self.context, code, message)

    async def serve(self) -> None:
        while True:
            try:
                async with asyncio.timeout(self.server.idle_timeout_s):  # no task per read
                    request = await self.context.read()
            except TimeoutError:
                limit = self.server.idle_timeout_s
                log.info("%s: idle for %gs, reaped", self.session_id, limit)
                await self.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                                 f"session sent nothing for {limit:g} s (the env server's "
                                 "--idle-timeout) and was ended; send 'ping' to keep an open "
                                 "session alive while waiting")
            if request is grpc.aio.EOF:
                return
            kind = request.WhichOneof("request")
            if kind is None:
                await self.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                 "empty SessionRequest; set one of open, reset, step, render, "
                                 "ping, close")
            if kind != "open" and self.game is None:
                await self.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                 f"'{kind}' before 'open': the first request must be open")
            handler = getattr(self, f"_on_{kind}")
            try:
                response = await handler(getattr(request, kind))
            except CodecError as exc:  # its message quotes no more than a few numbers
                await self.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
            except Exception as exc:
                if isinstance(exc, grpc.aio.AbortError):
                    raise
                log.exception("%s: game crashed", self.session_id)
                await self.abort(grpc.StatusCode.INTERNAL,
                                 f"the game crashed: {type(exc).__name__}: {exc}")
            await self.context.write(response)
            if kind == "close":
                return

    # ---- handlers -----------------------------------------------------------------------

    async def _on_open(self, req: env_pb.OpenRequest) -> env_pb.SessionResponse:
        if self.game is not None:
            await self.abort(grpc.StatusCode.FAILED_PRECONDITION,
                             "'open' sent twice; use 'reset' to restart the game")
        if self.server.drain.draining:
            await self.abort(grpc.StatusCode.UNAVAILABLE,
                             "server is draining and accepts no new sessions")
        if not req.task:
            await self.abort(grpc.StatusCode.INVALID_ARGUMENT, "OpenRequest.task is empty")
        if req.max_steps < 0:
            await self.abort(grpc.StatusCode.INVALID_ARGUMENT,
                             f"max_steps must be >= 0 (0 = task default), got {req.max_steps}")
        if len(req.task) > MAX_TASK_CHARS:  # before any work: no task is named so long
            await self.abort(grpc.StatusCode.NOT_FOUND,
                             f"unknown task of {len(req.task):,} characters: task names have "
                             f"at most {MAX_TASK_CHARS} (ListTasks lists them)")
        try:
            _check_counts(req)  # counts alone, before the game pool is asked for anything
        except OptionError as exc:
            await self.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        self.peer = peer_of(self.context)
        refusal = self.server._claim_slot(self.peer)
        if refusal:
            await self.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refusal)
        self._slot = True
        self._tracked = self.server.drain.track()
        self._tracked.__enter__()
        try:
            # one hop to the game pool for the whole open: a bare task name lists the
            # families' tasks (a first listing can take a second), Struct decoding is linear in
            # the request (a hostile one is large), and opening and resetting run game code
            opened = await self.server._run(_open_episode, self.server, req)
        except TaskNotFoundError as exc:
            await self.abort(grpc.StatusCode.NOT_FOUND, str(exc))
        except TaskUnavailableError as exc:
            await self.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        except (OptionError, ServerFileError) as exc:  # GameOptionError is an OptionError
            await self.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        family, task, self.game, start = opened.family, opened.task, opened.game, opened.start
        self.family_name = family.name
        self.obs = req.observation
        # a frame to encode per step is work for the pool, whatever the family
        self.inline_steps = (family.inline_steps and not self.obs.include_image
                             and family.name not in self.server.process_families)
        self._start_episode(start)
        log.debug("%s: opened %s:%s seed=%d", self.session_id, family.name, task, req.seed)
        return env_pb.SessionResponse(opened=env_pb.OpenResponse(
            session_id=self.session_id, family=family.name, task=task,
            agents=start.agents, next_agents=self.next_agents, max_steps=start.max_steps,
            metrics=struct_from_dict(opened.metrics), progression=progression_of(opened.metrics),
            idle_timeout_s=self.server.idle_timeout_s))

    def _start_episode(self, start: _Start) -> None:
        self.next_agents = list(start.first_agents)
        self.returns = dict.fromkeys(start.agent_ids, 0.0)
        self.steps = 0
        self.ended = None

    async def _on_reset(self, req: env_pb.ResetRequest) -> env_pb.SessionResponse:
        assert self.game is not None
        start = await self.server._run(_reset_game, self.game, req.seed or None, self.obs)
        self._start_episode(start)
        return env_pb.SessionResponse(reset=env_pb.ResetResponse(
            agents=start.agents, next_agents=self.next_agents, max_steps=start.max_steps))

    async def _on_step(self, req: env_pb.StepRequest) -> env_pb.SessionResponse:
        assert self.game is not None
        if self.ended is not None:
            await self.abort(grpc.StatusCode.FAILED_PRECONDITION,
                             "'step' after the episode ended; send 'reset' or 'close'")
        actions: dict[str, SubmittedAction] = {
            agent_id: self._submitted(agent_id, action)
            for agent_id, action in req.actions.items()}
        problem = _check_turn(actions, self.next_agents)
        if problem:
            return env_pb.SessionResponse(step=env_pb.StepResponse(
                next_agents=self.next_agents, step=self.steps,
                error=types_pb2.Status(code=grpc.StatusCode.INVALID_ARGUMENT.value[0],
                                       message=bounded_message(problem))))
        if self.inline_steps:
            result, observations = _step_game(self.game, actions, self.steps + 1, self.obs)
        elif isinstance(self.game, ProcessGame):  # the worker steps; no pool thread waits
            result = await self.game.step_async(actions)
            convert = functools.partial(_observations, result, self.steps + 1, self.obs)
            observations = (await self.server._run(convert) if self.obs.include_image
                            else convert())
        else:
            result, observations = await self.server._run(_step_game, self.game, actions,
                                                          self.steps + 1, self.obs)
        self.steps += 1
        self.server.metrics.step(self.family_name)
        self.next_agents = list(result.next_agents)
        # filled in place: building each part apart and copying it in took 26.5 us for a
        # MiniHack step's response, against 16.4
        answer = env_pb.SessionResponse()
        response = answer.step
        response.next_agents.extend(self.next_agents)
        response.step = self.steps
        response.metrics.CopyFrom(struct_from_dict(result.metrics))
        response.progression = progression_of(result.metrics)
        any_terminated = False
        for agent_id, tr in result.transitions.items():
            self.returns[agent_id] = self.returns.get(agent_id, 0.0) + float(tr.reward)
            any_terminated |= tr.terminated
            agent = response.agents[agent_id]
            agent.observation.CopyFrom(observations[agent_id])
            agent.reward = float(tr.reward)
            agent.terminated = tr.terminated
            agent.truncated = tr.truncated
            verdict = agent.action_result
            verdict.valid = tr.valid
            verdict.applied_action.text = tr.applied_action
            verdict.feedback = tr.feedback
        if result.done:
            reason = (types_pb2.END_REASON_TERMINATED if any_terminated
                      else types_pb2.END_REASON_TRUNCATED)
            self.ended = types_pb2.EpisodeEnd(reason=reason, returns=self.returns,
                                              metrics=response.metrics,
                                              progression=response.progression,
                                              num_steps=self.steps)
            response.episode_end.CopyFrom(self.ended)
        return answer

    def _submitted(self, agent_id: str, action: types_pb2.Action) -> SubmittedAction:
        """The game's view of one wire Action; a text over ``max_action_chars`` becomes
        ``OVERSIZE_ACTION`` (judged invalid by the game)."""
        if action.WhichOneof("kind") == "text" and len(action.text) > self.server.max_action_chars:
            log.info("%s: %s sent a %d-character action text (cap %d): judged invalid",
                     self.session_id, agent_id, len(action.text), self.server.max_action_chars)
            return OVERSIZE_ACTION
        return submitted_action(action)

    async def _on_render(self, req: env_pb.RenderRequest) -> env_pb.SessionResponse:
        assert self.game is not None
        encoding = req.encoding or types_pb2.IMAGE_ENCODING_PNG
        image = await self.server._run(_render_game, self.game, encoding)
        return env_pb.SessionResponse(render=env_pb.RenderResponse(image=image))

    async def _on_ping(self, req: env_pb.PingRequest) -> env_pb.SessionResponse:
        """Nothing to do: reading the request already restarted the idle clock."""
        return env_pb.SessionResponse(pong=env_pb.PingResponse())

    async def _on_close(self, req: env_pb.CloseRequest) -> env_pb.SessionResponse:
        assert self.game is not None
        end = self.ended
        if end is None:
            final = await self.server._run(self.game.metrics)  # a worker's game: a pipe call
            end = types_pb2.EpisodeEnd(reason=types_pb2.END_REASON_CANCELLED,
                                       returns=self.returns, num_steps=self.steps,
                                       metrics=struct_from_dict(final),
                                       progression=progression_of(final))
        return env_pb.SessionResponse(closed=env_pb.CloseResponse(episode_end=end))

    def close_game(self) -> None:
        """Close the game (blocking: runs on the game thread pool)."""
        if self.game is not None:
            game, self.game = self.game, None
            try:
                game.close()
            except Exception:
                log.exception("%s: error while closing the game", self.session_id)

    def release(self) -> None:
        """Give back the capacity slot and the drain tracking (on the event loop)."""
        if self._slot:
            self._slot = False
            self.server._release_slot(self.peer)
        if self._tracked is not None:
            tracked, self._tracked = self._tracked, None
            tracked.__exit__(None, None, None)


@dataclass
class _Start:
    """A game just reset, as a session needs it: each agent's start as sent, the agents that
    act first, every agent id, and the step cap. Read on the game pool: for a game in a
    worker process each is a call over its pipe."""

    agents: dict[str, env_pb.AgentStart]
    first_agents: list[str]
    agent_ids: list[str]
    max_steps: int


@dataclass
class _Opened:
    """What ``_open_episode`` made: the family and bare task, the game, its start and its
    metrics before the first step."""

    family: Family
    task: str
    game: Game
    start: _Start
    metrics: dict[str, Any]


def _open_episode(server: EnvServicer, req: env_pb.OpenRequest) -> _Opened:
    """Resolve ``req.task``, decode its options and check them against the family's schema
    (server files resolved by ``server.files``) before anything is constructed, then open the
    game, reset it and read its start and metrics (blocking: the session runs it on the game
    pool, in one hop). Raises TaskNotFoundError, TaskUnavailableError, OptionError (a key or
    value the schema refuses; GameOptionError from the family),
    ServerFileError, CodecError (options with no JSON form), or what the game raises; a game
    that raises once opened is closed first."""
    options = _game_options(req)
    family, task = server.resolve(req.task)
    options = _with_server_files(family, family.check_options(task, options), server.files)
    game = server.open_game(family, task, options)
    try:
        return _Opened(family, task, game, _reset_game(game, None, req.observation),
                       game.metrics())
    except BaseException:
        with contextlib.suppress(Exception):
            game.close()
        raise


def _reset_game(game: Game, seed: int | None, obs: env_pb.ObservationOptions) -> _Start:
    """``game.reset(seed)`` and the start a session needs (frames encoded here, so callers run
    it on the game pool)."""
    agents = start_to_proto(game, game.reset(seed), obs)
    return _Start(agents, list(game.first_agents()), list(game.agents), game.max_steps)


def _step_game(game: Game, actions: dict[str, SubmittedAction], step: int,
               obs: env_pb.ObservationOptions,
               ) -> tuple[StepResult, dict[str, types_pb2.Observation]]:
    """``game.step(actions)`` and each transition's observation as sent, for step number
    ``step`` (frames encoded here, so callers run it on the game pool)."""
    result = game.step(actions)
    return result, _observations(result, step, obs)


def _observations(result: StepResult, step: int, obs: env_pb.ObservationOptions,
                  ) -> dict[str, types_pb2.Observation]:
    """Each transition's observation as sent for step number ``step`` (frames encoded when
    ``obs`` asks: CPU-heavy, so callers with images run it on the game pool)."""
    return {agent_id: to_obs(tr.view, step=step, obs=obs)
            for agent_id, tr in result.transitions.items()}


def _render_game(game: Game, encoding: Any) -> types_pb2.Image:
    """``game.render()`` encoded as ``encoding`` (on the game pool)."""
    return image_from_rgb(game.render(), encoding)


def _with_server_files(family: Family, options: GameOptions, files: ServerFiles) -> GameOptions:
    """``options`` with each option the family's schema marks ``server_path`` resolved by
    ``files`` (a name the server offers, never a client's path). Raises ServerFileError."""
    schema, _ = family.option_schema()
    named = {key: spec for key, spec in schema.items()
             if spec.kind == "server_path" and key in options.kwargs}
    if not named:
        return options
    kwargs = dict(options.kwargs)
    for key, spec in named.items():
        kwargs[key] = files.resolve(spec.path_kind, kwargs[key], f"options.{key}")
    return dataclasses.replace(options, kwargs=kwargs)


def _check_counts(req: env_pb.OpenRequest) -> None:
    """Refuse more than ``MAX_OPTION_KEYS`` option keys (of the options or of one seat) or
    seats, from their counts alone (constant time: a hostile Open may carry millions). Raises
    OptionError."""
    check_key_count(len(req.options.fields))
    check_key_count(len(req.players), "players")
    for index, player in enumerate(req.players):
        check_key_count(len(player.options.fields), f"players[{index}].options")


def _game_options(req: env_pb.OpenRequest) -> GameOptions:
    """The game's options from an OpenRequest (whose counts ``_check_counts`` passed).
    Raises CodecError (INVALID_ARGUMENT) for a Struct with no JSON form."""
    return GameOptions(
        seed=req.seed,
        players=[PlayerSpec(p.agent_id, p.role, _struct_arg(p.options, "players.options"))
                 for p in req.players],
        oracle=req.oracle,
        render_image=req.observation.include_image,
        include_tensors=req.observation.include_tensors,
        # ObservationOptions.feedback_on_invalid_action is accepted and ignored: the feedback
        # sentence travels only in ActionResult.feedback, never in the observation text.
        max_steps=req.max_steps or None,
        kwargs=_struct_arg(req.options, "options"),
    )


def _struct_arg(struct: Any, name: str) -> dict[str, Any]:
    """A request's Struct field as a dict. Raises CodecError (INVALID_ARGUMENT) for a Struct
    that has no JSON form, e.g. a number that is infinite or NaN."""
    try:
        return dict_from_struct(struct)
    except ValueError as exc:
        raise CodecError(f"{name}: {exc}") from None


def _check_turn(actions: dict[str, SubmittedAction], due: list[str]) -> str:
    """'' when ``actions`` has exactly the agents in ``due``; else what is wrong (the agent ids
    quoted with ``quote_names``: at most 10 of each list, each cut)."""
    due_set = set(due)
    extra = sorted(a for a in actions if a not in due_set)
    missing = [a for a in due if a not in actions]
    if extra:
        return (f"actions for {len(extra)} agent(s) not due to act: "
                f"{quote_names(extra, 10)}; due now: {quote_names(due, 10)}")
    if missing:
        return f"missing actions for agents due to act: {quote_names(missing, 10)}"
    return ""


def _versions(families: Any) -> types_pb2.VersionInfo:
    components: dict[str, str] = {}
    for family in families:
        for pkg in getattr(family, "packages", ()):
            try:
                components[pkg] = metadata.version(pkg)
            except metadata.PackageNotFoundError:
                components[pkg] = "not installed"
    for pkg in ("grpcio", "protobuf"):
        components[pkg] = metadata.version(pkg)
    return types_pb2.VersionInfo(api_version=moria.API_VERSION,
                                 package_version=moria.__version__, components=components)

