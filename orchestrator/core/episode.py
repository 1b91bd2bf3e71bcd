"""One episode, as data flows: open an env Session, open one Play
stream per agent, alternate Observe/Act and Step until the env reports the end, then close both.

Infrastructure faults (an env or policy server lost, draining, or crashed) raise
``InfrastructureFault`` so the scheduler can re-queue the episode. Agent mistakes never do: an
invalid action is an in-band result, and a model that cannot answer ends the episode with
``agent_error``.

Servers end a stream that stays silent for their idle timeout; while the episode waits on one
server (a model thinking for minutes, the env stepping, another seat's turn, the llm-worker's
next command) it pings its other streams (``keep_alive``) at ``PING_FRACTION`` of the timeout
each server announced.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import math
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import grpc
from google.protobuf.struct_pb2 import Struct

from moria.clients import (
    EnvClient,
    EnvSession,
    KeptAlive,
    PlayStream,
    PolicyClient,
    StreamClosedError,
    keep_alive,
)
from moria.codecs import dict_from_struct, struct_from_dict
from moria.common.v1 import types_pb2
from moria.config import NON_MODEL_AGENT_TYPES, AgentConfig, ClientConfig
from moria.env.v1 import env_service_pb2 as env_pb
from moria.observations import observation_text
from moria.policy.v1 import policy_service_pb2 as pol_pb
from moria.policy_config import agent_settings, client_settings
from moria.prompting import protocol_dict
from moria.quoting import cut
from moria.records import MAX_RECORDED_TEXT_CHARS, EndReason, EpisodeRecord, StepRecord
from orchestrator.core.gate import RunGate
from orchestrator.report.accounting import add_usage
from orchestrator.store.frames import FrameRecorder
from orchestrator.store.protocol_record import saved_check

_END_REASONS: dict[Any, EndReason] = {
    types_pb2.END_REASON_TERMINATED: "terminated",
    types_pb2.END_REASON_TRUNCATED: "truncated",
    types_pb2.END_REASON_AGENT_ERROR: "agent_error",
    types_pb2.END_REASON_ENV_ERROR: "env_error",
    types_pb2.END_REASON_CANCELLED: "cancelled",
    types_pb2.END_REASON_BUDGET_EXHAUSTED: "budget_exhausted",
}

#: Status codes that mean "the server, not the episode, is the problem".
_INFRA_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL,
                          grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.DEADLINE_EXCEEDED,
                          grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN})


log = logging.getLogger("moria.episode")

class InfrastructureFault(RuntimeError):
    """An env or policy server failed under the episode; the episode may be re-queued.

    ``server``: which one (``"env"``, ``"policy"``; "" when unknown, e.g. a missed deadline);
    ``code``: the gRPC status it answered with, when it answered.
    """

    def __init__(self, message: str, *, server: str = "",
                 code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.server = server
        self.code = code


class EpisodeSetupError(RuntimeError):
    """The episode cannot start for a reason a retry will not fix (unknown task, bad config)."""


class PlayerSetupError(EpisodeSetupError):
    """A policy rejected its seat at Begin (bad agent config, a player that cannot play this
    game); recorded as ``agent_error``."""


@dataclass
class EpisodePlan:
    """One planned episode: where it runs and with which seed (what it is played with: its
    ``EpisodeConfig``).

    ``seat_policy_targets`` sends chosen seats to another policy server than
    ``policy_target`` (the llm-worker seats its human player on its own in-process server);
    ``episode_id`` names the episode in Begin (default ``<run_id>/<env>/<task>/<index>``).
    """

    run_id: str
    env: str
    task: str
    episode_index: int
    seed: int
    env_target: str
    policy_target: str
    versions: dict[str, str] = field(default_factory=dict)
    seat_policy_targets: dict[str, str] = field(default_factory=dict)
    episode_id: str = ""

    @property
    def begin_id(self) -> str:
        """The episode id sent to every seat's player."""
        return self.episode_id or f"{self.run_id}/{self.env}/{self.task}/{self.episode_index}"


