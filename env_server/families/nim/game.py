"""One Nim game: ``NimBoard``, the rules, texts and drawing the shared turn-based driver
(``env_server.turn_based.TurnBasedGame``) plays.

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
(task, episode seed; label ``nim/{task}/{seed}``) is played instead, ``valid=False``, the
feedback names the move played, and the player's ``illegal_moves`` count goes up. The
sentence travels only in ``ActionResult.feedback``, never in the observation text.

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
{agent: "win" | "loss" | "unfinished"}, ``winner`` (agent id, "" for an unfinished game),
``end`` (how it ended) and ``truncated`` (the step limit was reached before the game ended:
every outcome ``unfinished``, returns 0). ``progression`` is the result for
``progression_agent`` (default ``player_0``): 1.0 win, 0.0 loss or unfinished, and 0.0 while
the game runs.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from env_server.game import ActionInfo
from env_server.turn_based import Board

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


class NimBoard(Board):
    """Normal-play Nim on fixed heaps (action index: the position in ``static_actions()``).

    Args:
        task: the task name (it seeds the replacement-move generator with the episode seed).
        heaps: the starting heap sizes.
        agents: the two agent ids, first mover first.
    """

    rng_prefix = "nim"
    title = "Nim"
    turn_line_on_board = True
    board_noun = "the heaps"
    goal = "Goal: take the last object. A win scores +1, a loss -1."

    def __init__(self, task: str, heaps: tuple[int, ...], agents: tuple[str, str]):
        self.task = task
        self.agents = tuple(agents)
        self._start = tuple(heaps)
        #: (heap index 0-based, count) of every action index, in order
        self._moves_table = [(h, c) for h, size in enumerate(self._start)
                             for c in range(1, size + 1)]
        self._action_infos = [
            ActionInfo(move_name(c, h + 1), f"remove {c} object{'s' if c > 1 else ''} "
                       f"from heap {h + 1}") for h, c in self._moves_table]
        self._heaps = list(self._start)
        self._turn = 0
        self._last_mover = ""

    # -- play ------------------------------------------------------------------------------

    def reset(self, seed: int) -> None:
        """Back to the task's heaps, ``player_0`` to move (Nim is deterministic)."""
        self._heaps = list(self._start)
        self._turn = 0
        self._last_mover = ""

    @property
    def current(self) -> str:
        """The agent to move."""
        return self.agents[self._turn]

    def play(self, index: int) -> None:
        """Take the objects of action ``index`` and pass the turn."""
        heap, count = self._moves_table[index]
        self._heaps[heap] -= count
        self._last_mover = self.current
        self._turn = 1 - self._turn

    def terminated(self) -> bool:
        """True once every heap is empty."""
        return not any(self._heaps)

    def total_rewards(self) -> dict[str, float]:
        """+1 for whoever took the last object, -1 for the other (0 each before that)."""
        if not self.terminated():
            return dict.fromkeys(self.agents, 0.0)
        return {a: 1.0 if a == self._last_mover else -1.0 for a in self.agents}

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        """``heaps`` (int64) and ``action_mask`` (the legal actions on the agent's turn)."""
        legal = {i for i, _ in self.legal_moves()} if agent == self.current else set()
        mask = np.array([i in legal for i in range(len(self._moves_table))], dtype=np.uint8)
        return {"heaps": np.array(self._heaps, dtype=np.int64), "action_mask": mask}

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

    # -- notation --------------------------------------------------------------------------

    def static_actions(self) -> list[ActionInfo]:
        """Every move possible at the start (``take C from heap H``), heap by heap."""
        return list(self._action_infos)

    def legal_moves(self) -> list[tuple[int, str]]:
        """``(index, name)`` of every legal move now, in ``static_actions()`` order."""
        return [(i, move_name(c, h + 1)) for i, (h, c) in enumerate(self._moves_table)
                if self._legal(h, c)]

    def resolve(self, text: str) -> int | None:
        """The index of the legal move ``take C from heap H`` names, else None."""
        match = _ANSWER.match(" ".join(text.strip().strip("`'\".").split()))
        if match is None:
            return None
        move = (int(match.group(2)) - 1, int(match.group(1)))
        if move not in self._moves_table or not self._legal(*move):
            return None
        return self._moves_table.index(move)

    def move_label(self, index: int) -> str:
        """The move name, quoted."""
        heap, count = self._moves_table[index]
        return f"'{move_name(count, heap + 1)}'"

    def _legal(self, heap: int, count: int) -> bool:
        return 0 <= heap < len(self._heaps) and 1 <= count <= self._heaps[heap]

    # -- text ------------------------------------------------------------------------------

    def board_text(self, agent: str) -> str:
        """The heaps with their counts (the driver adds whose turn it is)."""
        heaps = "  ".join(f"{h + 1}: {'|' * n or '-'} ({n})" for h, n in enumerate(self._heaps))
        return f"Heaps (objects left): {heaps}"

    def rule_sections(self) -> list[str]:
        """The rules and the move notation."""
        heaps = ", ".join(f"heap {h + 1}: {n}" for h, n in enumerate(self._start))
        return [
            f"Rules: the game starts with {len(self._start)} heaps of objects ({heaps}). "
            "Players take turns; on your turn you remove one or more objects from a single "
            "non-empty heap (as many as you like, up to the whole heap). Whoever takes the last "
            "object wins.",
            "Moves are written 'take C from heap H', e.g. 'take 2 from heap 3' removes 2 "
            "objects from heap 3 (heaps are numbered from 1). A move is legal when heap H "
            "still holds at least C objects.",
        ]

    def end_detail(self) -> str:
        """Who took the last object."""
        return f"{self._last_mover} took the last object"

    def agent_info(self, agent: str) -> dict[str, Any]:
        """The heap sizes."""
        return {"heaps": list(self._heaps)}

    def metrics(self) -> dict[str, Any]:
        """The heap sizes."""
        return {"heaps": list(self._heaps)}

