"""One Nim game behind ``Game``: turns, moves, illegal answers, texts, metrics and the drawing.

Turns: ``agents`` are ``player_0`` and ``player_1`` in seat order; after ``reset`` and after
every step, ``StepResult.next_agents`` holds only the player to move (``[]`` once the game is
over); ``first_agents()`` is ``[player_0]``. A step needs the mover's action; an action submitted
for an agent whose turn it is not is ignored (its transition says so, ``valid=False``).

Every step returns a transition for *both* agents: both see the new heaps, and the final
rewards (+1 win, -1 loss; 0 each when the step limit cuts the game short) go to both players on
the last move.

Actions: ``actions()`` lists ``take C from heap H`` for every heap H and every C from 1 to that
heap's starting size, heap by heap. A text names a move when it reads ``take C from heap H``
(case, repeated spaces and surrounding quotes, backticks or a final period are ignored); an
integer is an index into ``actions()``. A move is legal when heap H still holds at least C
objects. Anything else is *illegal*: a legal move drawn from a ``random.Random`` seeded from
(task, episode seed) is played instead, ``valid=False``, the feedback names the move played, and
the player's ``illegal_moves`` count goes up. With ``feedback_on_invalid_action`` the same
sentence leads the player's next short-term text.

Observation per agent: ``long_term_context`` is the heaps (``Heaps: 1: |||  2: ||||  3: |||||``
with counts) and whose turn it is; ``short_term_context`` says who the agent is, the last move,
and, on the agent's turn, the legal moves (or the result once the game is over);
``legal_actions`` are the legal move names on the agent's turn (else empty); ``action_mask``
and ``tensors["action_mask"]`` (uint8) mark the legal entries of ``actions()`` (all zero when
it is not the agent's turn or the game is over); ``tensors["heaps"]`` (int64) holds the heap
sizes; ``info`` has ``current_player``, ``move_number`` and ``heaps``; the image
(``render_image``) is ``render()``.

Metrics: ``moves`` (plies played), ``current_player``, ``heaps``, ``illegal_moves`` {agent: n},
``returns`` {agent: float}, ``progression_agent``, and once the game is over ``outcome``
{agent: "win" | "draw" | "loss"}, ``winner`` (agent id, "" for a draw), ``end`` (how it ended)
and ``truncated`` (the step limit was reached: a draw with returns 0). ``progression`` is the
result for ``progression_agent`` (default ``player_0``): 1.0 win, 0.5 draw, 0.0 loss, and 0.0
while the game runs.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from numbers import Integral
from typing import Any

import numpy as np

from env_server.game import (
    ActionInfo,
    AgentTransition,
    AgentView,
    Game,
    GameOptions,
    StepResult,
    SubmittedAction,
)

OUTCOME_PROGRESS = {"win": 1.0, "draw": 0.5, "loss": 0.0}
_ANSWER = re.compile(r"^take\s+(\d+)\s+from\s+heap\s+(\d+)$", re.IGNORECASE)

# Drawing: one column per heap, one block per object, bottom up.
_BLOCK_H, _BLOCK_W, _GAP, _MARGIN = 10, 28, 4, 8
_BACKGROUND = (245, 240, 225)
_OBJECT = (176, 96, 40)
_TAKEN = (222, 214, 196)
_BASE = (90, 90, 90)


def move_name(count: int, heap: int) -> str:
    """The action name of taking ``count`` objects from heap ``heap`` (1-based)."""
    return f"take {count} from heap {heap}"


class NimGame(Game):
    """A game of normal-play Nim; built by ``NimFamily.open``, not reset yet.

    Args:
        task: the task name (it seeds the replacement-move generator with the episode seed).
        heaps: the starting heap sizes.
        agents: the two agent ids, first mover first.
        options: the open options (seed, render_image, feedback; max_steps already validated).
        max_steps: the ply limit (the game is truncated, as a draw, when it is reached).
        progression_agent: the agent whose result ``metrics["progression"]`` reports.
    """

    def __init__(self, task: str, heaps: tuple[int, ...], agents: tuple[str, str],
                 options: GameOptions, *, max_steps: int, progression_agent: str):
        self._task = task
        self._start = tuple(heaps)
        self._agents = list(agents)
        self._options = options
        self._limit = max_steps
        self._progression_agent = progression_agent
        #: (heap index 0-based, count) of every entry of ``actions()``, in order
        self._moves_table = [(h, c) for h, size in enumerate(self._start)
                             for c in range(1, size + 1)]
        self._action_infos = [
            ActionInfo(move_name(c, h + 1), f"remove {c} object{'s' if c > 1 else ''} "
                       f"from heap {h + 1}") for h, c in self._moves_table]
        self._instructions = {a: self._build_instruction(a) for a in self._agents}
        self._rng = random.Random(0)
        self._heaps = list(self._start)
        self._turn = 0
        self._started = False
        self._closed = False
        self._done = False
        self._truncated = False
        self._moves = 0
        self._last_move: tuple[str, str] | None = None
        self._illegal: dict[str, int] = {}
        self._returns: dict[str, float] = {}
        self._outcome: dict[str, str] = {}
        self._winner = ""
        self._end = ""
        self._reset_state()

    # -- static facts -----------------------------------------------------------------------

    @property
    def agents(self) -> list[str]:
        """``player_0`` and ``player_1``, first mover first."""
        return list(self._agents)

    @property
    def max_steps(self) -> int:
        """The ply limit (moves of both players together)."""
        return self._limit

    def first_agents(self) -> list[str]:
        """Who moves first after ``reset``: the first seat only."""
        return [self._agents[0]]

    def instruction(self, agent_id: str) -> str:
        """Rules, the agent's seat, the move notation and the illegal-move rule."""
        self._check_agent(agent_id)
        return self._instructions[agent_id]

    def actions(self, agent_id: str) -> list[ActionInfo]:
        """Every move possible at the start (``take C from heap H``), heap by heap."""
        self._check_agent(agent_id)
        return list(self._action_infos)

    def default_action(self, agent_id: str) -> str:
        """``""``: an illegal answer is replaced by a random legal move, not a fixed action."""
        self._check_agent(agent_id)
        return ""

    # -- episode ----------------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> dict[str, AgentView]:
        """Start a game on the task's heaps; ``seed`` (default: the options' seed) seeds the
        generator that picks replacement moves for illegal answers."""
        if self._closed:
            raise RuntimeError("the game is closed")
        episode_seed = self._options.seed if seed is None else int(seed)
        self._rng = random.Random(f"nim/{self._task}/{episode_seed}")
        self._reset_state()
        self._started = True
        return {a: self._view(a, notice="") for a in self._agents}

    def step(self, actions: Mapping[str, SubmittedAction]) -> StepResult:
        """Play the mover's action (an illegal one becomes a seeded random legal move).

        Raises:
            RuntimeError: before ``reset``, after the game ended or once the game is closed.
            ValueError: no action for the player to move, or an unknown agent id.
        """
        if self._closed:
            raise RuntimeError("the game is closed")
        if not self._started:
            raise RuntimeError("step() before reset()")
        if self._done:
            raise RuntimeError("the episode is over; call reset() to start a new one")
        unknown = sorted(set(actions) - set(self._agents))
        if unknown:
            raise ValueError(f"unknown agents {unknown}; this game has {self._agents}")
        mover = self._current
        if mover not in actions:
            raise ValueError(f"it is {mover!r}'s turn; got actions for {sorted(actions)}")

        move = self._resolve(actions[mover])
        valid = move is not None
        if move is None:
            move = self._rng.choice(self._legal_moves())
            self._illegal[mover] += 1
        heap, count = move
        name = move_name(count, heap + 1)
        feedback = "" if valid else (
            f"Your previous answer was not a legal move, so the random legal move "
            f"'{name}' was played for you instead.")
        self._heaps[heap] -= count
        self._moves += 1
        self._last_move = (mover, name)

        terminated = not any(self._heaps)
        truncated = not terminated and self._moves >= self._limit
        self._done = terminated or truncated
        self._truncated = truncated
        if self._done:
            self._finish(mover if terminated else "")
        else:
            self._turn = 1 - self._turn
        rewards = self._reward_deltas()

        transitions: dict[str, AgentTransition] = {}
        for agent in self._agents:
            if agent == mover:
                notice = feedback if self._options.feedback_on_invalid_action else ""
                transitions[agent] = AgentTransition(
                    view=self._view(agent, notice=notice), reward=rewards[agent],
                    terminated=terminated, truncated=truncated, valid=valid,
                    applied_action=name, feedback=feedback)
            else:
                off_turn = agent in actions
                note = "It was not your turn, so your answer was ignored." if off_turn else ""
                transitions[agent] = AgentTransition(
                    view=self._view(agent, notice=""), reward=rewards[agent],
                    terminated=terminated, truncated=truncated, valid=not off_turn,
                    applied_action="", feedback=note)
        next_agents = [] if self._done else [self._current]
        return StepResult(transitions=transitions, next_agents=next_agents,
                          metrics=self.metrics(), done=self._done)

    def metrics(self) -> dict[str, Any]:
        """Running metrics (module docstring)."""
        out: dict[str, Any] = {
            "progression": 0.0,
            "moves": self._moves,
            "current_player": "" if self._done or not self._started else self._current,
            "heaps": list(self._heaps),
            "illegal_moves": dict(self._illegal),
            "returns": dict(self._returns),
            "progression_agent": self._progression_agent,
        }
        if self._outcome:
            out["progression"] = OUTCOME_PROGRESS[self._outcome[self._progression_agent]]
            out.update(outcome=dict(self._outcome), winner=self._winner, end=self._end,
                       truncated=self._truncated)
        return out

    def render(self) -> np.ndarray:
        """The heaps as columns of blocks, (H, W, 3) uint8: objects left in brown, objects
        taken in pale grey, heap 1 on the left."""
        rows = max(self._start)
        height = 2 * _MARGIN + rows * (_BLOCK_H + _GAP) + 3
        width = 2 * _MARGIN + len(self._start) * (_BLOCK_W + _GAP) - _GAP
        frame = np.empty((height, width, 3), dtype=np.uint8)
        frame[:] = _BACKGROUND
        base = height - _MARGIN - 3
        frame[base:base + 3, _MARGIN // 2:width - _MARGIN // 2] = _BASE
        for h, size in enumerate(self._start):
            left = _MARGIN + h * (_BLOCK_W + _GAP)
            for level in range(size):
                bottom = base - _GAP - level * (_BLOCK_H + _GAP)
                colour = _OBJECT if level < self._heaps[h] else _TAKEN
                frame[bottom - _BLOCK_H:bottom, left:left + _BLOCK_W] = colour
        return frame

    def close(self) -> None:
        """Nothing to free; marks the game closed (safe to call twice)."""
        self._closed = True

    # -- helpers ----------------------------------------------------------------------------

    @property
    def _current(self) -> str:
        return self._agents[self._turn]

    def _reset_state(self) -> None:
        self._heaps = list(self._start)
        self._turn = 0
        self._done = False
        self._truncated = False
        self._moves = 0
        self._last_move = None
        self._illegal = dict.fromkeys(self._agents, 0)
        self._returns = dict.fromkeys(self._agents, 0.0)
        self._outcome = {}
        self._winner = ""
        self._end = ""

    def _check_agent(self, agent_id: str) -> None:
        if agent_id not in self._agents:
            raise KeyError(f"unknown agent {agent_id!r}; this game has {self._agents}")

    def _legal(self, heap: int, count: int) -> bool:
        return 0 <= heap < len(self._heaps) and 1 <= count <= self._heaps[heap]

    def _legal_moves(self) -> list[tuple[int, int]]:
        """(heap, count) of every legal move now, in ``actions()`` order."""
        return [(h, c) for h, c in self._moves_table if self._legal(h, c)]

    def _resolve(self, submitted: SubmittedAction) -> tuple[int, int] | None:
        """The legal (heap, count) an answer names, else None."""
        if isinstance(submitted, Integral) and not isinstance(submitted, bool):
            index = int(submitted)
            if not 0 <= index < len(self._moves_table):
                return None
            heap, count = self._moves_table[index]
        elif isinstance(submitted, str):
            match = _ANSWER.match(" ".join(submitted.strip().strip("`'\".").split()))
            if match is None:
                return None
            count, heap = int(match.group(1)), int(match.group(2)) - 1
        else:
            return None
        return (heap, count) if self._legal(heap, count) else None

    def _finish(self, winner: str) -> None:
        """Record outcome, winner and returns (``winner`` "": cut short, a draw)."""
        self._winner = winner
        for agent in self._agents:
            if not winner:
                self._outcome[agent] = "draw"
            else:
                self._outcome[agent] = "win" if agent == winner else "loss"
        self._end = (f"{winner} took the last object" if winner
                     else f"step limit of {self._limit} moves reached (scored as a draw)")

    def _reward_deltas(self) -> dict[str, float]:
        """This step's reward per agent: the change of the totals (+1 win, -1 loss)."""
        totals = {a: {"win": 1.0, "loss": -1.0}.get(self._outcome.get(a, ""), 0.0)
                  for a in self._agents}
        deltas = {a: totals[a] - self._returns[a] for a in self._agents}
        self._returns = totals
        return deltas

    def _heaps_text(self) -> str:
        return "  ".join(f"{h + 1}: {'|' * n or '-'} ({n})" for h, n in enumerate(self._heaps))

    def _view(self, agent: str, *, notice: str) -> AgentView:
        my_turn = not self._done and self._current == agent
        legal = self._legal_moves() if my_turn else []
        legal_set = set(legal)
        mask = np.array([m in legal_set for m in self._moves_table], dtype=np.uint8)
        if self._done:
            turn_line = "The game is over."
        else:
            whose = "your" if my_turn else f"{self._current}'s"
            turn_line = f"Move {self._moves + 1}: it is {whose} turn."
        long_term = f"Heaps (objects left): {self._heaps_text()}\n{turn_line}"
        return AgentView(
            long_term_context=long_term,
            short_term_context=self._short_term(agent, notice, legal),
            image=self.render() if self._options.render_image else None,
            tensors={"heaps": np.array(self._heaps, dtype=np.int64), "action_mask": mask},
            legal_actions=[move_name(c, h + 1) for h, c in legal],
            action_mask=[bool(v) for v in mask],
            info={"current_player": "" if self._done else self._current,
                  "move_number": self._moves + 1, "heaps": list(self._heaps)},
        )

    def _short_term(self, agent: str, notice: str, legal: list[tuple[int, int]]) -> str:
        lines = [notice] if notice else []
        lines.append(f"You are {agent}.")
        if self._last_move is None:
            lines.append("No move has been played yet.")
        else:
            who, name = self._last_move
            lines.append(f"Last move: {'you' if who == agent else who} played '{name}'.")
        if self._done:
            words = {"win": "You won.", "draw": "It is a draw.",
                     "loss": "You lost."}[self._outcome[agent]]
            lines.append(f"The game is over ({self._end}). {words}")
        elif legal:
            lines.append("Legal moves: " + ", ".join(move_name(c, h + 1) for h, c in legal))
        return "\n".join(lines)

    def _build_instruction(self, agent: str) -> str:
        opponent = next(a for a in self._agents if a != agent)
        first = "You move first." if agent == self._agents[0] else "Your opponent moves first."
        heaps = ", ".join(f"heap {h + 1}: {n}" for h, n in enumerate(self._start))
        return "\n\n".join([
            f"You are playing Nim against another player. You are {agent}; your opponent is "
            f"{opponent}. {first}",
            f"Rules: the game starts with {len(self._start)} heaps of objects ({heaps}). "
            "Players take turns; on your turn you remove one or more objects from a single "
            "non-empty heap (as many as you like, up to the whole heap). Whoever takes the last "
            "object wins.",
            "Moves are written 'take C from heap H', e.g. 'take 2 from heap 3' removes 2 "
            "objects from heap 3 (heaps are numbered from 1). A move is legal when heap H "
            "still holds at least C objects.",
            "Each turn you see the heaps and the list of legal moves. Answer with exactly one "
            "legal move, written as it appears in that list. If your answer is not a legal move, "
            "a random legal move is played for you instead and you are told which one.",
            "Goal: take the last object. A win scores +1, a loss -1.",
        ])