@dataclass(frozen=True)
class SeatConfig:
    """One ``players.<agent_id>`` entry of the run spec as an episode uses it: the ``agent``
    and ``client`` sections that play the seat (the run's own where the entry sets none), its
    ``role`` and the seat options the env reads (``env_options``: coordination level,
    observation mode; only those set), and ``record``, the entry as the episode record's
    ``players`` keeps it (JSON, unset fields left out)."""

    agent: AgentConfig
    client: ClientConfig
    role: str = ""
    env_options: dict[str, Any] = field(default_factory=dict)
    record: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EpisodeConfig:
    """What one episode is played with: the run spec's settings resolved for this episode
    alone, built once per episode on the plan side
    (``orchestrator.core.episode_config.episode_config``); the episode reads nothing else of
    the run. Never changed by the episode, so a re-queued episode plays with the same one.

    Seats: ``agent`` and ``client`` are the run's own sections (every seat not in
    ``players`` plays with them; the record keeps them as ``agent_config`` and
    ``client_config``); ``players`` the ``players`` entries by agent id, in the spec's order.

    Opening the game: ``env_options`` the family options (``<env>_kwargs``, plus
    ``balrog_source`` under ``agent.protocol=balrog``); ``include_image`` whether some seat
    keeps images (``agent.max_image_history`` > 0), ``include_tensors`` whether some seat plays
    from tensors (``TENSOR_AGENT_TYPES``); ``oracle`` whether the env sends expert hints (an
    oracle seat, or ``eval.oracle_hints``); ``max_steps`` the step cap (0: the env's own).

    Playing: ``step_timeout_s`` each step's deadline (``eval.step_timeout_s``, seconds);
    ``episode_timeout_s`` the whole episode's (seconds; None: no limit);
    ``feedback_on_invalid_action`` whether a player is shown the env's feedback on its
    invalid action; ``save_trajectories`` whether the record keeps every step;
    ``save_prompts`` whether the players record their prompts; ``demonstrations`` what every
    seat's Begin carries (few_shot; [] otherwise).
    """

    agent: AgentConfig
    client: ClientConfig
    players: dict[str, SeatConfig]
    env_options: dict[str, Any]
    include_image: bool
    include_tensors: bool
    oracle: bool
    max_steps: int
    step_timeout_s: float
    episode_timeout_s: float | None
    feedback_on_invalid_action: bool
    save_trajectories: bool
    save_prompts: bool
    demonstrations: list[pol_pb.Demonstration]

    def seat(self, agent_id: str) -> tuple[AgentConfig, ClientConfig]:
        """The agent and client sections that play ``agent_id`` (its ``players`` entry, else
        the run's own)."""
        player = self.players.get(agent_id)
        if player is None:
            return self.agent, self.client
        return player.agent, player.client


@dataclass
class Seat:
    """One agent of the episode and the Play stream of the player on it. ``observation`` is
    what the agent sees now; ``last_result`` the env's verdict on its last action; ``label``
    who plays it (from the policy's Ready: "scripted", "naive local/qwen...")."""

    agent_id: str
    stream: PlayStream
    start: env_pb.AgentStart
    observation: types_pb2.Observation
    last_result: types_pb2.ActionResult | None = None
    uses_model: bool = True
    label: str = ""
    idle_timeout_s: float = 0.0
    protocol: dict[str, Any] = field(default_factory=dict)
    #: why the run's cost cap refused this seat's last model call ("" when it did not)
    budget_refusal: str = ""


@dataclass
class Turn:
    """One seat's move in one env step: the observation it acted on, the policy's Act and,
    once the env applied it, the seat's transition (None when the step never happened because
    a player failed), the feedback on its action its player is shown next turn, and the env's
    progression once the step was applied."""

    seat: Seat
    observation: types_pb2.Observation
    act: pol_pb.Act
    step: int
    result: env_pb.AgentStep | None = None
    feedback: str = ""
    progression: float | None = None


