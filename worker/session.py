"""One worker game: an env Session plus one policy Play stream per seat, advanced a step at a
time (interactive ``reset``/``step``) or to the end (autonomous mode).

The worker's player sits on ``agent_id``; the other seats are played by ``--opponent``
players. A ``step`` plays the worker's turn, then the opponents' turns until it is the worker's
turn again (or the episode ends), so each ``step`` command is exactly one move of the worker's
player. Every agent turn is written to the steps telemetry; the episode record counts the
worker's player (reward, model calls, tokens).
"""

from __future__ import annotations

import base64
import contextlib
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from moria.clients import EnvClient, EnvSession, PlayStream, PolicyClient
from moria.codecs import dict_from_struct, struct_from_dict
from moria.common.v1 import types_pb2
from moria.config import TENSOR_AGENT_TYPES, policy_config_dict
from moria.env.v1 import env_service_pb2 as env_pb
from moria.policy.v1 import policy_service_pb2 as pol_pb
from worker.config import WorkerSettings
from worker.human import QueueConsole
from worker.telemetry import WorkerTelemetry, episode_id


class CommandError(ValueError):
    """A command that cannot be carried out now (the message says why and what to do)."""


@dataclass
class Targets:
    """Where the servers are: the env server, the policy server for every seat, and the
    in-process one that seats the human (None unless ``--agent-type human``)."""

    env: str
    policy: str
    human: str | None = None


@dataclass
class _Seat:
    agent_id: str
    stream: PlayStream
    start: env_pb.AgentStart
    observation: types_pb2.Observation
    last_result: types_pb2.ActionResult | None = None


@dataclass
class _Episode:
    index: int
    seed: int
    id: str
    session: EnvSession
    seats: dict[str, _Seat] = field(default_factory=dict)
    next_agents: list[str] = field(default_factory=list)
    num_steps: int = 0
    total_reward: float = 0.0
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    terminated: bool = False
    truncated: bool = False
    end_reason: str = ""
    error: str = ""
    done: bool = False
    recorded: bool = False
    metrics: dict[str, Any] = field(default_factory=dict)
    started_wall: datetime = field(default_factory=lambda: datetime.now(UTC))
    started: float = field(default_factory=time.perf_counter)


def observation_text(obs: types_pb2.Observation) -> str:
    """The observation as one text: long-term context, then short-term context."""
    long_term = obs.text.get("long_term_context", "")
    short_term = obs.text.get("short_term_context", "")
    return f"{long_term}\n{short_term}".strip("\n") if short_term else long_term


def render_payload(image: types_pb2.Image) -> dict[str, Any]:
    """``{"rgb": base64 data, "encoding": "png"|"raw", "width", "height"}`` of a frame."""
    encoding = "raw" if image.encoding == types_pb2.IMAGE_ENCODING_RAW_RGB else "png"
    return {"rgb": base64.b64encode(image.data).decode("ascii"), "encoding": encoding,
            "width": image.width, "height": image.height}


