"""Action-selector mode: the caller owns the env and asks the worker's player for one move at
a time (``init_agent`` / ``select_action``).

Each ``init_agent`` opens a Play stream on the policy server for that player id (Begin with the
caller's instruction, or a short generic one); each ``select_action`` sends one Observe with the
observation text, the legal moves and the action mask, and maps the answer back to an index in
the legal-move list with MOSAIC's parsing order: exact name, then a name contained in the answer
(list order), then synonyms. An answer that matches nothing plays the first legal move, and the
failure is reported (``parse_failed``) and counted.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from moria.clients import PlayStream, PolicyClient, keep_alive
from moria.common.v1 import types_pb2
from moria.policy.v1 import policy_service_pb2 as pol_pb
from moria.policy_config import agent_settings, client_settings
from worker.config import WorkerSettings
from worker.human import QueueConsole
from worker.session import CommandError

#: Answer phrases -> the action names they mean (grid games' MOSAIC vocabulary), tried in order.
SYNONYMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("go forward", ("forward", "go forward", "move forward")),
    ("move forward", ("forward", "go forward", "move forward")),
    ("go ahead", ("forward", "go forward")),
    ("grab", ("pickup", "pick up")),
    ("take", ("pickup", "pick up")),
    ("steal", ("pickup", "pick up")),
    ("pick up", ("pickup", "pick up")),
    ("put down", ("drop",)),
    ("pass", ("drop",)),
    ("wait", ("still", "noop", "wait")),
    ("stay", ("still", "noop", "wait")),
    ("do nothing", ("still", "noop", "wait")),
    ("turn left", ("left", "turn left")),
    ("turn right", ("right", "turn right")),
    ("open", ("toggle",)),
    ("finish", ("done",)),
)


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower().strip(".!\"'`*"))


def match_move(answer: str, moves: list[str]) -> tuple[int, str]:
    """The index of ``answer`` in ``moves`` and how it matched: ``exact``, ``substring``,
    ``synonym``; (-1, ``none``) when nothing matches. Case- and space-insensitive."""
    text = _norm(answer)
    names = [_norm(m) for m in moves]
    if text in names:
        return names.index(text), "exact"
    for i, name in enumerate(names):
        if name and re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text):
            return i, "substring"
    for phrase, targets in SYNONYMS:
        if phrase in text:
            for target in targets:
                if target in names:
                    return names.index(target), "synonym"
    return -1, "none"


@dataclass
class _Player:
    stream: PlayStream
    game_name: str
    turns: int = 0
    parse_failures: int = 0


class ActionSelector:
    """The players of action-selector mode, one Play stream per player id.

    ``policy_target``: where the worker's player runs (``inproc:human`` for a human: the seat is
    played in the worker's own process, ``worker.human``).
    ``console``: the human console (``--agent-type human``: ``select_action`` needs
    ``action``).
    """

    def __init__(self, settings: WorkerSettings, policy_target: str, *,
                 console: QueueConsole | None = None) -> None:
        self.settings = settings
        self.policy_target = policy_target
        self.console = console
        self.players: dict[str, _Player] = {}
        self._begun = 0

    async def init_agent(self, game_name: str, player_id: str,
                         instruction: str | None = None) -> dict[str, Any]:
        """(Re)start ``player_id``'s policy for ``game_name``. Returns ``agent_ready``."""
        await self._end(player_id)
        text = instruction or (
            f"You are {player_id}, playing {game_name}. Each turn you are shown the current "
            "observation and the list of legal moves. Reply with exactly one legal move, "
            "written as it appears in the list.")
        stream = PolicyClient(self.policy_target).play()
        agent = self.settings.agent_config()
        client = self.settings.client_config()
        ready = await stream.begin(pol_pb.Begin(
            episode_id=f"{player_id}-{self._begun}", agent_id=player_id, instruction=text,
            action_space=types_pb2.ActionSpace(), seed=(self.settings.seed + self._begun) % 2**64,
            agent=agent_settings(agent), client=client_settings(client),
            env_name=self.settings.family, task=game_name))
        self._begun += 1
        # the stream waits between the caller's commands: ping it within the server's limit
        keep_alive(stream, ready.idle_timeout_s)
        self.players[player_id] = _Player(stream, game_name)
        return {"type": "agent_ready", "player_id": player_id, "game_name": game_name,
                "agent_type": ready.strategy, "model": ready.model}

    async def select_action(self, player_id: str, observation: str,
                            legal_moves: list[str] | None, action_mask: list[bool] | None,
                            move: str | None = None) -> dict[str, Any]:
        """One decision of ``player_id``. ``legal_moves`` None: the moves are the indices where
        ``action_mask`` is true. ``move``: the human's typed move. Returns ``action_selected``
        with ``action`` = index in ``legal_moves`` (or the action index under a mask only).

        Raises CommandError for an unknown player, no moves at all, or a missing human move.
        """
        player = self.players.get(player_id)
        if player is None:
            known = ", ".join(sorted(self.players)) or "none yet"
            raise CommandError(f"unknown player_id {player_id!r}: send init_agent for it first "
                               f"(initialised: {known})")
        if legal_moves is None:
            if action_mask is None:
                raise CommandError("select_action needs info.legal_moves (a list of moves) or "
                                   "action_mask (a list of booleans)")
            index_of = [i for i, ok in enumerate(action_mask) if ok]
            legal_moves = [str(i) for i in index_of]
        else:
            index_of = list(range(len(legal_moves)))
        if not legal_moves:
            raise CommandError("no legal move to choose from (legal_moves is empty or the "
                               "action_mask is all false)")
        if self.settings.agent_type == "human":
            if move is None:
                raise CommandError("missing field 'action': a human player's select_action "
                                   "must say the move")
            assert self.console is not None
            self.console.discard()
            self.console.supply(move)
        obs = types_pb2.Observation(text={"long_term_context": observation},
                                    long_term_context=observation, legal_actions=legal_moves)
        if action_mask is not None and len(action_mask) == len(legal_moves):
            obs.action_mask.extend(action_mask)
        act = await player.stream.observe(pol_pb.Observe(observation=obs, step=player.turns))
        player.turns += 1
        if act.error.code != 0:
            raise CommandError(f"the player could not answer: {act.error.message}")
        answer = act.action.text
        index, how = match_move(answer, legal_moves)
        reasoning = act.reasoning
        if index < 0:
            player.parse_failures += 1
            index = 0
            reasoning = (f"{reasoning}\n" if reasoning else "") + (
                f"[worker] the answer {answer!r} matched no legal move; played the first legal "
                f"move {legal_moves[0]!r}")
        return {"type": "action_selected", "player_id": player_id,
                "action": index_of[index], "action_str": legal_moves[index],
                "reasoning": reasoning, "llm_response": act.raw_completion,
                "match": how, "parse_failed": how == "none",
                "parse_failures": player.parse_failures,
                "input_tokens": act.usage.input_tokens, "output_tokens": act.usage.output_tokens,
                "timestamp": datetime.now(UTC).isoformat()}

    async def _end(self, player_id: str) -> None:
        player = self.players.pop(player_id, None)
        if player is not None:
            end = types_pb2.EpisodeEnd(reason=types_pb2.END_REASON_CANCELLED,
                                       num_steps=player.turns)
            with contextlib.suppress(Exception):
                await player.stream.end(end)

    async def close(self) -> None:
        """End every player's stream."""
        for player_id in list(self.players):
            await self._end(player_id)