class EpisodeDriver:
    """One episode, advanced one env step at a time.

    ``start`` opens the game and begins every seat's player; each ``step`` asks the seats in
    ``next_agents`` for their actions (concurrently; model calls take a ``model_slots`` slot),
    applies them in one env step, and gives every seat the new observation (turn-based games:
    the waiting player's board changed too); ``finish`` ends the players and closes the session
    (always call it, also on errors). ``run_episode`` loops it to the end; the llm-worker
    advances it one protocol command at a time.

    State after each step: ``num_steps``, ``next_agents``, ``metrics`` (the env's, final once
    done), ``progression`` (the env's typed figure in [0, 1], final once done), ``returns``
    (reward summed per agent, waiting seats included), ``last_step`` (the env's StepResponse),
    and ``end_reason`` (None while running; ``terminated``, ``truncated``
    or ``agent_error``, with ``error`` saying which player failed and why).

    Raises (from ``start``/``step``): InfrastructureFault (a server is lost: re-queue),
    EpisodeSetupError / PlayerSetupError (the env or a player rejects the setup).
    """

    def __init__(self, plan: EpisodePlan, config: EpisodeConfig, *,
                 model_slots: asyncio.Semaphore | None = None,
                 gate: RunGate | None = None) -> None:
        self.plan = plan
        self.config = config
        self.model_slots = model_slots
        self.gate = gate
        self.session = EnvClient(plan.env_target).session()
        self.seats: list[Seat] = []
        self.next_agents: list[str] = []
        self.num_steps = 0
        #: the newest metrics as sent (decoded only when read: ``metrics``)
        self._metrics = Struct()
        self.progression = 0.0
        self.returns: dict[str, float] = {}
        self.end_reason: EndReason | None = None
        self.error = ""
        self.last_step: env_pb.StepResponse | None = None
        self._kept_alive: list[KeptAlive] = []

    @property
    def metrics(self) -> dict[str, Any]:
        """The episode's newest metrics (the env's last Struct, decoded on each read)."""
        return dict_from_struct(self._metrics)

    @property
    def done(self) -> bool:
        """True once the episode has ended (or a player failed)."""
        return self.end_reason is not None

    def seat(self, agent_id: str) -> Seat:
        """The seat of ``agent_id``. Raises KeyError for an agent not in the game."""
        for seat in self.seats:
            if seat.agent_id == agent_id:
                return seat
        raise KeyError(agent_id)

    async def start(self) -> env_pb.OpenResponse:
        """Open the game and begin every seat's player (within one step deadline); returns the
        env's OpenResponse. From then on, until ``finish``, every stream that waits is pinged
        at ``PING_FRACTION`` of its server's idle timeout."""
        deadline = self.config.step_timeout_s
        try:
            async with asyncio.timeout(deadline):
                opened = await open_env(self.session, self.plan, self.config)
                self._keep_alive(self.session, opened.idle_timeout_s)
                await _begin_policies(opened, self.plan, self.config, self.seats,
                                      reserve_calls=self.gate is not None)
                for seat in self.seats:
                    self._keep_alive(seat.stream, seat.idle_timeout_s)
        except TimeoutError:
            raise InfrastructureFault(
                f"opening the game missed the step deadline of {deadline:g} s") from None
        self.next_agents = list(opened.next_agents)
        self._metrics = opened.metrics
        self.progression = opened.progression
        self.returns = dict.fromkeys(opened.agents, 0.0)
        return opened

    async def step(self) -> list[Turn]:
        """Play one env step; returns the acting seats' turns (in seat order).

        A player that answers with an error ends the episode (``agent_error``, ``error`` names
        the seat) before the env steps; the turns then have no result. Raises RuntimeError when
        the episode is over.
        """
        if self.done:
            raise RuntimeError("the episode is over")
        deadline = self.config.step_timeout_s
        try:
            async with asyncio.timeout(deadline):
                return await self._step()
        except TimeoutError:
            raise InfrastructureFault(
                f"step {self.num_steps} missed its deadline of {deadline:g} s "
                "(eval.step_timeout_s)") from None

    async def _step(self) -> list[Turn]:
        acting = [s for s in self.seats if s.agent_id in self.next_agents]
        acts = await asyncio.gather(*(_decide(s, self.num_steps, self.model_slots, self.gate)
                                      for s in acting))
        turns = [Turn(seat, seat.observation, act, self.num_steps)
                 for seat, act in zip(acting, acts, strict=True)]
        failed = next((t for t in turns if t.act.error.code != 0), None)
        if failed is not None:
            refusal = failed.seat.budget_refusal
            self.end_reason = "budget_exhausted" if refusal else "agent_error"
            self.error = refusal or failed.act.error.message
            return turns
        response = await call_server(self.session.step,
                               {t.seat.agent_id: t.act.action for t in turns}, server="env")
        if response.error.code != 0:
            raise InfrastructureFault(f"env rejected the step: {response.error.message}")
        for turn in turns:
            turn.result = response.agents[turn.seat.agent_id]
            turn.seat.last_result = policy_action_result(
                turn.result.action_result, self.config.feedback_on_invalid_action)
            turn.feedback = turn.seat.last_result.feedback
        for seat in self.seats:
            if seat.agent_id in response.agents:
                result = response.agents[seat.agent_id]
                seat.observation = result.observation
                self.returns[seat.agent_id] = (self.returns.get(seat.agent_id, 0.0)
                                               + result.reward)
        self.last_step = response
        self.num_steps = int(response.step)
        self._metrics = response.metrics
        self.progression = response.progression
        self.next_agents = list(response.next_agents)
        if response.HasField("episode_end"):
            self.end_reason = _END_REASONS.get(response.episode_end.reason, "truncated")
            if response.episode_end.metrics.fields:
                self._metrics = response.episode_end.metrics
            self.progression = response.episode_end.progression
            self.error = response.episode_end.detail
        elif not self.next_agents:
            self.end_reason = "truncated"
        for turn in turns:
            turn.progression = min(1.0, max(0.0, self.progression))
        return turns

    def _keep_alive(self, owner: EnvSession | PlayStream, idle_timeout_s: float) -> None:
        kept = keep_alive(owner, idle_timeout_s)
        if kept is not None:
            self._kept_alive.append(kept)

    async def finish(self, end_reason: str | None = None) -> None:
        """End every player's stream and close the env session (errors ignored: the servers
        may be gone). ``end_reason`` overrides the driver's (e.g. ``cancelled``)."""
        kept, self._kept_alive = self._kept_alive, []
        for stream in kept:
            await stream.stop()
        await _finish(self.session, self.seats, end_reason or self.end_reason or "cancelled",
                      self.metrics, self.progression, self.num_steps)