class GameSession:
    """Plays episodes of ``settings.family``/``task`` with the worker's player on ``agent_id``.

    ``console``: the human console fed by ``step(move)`` (``--agent-type human`` only).
    Raises CommandError (bad order of commands, missing move), ``grpc.aio.AioRpcError`` or
    ``moria.clients.StreamClosedError`` (a server failed).
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
        self._episode: _Episode | None = None

    @property
    def episode(self) -> _Episode | None:
        """The current (or last) episode, None before the first reset."""
        return self._episode

    def open_request(self, seed: int) -> env_pb.OpenRequest:
        """The env Open request for one episode (task, seed, images, tensors, seat options)."""
        s = self.settings
        players = []
        if s.role or s.seat_options():
            players.append(types_pb2.PlayerSpec(agent_id=self.agent_id, role=s.role or "",
                                                options=struct_from_dict(s.seat_options())))
        return env_pb.OpenRequest(
            task=f"{s.family}:{self.task}", seed=seed, max_steps=s.max_steps,
            observation=env_pb.ObservationOptions(
                include_image=s.images,
                include_tensors=(s.agent_type in TENSOR_AGENT_TYPES
                                 or s.opponent in TENSOR_AGENT_TYPES),
                feedback_on_invalid_action=True),
            oracle=s.agent_type == "oracle" or s.opponent == "oracle",
            players=players)

    async def reset(self, seed: int | None = None) -> dict[str, Any]:
        """Start a new episode (ending an unfinished one as cancelled) and play the opponents'
        turns until the worker's player is to move. ``seed`` None: ``--seed`` + episode index.

        Returns the ``ready`` answer: observation, system_prompt, agent_id, episode_id,
        legal_actions, action_names, opponent_moves and, with images, render_payload.
        """
        await self.abandon()
        index = self.episodes_started
        self.episodes_started += 1
        seed = self.settings.seed + index if seed is None else seed
        session = EnvClient(self.targets.env).session()
        ep = _Episode(index=index, seed=seed, id=episode_id(self.telemetry.run_id, index),
                      session=session)
        self._episode = ep
        try:
            opened = await session.open(self.open_request(seed))
            if self.agent_id not in opened.agents:
                raise CommandError(f"agent id {self.agent_id!r} is not in this game; its "
                                   f"agents: {', '.join(sorted(opened.agents))}")
            await self._begin(ep, opened)
        except BaseException:
            await self.abandon()
            raise
        ep.next_agents = list(opened.next_agents)
        moves = await self._advance_opponents(ep)
        mine = ep.seats[self.agent_id]
        ready: dict[str, Any] = {
            "type": "ready", "episode_id": ep.id, "episode_index": index, "seed": seed,
            "agent_id": self.agent_id, "observation": observation_text(mine.observation),
            "system_prompt": mine.start.instruction,
            "legal_actions": list(mine.observation.legal_actions),
            "action_names": [a.name for a in mine.start.action_space.actions],
            "opponent_moves": moves, "done": ep.done,
        }
        if self.settings.images:
            ready["render_payload"] = render_payload(await session.render())
        if ep.done:  # the other seats ended the game before the worker's first move
            ready["episode_done"] = await self._finish(ep)
        return ready

    async def _begin(self, ep: _Episode, opened: env_pb.OpenResponse) -> None:
        client = self.settings.client_config()
        for offset, (agent_id, start) in enumerate(sorted(opened.agents.items())):
            mine = agent_id == self.agent_id
            agent = self.settings.agent_config() if mine else self.settings.opponent_config()
            target = self.targets.policy
            if mine and self.human and self.targets.human:
                target = self.targets.human
            stream = PolicyClient(target).play()
            ep.seats[agent_id] = _Seat(agent_id, stream, start, start.observation)
            await stream.begin(pol_pb.Begin(
                episode_id=ep.id, agent_id=agent_id, instruction=start.instruction,
                action_space=start.action_space,
                agent_config=struct_from_dict(policy_config_dict(agent, client)),
                seed=(ep.seed + offset) % 2**64, env_name=self.settings.family,
                task=self.task))

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
        step_index = ep.num_steps
        reward_before = ep.total_reward
        turns = await self._env_step(ep)
        mine = next(t for t in turns if t["agent_id"] == self.agent_id)
        moves = await self._advance_opponents(ep)
        seat = ep.seats[self.agent_id]
        answer: dict[str, Any] = {
            "type": "step", "episode_id": ep.id, "step_index": step_index,
            "agent_id": self.agent_id, "action": mine["action"], "valid": mine["info"]["valid"],
            "feedback": mine["info"]["feedback"], "reward": ep.total_reward - reward_before,
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
            answer["render_payload"] = render_payload(await ep.session.render())
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
        while not ep.done and self.agent_id not in ep.next_agents:
            for turn in await self._env_step(ep):
                moves.append({"agent_id": turn["agent_id"], "step_index": turn["step_index"],
                              "action": turn["action"]})
        return moves

    async def _env_step(self, ep: _Episode) -> list[dict[str, Any]]:
        """Ask every acting seat, step the env once, record each turn; sets ``ep.done``."""
        acting = [ep.seats[a] for a in ep.next_agents if a in ep.seats]
        acts: list[pol_pb.Act] = []
        for seat in acting:  # in order: a human seat waits on its console, others are quick
            observe = pol_pb.Observe(observation=seat.observation, step=ep.num_steps)
            if seat.last_result is not None:
                observe.last_action_result.CopyFrom(seat.last_result)
            acts.append(await seat.stream.observe(observe))
        failed = next(((s, a) for s, a in zip(acting, acts, strict=True) if a.error.code != 0),
                      None)
        if failed is not None:
            ep.done, ep.truncated, ep.end_reason = True, True, "agent_error"
            ep.error = f"{failed[0].agent_id}: {failed[1].error.message}"
            return [{"agent_id": s.agent_id, "step_index": ep.num_steps, "action": "",
                     "llm_response": a.raw_completion, "llm_input_tokens": 0,
                     "llm_output_tokens": 0,
                     "info": {"valid": False, "feedback": a.error.message, "reasoning": ""}}
                    for s, a in zip(acting, acts, strict=True)]
        response = await ep.session.step({s.agent_id: a.action
                                          for s, a in zip(acting, acts, strict=True)})
        if response.error.code != 0:
            raise CommandError(f"the env rejected the step: {response.error.message}")
        step_index = ep.num_steps
        turns = []
        for seat, act in zip(acting, acts, strict=True):
            result = response.agents[seat.agent_id]
            info = {"valid": result.action_result.valid,
                    "feedback": result.action_result.feedback, "reasoning": act.reasoning,
                    "answer": act.action.text}
            turn = {"episode_id": ep.id, "step_index": step_index, "agent_id": seat.agent_id,
                    "observation": observation_text(seat.observation),
                    "action": result.action_result.applied_action.text,
                    "reward": result.reward, "terminated": result.terminated,
                    "truncated": result.truncated, "info": info,
                    "llm_response": act.raw_completion,
                    "llm_input_tokens": act.usage.input_tokens,
                    "llm_output_tokens": act.usage.output_tokens,
                    "timestamp": datetime.now(UTC).isoformat()}
            self.telemetry.step(turn)
            turns.append(turn)
            seat.last_result = result.action_result
            if seat.agent_id == self.agent_id:
                ep.llm_calls += act.usage.calls
                ep.input_tokens += act.usage.input_tokens
                ep.output_tokens += act.usage.output_tokens
        for agent_id, result in response.agents.items():
            if agent_id in ep.seats:
                ep.seats[agent_id].observation = result.observation
            if agent_id == self.agent_id:
                ep.total_reward += result.reward
                ep.terminated = ep.terminated or result.terminated
                ep.truncated = ep.truncated or result.truncated
        ep.num_steps = int(response.step) or ep.num_steps + 1
        ep.next_agents = list(response.next_agents)
        if response.HasField("episode_end") or not ep.next_agents:
            ep.done = True
            reason = response.episode_end.reason
            ep.end_reason = ("terminated" if reason == types_pb2.END_REASON_TERMINATED
                             else "truncated")
            if ep.end_reason == "terminated":
                ep.terminated = True
            elif not ep.terminated:
                ep.truncated = True
            if response.episode_end.detail:
                ep.error = response.episode_end.detail
            ep.metrics = dict_from_struct(response.episode_end.metrics)
        return turns

    async def _finish(self, ep: _Episode) -> dict[str, Any]:
        """Close the episode's streams, write and return its record (once)."""
        await self._close_streams(ep, ep.end_reason or "truncated")
        if self.console is not None:
            self.console.discard()
        ended = datetime.now(UTC)
        record: dict[str, Any] = {
            "episode_id": ep.id, "episode_index": ep.index, "env_name": self.settings.env_name,
            "task": self.task, "total_reward": ep.total_reward, "num_steps": ep.num_steps,
            "terminated": ep.terminated, "truncated": ep.truncated,
            "success": ep.terminated and ep.total_reward > 0,
            "start_time": ep.started_wall.isoformat(), "end_time": ended.isoformat(),
            "duration_seconds": time.perf_counter() - ep.started, "llm_calls": ep.llm_calls,
            "total_input_tokens": ep.input_tokens, "total_output_tokens": ep.output_tokens,
            "seed": ep.seed, "agent_id": self.agent_id, "agent_type": self.settings.agent_type,
            "opponent": self.settings.opponent, "end_reason": ep.end_reason,
            "metrics": ep.metrics,
        }
        if ep.error:
            record["error"] = ep.error
        if not ep.recorded:
            self.telemetry.episode(record)
            ep.recorded = True
        return {"type": "episode_done", "run_id": self.telemetry.run_id, **record}

    async def _close_streams(self, ep: _Episode, end_reason: str) -> None:
        reasons = {"terminated": types_pb2.END_REASON_TERMINATED,
                   "agent_error": types_pb2.END_REASON_AGENT_ERROR,
                   "cancelled": types_pb2.END_REASON_CANCELLED}
        end = types_pb2.EpisodeEnd(reason=reasons.get(end_reason,
                                                      types_pb2.END_REASON_TRUNCATED),
                                   num_steps=ep.num_steps)
        for seat in ep.seats.values():
            with contextlib.suppress(Exception):
                await seat.stream.end(end)
        with contextlib.suppress(Exception):
            await ep.session.close()

    async def abandon(self) -> None:
        """End an unfinished episode as cancelled (no episode record). Idempotent."""
        ep = self._episode
        if ep is not None and not ep.done:
            ep.done = True
            ep.end_reason = "cancelled"
            if self.console is not None:
                self.console.discard()
            await self._close_streams(ep, "cancelled")


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
           "render_payload"]
