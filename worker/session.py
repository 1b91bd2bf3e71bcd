"""One worker game: an env Session plus one policy Play stream per seat, advanced a step at a
time (interactive ``reset``/``step``) or to the end (autonomous mode).

The worker's player sits on ``agent_id``; the other seats are played by ``--opponent``
players. A ``step`` plays the worker's turn, then the opponents' turns until it is the worker's
turn again (or the episode ends), so each ``step`` command is exactly one move of the worker's
player. Every agent turn is written to the steps telemetry; the episode record counts the
worker's player (reward, model calls, tokens). Every finished episode is also kept as an
``moria.records.EpisodeRecord`` (``GameSession.records``), from which
``GameSession.verdict`` decides the run's outcome (``orchestrator.report.outcome``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from moria.clients import EnvClient
from moria.common.v1 import types_pb2
from moria.env.v1 import env_service_pb2 as env_pb
from moria.records import EpisodeRecord
from orchestrator.core.episode import (
    EpisodeDriver,
    EpisodePlan,
    EpisodeSetupError,
    InfrastructureFault,
    Turn,
    observation_text,
    rehearse_start,
)
from orchestrator.core.episode_config import episode_config
from orchestrator.plan.spec import EnvsConfig, EvalConfig, PlayerConfig, RunSpec
from orchestrator.report.outcome import RunVerdict, verdict
from worker.config import WorkerSettings
from worker.human import QueueConsole
from worker.telemetry import WorkerTelemetry, episode_id


class CommandError(ValueError):
    """A command that cannot be carried out now (the message says why and what to do)."""


@dataclass
class Targets:
    """Where the players are: the env server, the policy server for every seat, and the human
    seat played in the worker's own process (``inproc:human``; None unless ``--agent-type
    human``)."""

    env: str
    policy: str
    human: str | None = None


@dataclass
class _Episode:
    """The worker's bookkeeping around one ``EpisodeDriver``: its own player's totals
    (``actions``: its moves the env applied; ``invalid_actions``: those the env judged invalid
    and replaced by its default action)."""

    index: int
    seed: int
    id: str
    driver: EpisodeDriver
    llm_calls: int = 0
    actions: int = 0
    invalid_actions: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    terminated: bool = False
    truncated: bool = False
    error: str = ""
    cancelled: bool = False
    recorded: bool = False
    started_wall: datetime = field(default_factory=lambda: datetime.now(UTC))
    started: float = field(default_factory=time.perf_counter)

    @property
    def done(self) -> bool:
        return self.cancelled or self.driver.done


def render_payload(image: types_pb2.Image) -> dict[str, Any]:
    """``{"rgb": base64 data, "encoding": "png"|"raw", "width", "height"}`` of a frame."""
    encoding = "raw" if image.encoding == types_pb2.IMAGE_ENCODING_RAW_RGB else "png"
    return {"rgb": base64.b64encode(image.data).decode("ascii"), "encoding": encoding,
            "width": image.width, "height": image.height}


class GameSession:
    """Plays episodes of ``settings.family``/``task`` with the worker's player on ``agent_id``,
    one ``orchestrator.core.episode.EpisodeDriver`` per episode (the loop ``moria eval`` runs).

    ``console``: the human console fed by ``step(move)`` (``--agent-type human`` only).
    Raises CommandError (bad order of commands, missing move, a server that fails),
    ``grpc.aio.AioRpcError`` or ``moria.clients.StreamClosedError`` (a server failed).
    """

    def __init__(self, settings: WorkerSettings, task: str, agent_id: str, targets: Targets,
                 telemetry: WorkerTelemetry, *, console: QueueConsole | None = None) -> None:
        self.settings = settings
        self.task = task
        self.agent_id = agent_id
        self.targets = targets
        self.telemetry = telemetry
        self.console = console
        self.human = settings.agent_type == "human"
        self.episodes_started = 0
        #: Every finished episode, in the order they ended (what the outcome is decided on).
        self.records: list[EpisodeRecord] = []
        #: The worker's own moves over the finished episodes: applied, and judged invalid.
        self.actions = 0
        self.invalid_actions = 0
        self._episode: _Episode | None = None
        self.spec = self.run_spec()

    @property
    def episode(self) -> _Episode | None:
        """The current (or last) episode, None before the first reset."""
        return self._episode

    def run_spec(self) -> RunSpec:
        """The run spec of the worker's games (``worker_run_spec``)."""
        return worker_run_spec(self.settings, self.agent_id)

    def planned(self) -> list[tuple[str, str, int]]:
        """The episode keys ``(env, task, index)`` of an autonomous run (``--num-episodes``)."""
        return [(self.settings.family, self.task, i) for i in range(self.settings.num_episodes)]

    def verdict(self, planned: Iterable[tuple[str, str, int]] | None = None,
                extra: Iterable[EpisodeRecord] = ()) -> RunVerdict:
        """The run's outcome over the finished episodes (plus ``extra`` records: episodes that
        failed without finishing) for the ``planned`` keys; None: the finished episodes are
        the plan (interactive mode)."""
        return verdict([*self.records, *extra], planned)

    def failed_record(self, error: str) -> EpisodeRecord | None:
        """An ``env_error`` record (for the verdict only, never written to the telemetry) of
        the current episode when a server failed under it before it finished; None when there
        is no current episode or it finished."""
        ep = self._episode
        if ep is None or ep.recorded:
            return None
        return EpisodeRecord(run_id=self.telemetry.run_id, env=self.settings.family,
                             task=self.task, episode_index=ep.index, seed=ep.seed,
                             end_reason="env_error", error=error,
                             num_steps=ep.driver.num_steps)

    def _plan(self, index: int, seed: int) -> EpisodePlan:
        human = ({self.agent_id: self.targets.human} if self.human and self.targets.human
                 else {})
        return EpisodePlan(run_id=self.telemetry.run_id, env=self.settings.family,
                           task=self.task, episode_index=index, seed=seed,
                           env_target=self.targets.env, policy_target=self.targets.policy,
                           seat_policy_targets=human,
                           episode_id=episode_id(self.telemetry.run_id, index))

    async def reset(self, seed: int | None = None) -> dict[str, Any]:
        """Start a new episode (ending an unfinished one as cancelled) and play the opponents'
        turns until the worker's player is to move. ``seed`` None: ``--seed`` + episode index.

        Returns the ``ready`` answer: observation, system_prompt, agent_id, episode_id,
        legal_actions, action_names, opponent_moves and, with images, render_payload.
        """
        await self.abandon()
        index = self.episodes_started
        self.episodes_started += 1
        seed = (self.settings.seed + index) % 2**64 if seed is None else seed
        try:
            config = await asyncio.to_thread(  # few_shot reads the demo file: off the loop
                episode_config, self.spec, self.settings.family, self.task, seed)
        except EpisodeSetupError as exc:
            raise CommandError(f"the episode could not start: {exc}") from None
        driver = EpisodeDriver(self._plan(index, seed), config)
        ep = _Episode(index=index, seed=seed, id=episode_id(self.telemetry.run_id, index),
                      driver=driver)
        self._episode = ep
        try:
            opened = await driver.start()
            if self.agent_id not in opened.agents:
                raise CommandError(f"agent id {self.agent_id!r} is not in this game; its "
                                   f"agents: {', '.join(sorted(opened.agents))}")
        except (EpisodeSetupError, InfrastructureFault) as exc:
            await self.abandon()
            raise CommandError(f"the episode could not start: {exc}") from None
        except BaseException:
            await self.abandon()
            raise
        moves = await self._advance_opponents(ep)
        mine = driver.seat(self.agent_id)
        ready: dict[str, Any] = {
            "type": "ready", "episode_id": ep.id, "episode_index": index, "seed": seed,
            "agent_id": self.agent_id, "observation": observation_text(mine.observation),
            "system_prompt": mine.start.instruction,
            "legal_actions": list(mine.observation.legal_actions),
            "action_names": [a.name for a in mine.start.action_space.actions],
            "opponent_moves": moves, "done": ep.done,
        }
        if self.settings.images:
            ready["render_payload"] = render_payload(await driver.session.render())
        if ep.done:  # the other seats ended the game before the worker's first move
            ready["episode_done"] = await self._finish(ep)
        return ready

    async def step(self, move: str | None = None) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Play the worker's next move (``move``: the human's typed move; required for
        ``--agent-type human``, refused otherwise), then the opponents' moves up to the worker's
        next turn.

        Returns (the ``step`` answer, the episode record when the episode ended, else None).
        Raises CommandError before a reset, after the episode ended, or for a bad ``move``.
        """
        ep = self._episode
        if ep is None:
            raise CommandError("no episode is running: send {\"cmd\":\"reset\"} first")
        if ep.done:
            raise CommandError(f"episode {ep.id} is over: send {{\"cmd\":\"reset\"}} to start "
                               "another")
        if self.human:
            if move is None:
                raise CommandError("missing field 'action': a human player's step must say "
                                   "the move, e.g. {\"cmd\":\"step\",\"action\":\"B2\"}")
            assert self.console is not None
            self.console.discard()
            self.console.supply(move)
        elif move is not None:
            raise CommandError("field 'action' is only for --agent-type human; this worker's "
                               f"player ({self.settings.agent_type}) chooses its own moves")
        driver = ep.driver
        step_index = driver.num_steps
        reward_before = driver.returns.get(self.agent_id, 0.0)
        turns = await self._env_step(ep)
        mine = next(t for t in turns if t["agent_id"] == self.agent_id)
        moves = await self._advance_opponents(ep)
        seat = driver.seat(self.agent_id)
        answer: dict[str, Any] = {
            "type": "step", "episode_id": ep.id, "step_index": step_index,
            "agent_id": self.agent_id, "action": mine["action"], "valid": mine["info"]["valid"],
            "feedback": mine["info"]["feedback"],
            "reward": driver.returns.get(self.agent_id, 0.0) - reward_before,
            "terminated": ep.terminated, "truncated": ep.truncated,
            "observation": observation_text(seat.observation),
            "legal_actions": list(seat.observation.legal_actions),
            "llm_response": mine["llm_response"], "reasoning": mine["info"]["reasoning"],
            "input_tokens": mine["llm_input_tokens"], "output_tokens": mine["llm_output_tokens"],
            "opponent_moves": [m for m in (
                {"agent_id": t["agent_id"], "step_index": t["step_index"], "action": t["action"]}
                for t in turns) if m["agent_id"] != self.agent_id] + moves,
            "done": ep.done,
        }
        if ep.error:
            answer["error"] = ep.error
        if self.settings.images and not ep.done:
            answer["render_payload"] = render_payload(await driver.session.render())
        record = await self._finish(ep) if ep.done else None
        return answer, record

    async def play_episode(self, seed: int | None = None) -> dict[str, Any]:
        """Autonomous mode: reset, then step until the end. Returns the episode record."""
        await self.reset(seed)
        ep = self._episode
        assert ep is not None
        while not ep.done:
            _, record = await self.step()
            if record is not None:
                return record
        return await self._finish(ep)

    async def _advance_opponents(self, ep: _Episode) -> list[dict[str, Any]]:
        moves: list[dict[str, Any]] = []
        while not ep.done and self.agent_id not in ep.driver.next_agents:
            for turn in await self._env_step(ep):
                moves.append({"agent_id": turn["agent_id"], "step_index": turn["step_index"],
                              "action": turn["action"]})
        return moves

    async def _env_step(self, ep: _Episode) -> list[dict[str, Any]]:
        """One env step through the driver. Writes each applied turn to the steps telemetry,
        adds the worker's own player's usage, and returns the turns as MOSAIC step records.
        Raises CommandError when a server fails under the step."""
        driver = ep.driver
        try:
            turns = await driver.step()
        except InfrastructureFault as exc:
            raise CommandError(f"the step failed: {exc}") from None
        for turn in turns:
            if turn.seat.agent_id == self.agent_id:
                ep.llm_calls += turn.act.usage.calls
                ep.input_tokens += turn.act.usage.input_tokens
                ep.output_tokens += turn.act.usage.output_tokens
                if turn.result is not None:
                    ep.actions += 1
                    ep.invalid_actions += not turn.result.action_result.valid
        records = [self._turn_record(ep, turn) for turn in turns]
        if driver.end_reason == "agent_error":
            failed = next(t for t in turns if t.act.error.code != 0)
            ep.error = f"{failed.seat.agent_id}: {driver.error}"
            ep.truncated = True
            return records
        last = driver.last_step
        if last is not None and self.agent_id in last.agents:
            result = last.agents[self.agent_id]
            ep.terminated = ep.terminated or result.terminated
            ep.truncated = ep.truncated or result.truncated
        if driver.end_reason == "terminated":
            ep.terminated = True
        elif driver.done and not ep.terminated:
            ep.truncated = True
        if driver.done and driver.error:
            ep.error = driver.error
        for record in records:
            self.telemetry.step(record)
        return records

    @staticmethod
    def _turn_record(ep: _Episode, turn: Turn) -> dict[str, Any]:
        """One turn as a MOSAIC step record (no env fields when the player failed)."""
        act, result = turn.act, turn.result
        if result is None:
            return {"agent_id": turn.seat.agent_id, "step_index": turn.step, "action": "",
                    "llm_response": act.raw_completion, "llm_input_tokens": 0,
                    "llm_output_tokens": 0,
                    "info": {"valid": False, "feedback": act.error.message, "reasoning": ""}}
        return {"episode_id": ep.id, "step_index": turn.step, "agent_id": turn.seat.agent_id,
                "observation": observation_text(turn.observation),
                "action": result.action_result.applied_action.text,
                "reward": result.reward, "terminated": result.terminated,
                "truncated": result.truncated,
                "info": {"valid": result.action_result.valid,
                         "feedback": result.action_result.feedback,
                         "reasoning": act.reasoning, "answer": act.action.text},
                "llm_response": act.raw_completion,
                "llm_input_tokens": act.usage.input_tokens,
                "llm_output_tokens": act.usage.output_tokens,
                "timestamp": datetime.now(UTC).isoformat()}

    async def _finish(self, ep: _Episode) -> dict[str, Any]:
        """End the episode's players and session; write and return its record (once)."""
        driver = ep.driver
        await driver.finish()
        if self.console is not None:
            self.console.discard()
        ended = datetime.now(UTC)
        reward = driver.returns.get(self.agent_id, 0.0)
        record: dict[str, Any] = {
            "episode_id": ep.id, "episode_index": ep.index, "env_name": self.settings.env_name,
            "task": self.task, "total_reward": reward, "num_steps": driver.num_steps,
            "terminated": ep.terminated, "truncated": ep.truncated,
            "success": ep.terminated and reward > 0,
            "start_time": ep.started_wall.isoformat(), "end_time": ended.isoformat(),
            "duration_seconds": time.perf_counter() - ep.started, "llm_calls": ep.llm_calls,
            "total_input_tokens": ep.input_tokens, "total_output_tokens": ep.output_tokens,
            "actions": ep.actions, "invalid_actions": ep.invalid_actions,
            "seed": ep.seed, "agent_id": self.agent_id, "agent_type": self.settings.agent_type,
            "opponent": self.settings.opponent, "end_reason": driver.end_reason or "truncated",
            "metrics": driver.metrics,
        }
        if ep.error:
            record["error"] = ep.error
        if not ep.recorded:
            self.telemetry.episode(record)
            self.actions += ep.actions
            self.invalid_actions += ep.invalid_actions
            self.records.append(EpisodeRecord(
                run_id=self.telemetry.run_id, env=self.settings.family, task=self.task,
                episode_index=ep.index, seed=ep.seed, end_reason=record["end_reason"],
                error=ep.error, episode_return=reward, num_steps=driver.num_steps))
            ep.recorded = True
        return {"type": "episode_done", "run_id": self.telemetry.run_id, **record}

    async def abandon(self) -> None:
        """End an unfinished episode as cancelled (no episode record). Idempotent."""
        ep = self._episode
        if ep is not None and not ep.done:
            ep.cancelled = True
            if self.console is not None:
                self.console.discard()
            await ep.driver.finish("cancelled")