@dataclass
class _Collected:
    """What ``run_episode`` keeps of an episode's turns: the trajectory (when
    ``keep_steps``), the raw answers the env judged invalid, applied-action counts, token usage
    (total and per model) and the prompts of audited calls."""

    keep_steps: bool
    steps: list[StepRecord] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    applied: Counter[str] = field(default_factory=Counter)
    usage: Counter[str] = field(default_factory=Counter)
    by_model: dict[str, dict[str, float]] = field(default_factory=dict)
    prompts: list[dict[str, Any]] = field(default_factory=list)

    def add(self, turn: Turn) -> StepRecord | None:
        """Count one turn; returns its step record (None when the env never applied it)."""
        _account(self.usage, self.by_model, turn.act)
        if turn.act.prompt_json:
            self.prompts.append({"step": turn.step, "agent_id": turn.seat.agent_id,
                                 "model": turn.act.model,
                                 "prompt": json.loads(turn.act.prompt_json)})
        if turn.result is None:
            return None
        record = _step_record(turn)
        if not record.valid:
            self.failed.append(failed_candidate(turn))
        self.applied[record.action] += 1
        if self.keep_steps:
            self.steps.append(record)
        return record


#: Awaited after each agent turn of ``run_episode`` with the episode's plan and the turn.
StepCallback = Callable[["EpisodePlan", StepRecord], Awaitable[None]]
#: Awaited once the game is open and every seat's player has begun, with the episode's plan
#: and the env's OpenResponse (each agent's instruction, action space and first observation).
StartCallback = Callable[["EpisodePlan", env_pb.OpenResponse], Awaitable[None]]


async def run_episode(plan: EpisodePlan, config: EpisodeConfig, *,
                      model_slots: asyncio.Semaphore | None = None,
                      on_step: StepCallback | None = None,
                      on_start: StartCallback | None = None,
                      frames: FrameRecorder | None = None,
                      gate: RunGate | None = None) -> EpisodeRecord:
    """Play one episode of ``plan`` with ``config`` to its end and return its record.

    ``model_slots`` bounds in-flight model calls on the policy endpoint; ``await on_step(plan,
    record)`` follows each agent turn (the runner's ``step`` event); ``await on_start(plan,
    opened)`` follows the start, before the first turn. An exception a callback raises ends
    the episode (the servers are told ``cancelled``) and propagates. ``frames``, when given,
    gets the env's full-state frame before the first step and after every step
    (``eval.save_images``; the record names its folder). Each step has
    ``config.step_timeout_s`` (``eval.step_timeout_s``; past it: InfrastructureFault); the
    whole episode has ``config.episode_timeout_s`` (``eval.episode_timeout_s``; past it: the
    record ends as ``env_error`` saying so).
    ``gate``: the run's rate limits and cost cap (``orchestrator.core.gate``; None: neither);
    a model call the cap refuses ends the episode as ``budget_exhausted``.
    Raises InfrastructureFault (re-queue) or EpisodeSetupError (give up).
    """
    started_wall, started = datetime.now(UTC), time.perf_counter()
    driver = EpisodeDriver(plan, config, model_slots=model_slots, gate=gate)
    kept = _Collected(keep_steps=config.save_trajectories)
    ending: str | None = None
    late = ""
    try:
        async with asyncio.timeout(config.episode_timeout_s):
            opened = await driver.start()
            if frames is not None:
                await frames.start()
                await _save_frame(driver, frames)
            if on_start is not None:
                await on_start(plan, opened)
            while not driver.done:
                stepped = driver.num_steps
                for turn in await driver.step():
                    record = kept.add(turn)
                    if record is not None and on_step is not None:
                        await on_step(plan, record)
                if frames is not None and driver.num_steps != stepped:
                    await _save_frame(driver, frames)
    except TimeoutError:
        ending = "cancelled"
        late = (f"the episode missed its deadline of {config.episode_timeout_s:g} s "
                f"(eval.episode_timeout_s) after {driver.num_steps} steps")
    except BaseException:
        ending = "cancelled"  # what the servers are told; the caller decides what it was
        raise
    finally:
        await driver.finish(ending)
    end_reason: EndReason = "env_error" if late else (driver.end_reason or "truncated")
    metrics = driver.metrics
    progression = 0.0 if late else driver.progression
    usage = kept.usage
    # reads the saved protocol-check file under protocol=balrog: off the event loop
    protocol = await asyncio.to_thread(protocol_record, driver.seats, plan.env,
                                       config.agent.type)
    return EpisodeRecord(
        run_id=plan.run_id, env=plan.env, task=plan.task, episode_index=plan.episode_index,
        seed=plan.seed, end_reason=end_reason,
        error=late or (driver.error if end_reason in ("agent_error", "budget_exhausted")
                       else ""),
        done=end_reason in ("terminated", "truncated"),
        episode_return=math.fsum(driver.returns.values()), num_steps=driver.num_steps,
        progression=min(1.0, max(0.0, progression)), stats=metrics,
        failed_candidates=kept.failed, action_frequency=dict(kept.applied),
        input_tokens=usage["input_tokens"], output_tokens=usage["output_tokens"],
        cached_input_tokens=usage["cached_input_tokens"],
        reasoning_tokens=usage["reasoning_tokens"], usage_by_model=kept.by_model,
        prompts=kept.prompts, agent_config=config.agent.model_dump(mode="json"),
        client_config=config.client.model_dump(mode="json"), versions=plan.versions,
        players=_seat_records(config, driver.seats), protocol=protocol,
        started_at=started_wall.isoformat(), ended_at=datetime.now(UTC).isoformat(),
        wall_time_s=time.perf_counter() - started, steps=kept.steps,
        frames=frames.folder.name if frames is not None else "",
        frame_count=frames.count if frames is not None else 0)