def worker_run_spec(settings: WorkerSettings, agent_id: str) -> RunSpec:
    """The run spec of the worker's games: the opponents play with the run's ``agent``; the
    worker's seat (``agent_id``) has its own ``players`` entry (agent, role, coordination
    level, observation mode); one ``client`` for every seat."""
    s = settings
    seat = PlayerConfig(agent=s.agent_config(), role=s.role or "",
                        coordination_level=s.coordination_level,
                        observation_mode=s.observation_mode)
    return RunSpec(agent=s.opponent_config(), client=s.client_config(),
                   envs=EnvsConfig(names=s.family),
                   eval=EvalConfig(max_steps_per_episode=s.max_steps,
                                   feedback_on_invalid_action=True),
                   players={agent_id: seat})


async def rehearse(settings: WorkerSettings, task: str, agent_id: str, targets: Targets,
                   ) -> None:
    """Open the worker's first game with its real options and begin (then end) every seat's
    player on its policy server, playing no move: a player that cannot play this game (an rl
    checkpoint trained for another task, frames for a model that takes no images, a scripted
    bot for another game) is refused here, before the first episode.

    Raises ``orchestrator.core.episode.PlayerSetupError`` (a policy refuses its seat; the message
    names the seat), ``EpisodeSetupError`` (the env refuses the options) or
    ``InfrastructureFault`` (a server is lost, or no answer within ``eval.step_timeout_s``).
    """
    human = ({agent_id: targets.human} if settings.agent_type == "human" and targets.human
             else {})
    run_id = settings.run_id or "worker"
    plan = EpisodePlan(run_id=run_id, env=settings.family, task=task, episode_index=0,
                       seed=settings.seed, env_target=targets.env, policy_target=targets.policy,
                       seat_policy_targets=human, episode_id=f"{run_id}-preflight")
    spec = worker_run_spec(settings, agent_id)
    deadline = spec.eval.step_timeout_s
    session = EnvClient(targets.env).session()
    try:
        async with asyncio.timeout(deadline):
            config = await asyncio.to_thread(  # few_shot reads the demo file: off the loop
                episode_config, spec, settings.family, task, settings.seed)
            await rehearse_start(session, plan, config)
    except TimeoutError:
        raise InfrastructureFault(f"the preflight game did not open within {deadline:g} s "
                                  "(eval.step_timeout_s)") from None
    finally:
        with contextlib.suppress(Exception):
            await session.close()


async def probe_agents(env_target: str, request: env_pb.OpenRequest) -> list[str]:
    """The agent ids of a game (sorted), by opening and closing it once.

    Raises ``grpc.aio.AioRpcError`` (NOT_FOUND for an unknown task, listing the valid ones).
    """
    session = EnvClient(env_target).session()
    try:
        opened = await session.open(request)
        return sorted(opened.agents)
    finally:
        await session.close()


__all__ = ["CommandError", "GameSession", "Targets", "observation_text", "probe_agents",
           "rehearse", "render_payload", "worker_run_spec"]