async def _save_frame(driver: EpisodeDriver, frames: FrameRecorder) -> None:
    """Render the game as it is now and save it as the frame after ``num_steps`` steps."""
    image = await call_server(driver.session.render, server="env")
    await frames.add(driver.num_steps, image)


def failed_candidate(turn: Turn) -> str:
    """What ``failed_candidates`` keeps of a turn the env judged invalid: under BALROG's
    protocol the answer the checkout's agent extracted (what BALROG's evaluator keeps), else
    the model's raw completion; cut to ``MAX_RECORDED_TEXT_CHARS`` as the step's texts are."""
    if turn.seat.protocol.get("name") == "balrog":
        return cut(turn.act.action.text, MAX_RECORDED_TEXT_CHARS)
    return cut(turn.act.raw_completion or turn.act.action.text, MAX_RECORDED_TEXT_CHARS)


def _step_record(turn: Turn) -> StepRecord:
    """The trajectory record of one applied turn (its texts cut to
    ``MAX_RECORDED_TEXT_CHARS`` each)."""
    act, result = turn.act, turn.result
    assert result is not None
    return StepRecord(
        step=turn.step, agent_id=turn.seat.agent_id,
        observation=cut(observation_text(turn.observation), MAX_RECORDED_TEXT_CHARS),
        raw_completion=cut(act.raw_completion or act.action.text, MAX_RECORDED_TEXT_CHARS),
        action=result.action_result.applied_action.text,
        valid=result.action_result.valid, feedback=turn.feedback,
        reasoning=cut(act.reasoning, MAX_RECORDED_TEXT_CHARS),
        reward=result.reward, done=result.terminated or result.truncated,
        progression=turn.progression,
        input_tokens=act.usage.input_tokens, output_tokens=act.usage.output_tokens,
        cached_input_tokens=act.usage.cached_input_tokens,
        reasoning_tokens=act.usage.reasoning_tokens, latency_s=max(0.0, act.latency_s),
        model=act.model, stop_reason=act.stop_reason, attempts=max(0, act.attempts),
        rate_limit_wait_s=max(0.0, act.rate_limit_wait_s))


def protocol_record(seats: list[Seat], env: str, strategy: str) -> dict[str, Any]:
    """The episode's ``protocol`` entry: the one seat's ``Ready.protocol`` (plus, under
    ``balrog``, the saved ``moria protocol-check`` record of its BALROG commit, ``env`` and
    ``strategy``: ``not checked`` when no check covered them); for several seats,
    ``{"name": <their common name or "mixed">}``. {} when no seat began."""
    if not seats:
        return {}
    if len(seats) > 1:
        names = {seat.protocol.get("name", "moria") for seat in seats}
        return {"name": names.pop() if len(names) == 1 else "mixed"}
    record = dict(seats[0].protocol)
    if record.get("name") == "balrog":
        record["protocol_check"] = saved_check(str(record.get("balrog_commit", "")), env,
                                               strategy)
    return record


def _seat_records(config: EpisodeConfig, seats: list[Seat]) -> dict[str, dict[str, Any]]:
    """Per seat of a multi-agent game: its run-spec ``players`` entry (when any) plus
    ``player``, who played it. Single-agent episodes keep only the spec's entries."""
    out = {agent_id: copy.deepcopy(player.record)
           for agent_id, player in config.players.items()}
    if len(seats) > 1:
        for seat in seats:
            out.setdefault(seat.agent_id, {})["player"] = seat.label
    return out


async def call_server(fn: Any, *args: Any, server: str) -> Any:
    """Call a stream method of the ``server`` ("env" or "policy"), mapping a lost server to
    InfrastructureFault and a refused request to EpisodeSetupError."""
    try:
        return await fn(*args)
    except StreamClosedError as exc:
        raise InfrastructureFault(str(exc), server=server) from exc
    except grpc.aio.AioRpcError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            # grpc.aio reports our own cancellation (Ctrl-C, run cancelled) as CANCELLED:
            # it must stay a cancellation, never become a re-queued fault.
            raise asyncio.CancelledError() from exc
        if exc.code() in _INFRA_CODES:
            raise InfrastructureFault(f"{exc.code().name}: {exc.details()}", server=server,
                                      code=exc.code()) from exc
        raise EpisodeSetupError(f"{exc.code().name}: {exc.details()}") from exc


async def open_env(session: EnvSession, plan: EpisodePlan, config: EpisodeConfig,
                   ) -> env_pb.OpenResponse:
    """Open ``plan``'s game on ``session`` with ``config``'s options (images, tensors, env
    options, oracle, step cap, the seats' roles and options).

    Raises:
        InfrastructureFault: the server is lost or draining (retry elsewhere/later).
        EpisodeSetupError: the server rejects the request (unknown task, bad option).
    """
    request = env_pb.OpenRequest(
        task=f"{plan.env}:{plan.task}", seed=plan.seed,
        observation=env_pb.ObservationOptions(
            include_image=config.include_image, include_tensors=config.include_tensors),
        options=struct_from_dict(config.env_options),
        oracle=config.oracle,
        max_steps=config.max_steps,
        players=[types_pb2.PlayerSpec(agent_id=agent_id, role=player.role,
                                      options=struct_from_dict(player.env_options))
                 for agent_id, player in sorted(config.players.items())])
    return await call_server(session.open, request, server="env")


@dataclass(frozen=True)
class Rehearsal:
    """What ``rehearse_start`` found: the env's OpenResponse and the episode's ``protocol``
    entry (``protocol_record``: the seat's prompting protocol, with the saved protocol-check
    result of its BALROG commit under ``balrog``)."""

    opened: env_pb.OpenResponse
    protocol: dict[str, Any]


async def rehearse_start(session: EnvSession, plan: EpisodePlan, config: EpisodeConfig,
                         ) -> Rehearsal:
    """Open ``plan``'s game on ``session`` and begin every seat's player, then end the players
    (the caller closes ``session``): a preflight that a bad env option or a player that cannot
    play this game (a scripted bot for another game, an RL checkpoint for another task, a
    human seat on a server without a console) stops a run before its first episode.

    Returns the Rehearsal. Raises EpisodeSetupError (the env rejects the options),
    PlayerSetupError (a policy rejects its seat) or InfrastructureFault (a server is lost).
    """
    opened = await open_env(session, plan, config)
    seats: list[Seat] = []
    try:
        await _begin_policies(opened, plan, config, seats)
    finally:
        end = types_pb2.EpisodeEnd(reason=types_pb2.END_REASON_CANCELLED)
        for seat in seats:
            with contextlib.suppress(Exception):
                await seat.stream.end(end)
    return Rehearsal(opened, await asyncio.to_thread(protocol_record, seats, plan.env,
                                                     config.agent.type))


async def _begin_policies(opened: env_pb.OpenResponse, plan: EpisodePlan,
                          config: EpisodeConfig, seats: list[Seat], *,
                          reserve_calls: bool = False) -> None:
    """Begin one Play stream per seat, appending each to ``seats`` as soon as it is open (so
    the caller ends the ones already begun when a later one fails). ``reserve_calls``: the
    seats that call a model reserve each call first (the run's gate: rate limits, cost cap).

    Raises PlayerSetupError when a policy rejects its seat's Begin."""
    demos = config.demonstrations
    for offset, (agent_id, start) in enumerate(sorted(opened.agents.items())):
        stream = PolicyClient(plan.seat_policy_targets.get(agent_id, plan.policy_target)).play()
        agent, client = config.seat(agent_id)
        settings = agent_settings(agent), client_settings(client)  # only the fields set
        uses_model = agent.type not in NON_MODEL_AGENT_TYPES
        seats.append(Seat(agent_id, stream, start, start.observation, uses_model=uses_model))
        try:
            ready = await call_server(stream.begin, pol_pb.Begin(
                episode_id=plan.begin_id,
                agent_id=agent_id, instruction=start.instruction,
                action_space=start.action_space, agent=settings[0], client=settings[1],
                seed=(plan.seed + offset) % 2**64, env_name=plan.env, task=plan.task,
                record_prompts=config.save_prompts, demonstrations=demos,
                observation=start.observation, reserve_calls=reserve_calls and uses_model),
                server="policy")
        except EpisodeSetupError as exc:
            raise PlayerSetupError(f"the player of {agent_id} ({agent.type}) cannot start: "
                                   f"{exc}") from None
        if ready.strategy != agent.type:  # e.g. a server older than the typed config fields
            raise PlayerSetupError(
                f"the policy server for {agent_id} answered as {ready.strategy!r}, not the "
                f"configured {agent.type!r}: it did not read the seat's config (a policy "
                "server older than this orchestrator?)")
        seats[-1].label = player_label(ready.strategy, ready.model)
        seats[-1].idle_timeout_s = ready.idle_timeout_s
        seats[-1].protocol = protocol_dict(ready.protocol)


def player_label(strategy: str, model: str) -> str:
    """A seat's player as shown in reports: the strategy, then the model when it calls one
    (``"scripted"``, ``"naive local/qwen2.5-0.5b-instruct"``)."""
    return strategy if not model or model == strategy else f"{strategy} {model}"


def policy_action_result(result: types_pb2.ActionResult, feedback_on_invalid_action: bool,
                         ) -> types_pb2.ActionResult:
    """The env's verdict on a seat's action as its player receives it (the next Observe's
    ``last_action_result``): as the env sent it with ``eval.feedback_on_invalid_action``, else
    with ``feedback`` cleared. The feedback travels only there (envs keep it out of the
    observation text), so this is what decides whether the player shows it."""
    if feedback_on_invalid_action or not result.feedback:
        return result
    shown = types_pb2.ActionResult()
    shown.CopyFrom(result)
    shown.ClearField("feedback")
    return shown


async def _decide(seat: Seat, step: int, model_slots: asyncio.Semaphore | None,
                  gate: RunGate | None = None) -> pol_pb.Act:
    observe = pol_pb.Observe(observation=seat.observation, step=step)
    if seat.last_result is not None:
        observe.last_action_result.CopyFrom(seat.last_result)
    if model_slots is None or not seat.uses_model:
        return await _observe(seat, observe, gate)
    async with model_slots:
        return await _observe(seat, observe, gate)


async def _observe(seat: Seat, observe: pol_pb.Observe, gate: RunGate | None,
                   ) -> pol_pb.Act:
    """One Observe -> Act of ``seat``, its model calls passed through ``gate`` (when given and
    the seat calls a model); a cost-cap refusal is kept in ``seat.budget_refusal``."""
    if gate is None or not seat.uses_model:
        return await call_server(seat.stream.observe, observe, server="policy")
    turn = gate.turn()
    try:
        act = await call_server(seat.stream.observe, observe, turn.grant, server="policy")
    except BaseException:
        turn.abandon()
        raise
    turn.settle(act)
    seat.budget_refusal = turn.refused if act.error.code else ""
    return act


async def _finish(session: EnvSession, seats: list[Seat], end_reason: str,
                  metrics: dict[str, Any], progression: float, num_steps: int) -> None:
    reason = next((k for k, v in _END_REASONS.items() if v == end_reason),
                  types_pb2.END_REASON_CANCELLED)
    end = types_pb2.EpisodeEnd(reason=reason, metrics=struct_from_dict(metrics),
                               progression=progression, num_steps=num_steps)
    for seat in seats:
        with contextlib.suppress(Exception):
            await seat.stream.end(end)
    with contextlib.suppress(Exception):
        await session.close()


def _account(total: Counter[str], by_model: dict[str, dict[str, float]], act: pol_pb.Act,
             ) -> None:
    """Add one act's tokens to the episode totals and to its model's counters (acts of
    non-LLM players, which make no model call, count only when they report tokens)."""
    counts = {
        "input_tokens": act.usage.input_tokens,
        "output_tokens": act.usage.output_tokens,
        "cached_input_tokens": act.usage.cached_input_tokens,
        "reasoning_tokens": act.usage.reasoning_tokens,
    }
    total.update(counts)
    if act.usage.calls or any(counts.values()):
        add_usage(by_model, act.model or "unknown",
                  {**counts, "calls": act.usage.calls, "latency_s": max(0.0, act.latency_s)})
