"""Text description of the agent's egocentric view (docs/families/babyai.md), our own code.

Input is minigrid's encoded partial observation ``obs["image"]``: an array of shape (V, V, 3),
uint8, indexed ``[column, row]`` with channels (object index, colour index, state). The agent sits
at column V//2 of the last row, facing row 0. Cells hidden by minigrid's visibility mask are
encoded "unseen", cells outside the grid are walls, and the agent's own cell holds the carried
object (or "empty"), so the encoding alone determines the whole description.

Output lines, in order:
1. ``You carry a <color> <type>`` when carrying;
2. at most three wall lines, forward, left, right: ``You see a wall <n> step[s] <dir>``;
3. one line per visible non-wall object, columns left to right, far rows to near rows:
   ``You see a <color> <type> <pos>`` or ``You see a <state> <color> door <pos>``.

The describer precomputes all phrases per view size and reads the array once per call as nested
lists, so a call is a few microseconds.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from minigrid.core.constants import IDX_TO_COLOR, IDX_TO_OBJECT, OBJECT_TO_IDX

_UNSEEN = OBJECT_TO_IDX["unseen"]
_EMPTY = OBJECT_TO_IDX["empty"]
_WALL = OBJECT_TO_IDX["wall"]
_DOOR = OBJECT_TO_IDX["door"]

# Door state encoding of minigrid: 0 open, 1 closed, 2 locked.
_DOOR_STATES = ("open", "closed", "locked")

_SEE = "You see "


def steps_phrase(n: int) -> str:
    """``"1 step"`` or ``"<n> steps"``."""
    return f"{n} step" if n == 1 else f"{n} steps"


def position_phrase(dx: int, forward: int) -> str:
    """Where a cell lies relative to the agent: ``dx`` columns right (negative: left) and
    ``forward`` rows ahead. The left/right part comes first; a zero part is omitted."""
    side = f"{steps_phrase(abs(dx))} {'left' if dx < 0 else 'right'}"
    if dx == 0:
        return f"{steps_phrase(forward)} forward"
    if forward == 0:
        return side
    return f"{side} and {steps_phrase(forward)} forward"


class _Layout:
    """Precomputed scan orders and phrases for one view size."""

    def __init__(self, size: int):
        col, row = size // 2, size - 1
        self.agent = (col, row)
        self.wall_scans = (
            ("forward", [(col, row - k) for k in range(1, row + 1)]),
            ("left", [(col - k, row) for k in range(1, col + 1)]),
            ("right", [(col + k, row) for k in range(1, size - col)]),
        )
        self.wall_lines = {
            (direction, k): f"{_SEE}a wall {steps_phrase(k)} {direction}"
            for direction, cells in self.wall_scans
            for k in range(1, len(cells) + 1)
        }
        self.phrases = [
            [position_phrase(i - col, row - j) for j in range(size)] for i in range(size)
        ]


@lru_cache(maxsize=8)
def _layout(size: int) -> _Layout:
    return _Layout(size)


def describe(image: np.ndarray) -> list[str]:
    """The description lines (reference format, with ``You see``) for one encoded view.

    Args:
        image: ``obs["image"]`` of a minigrid env, shape (V, V, 3), V odd.

    Returns:
        The lines in reference order; possibly empty.
    """
    size = image.shape[0]
    layout = _layout(size)
    grid = image.tolist()
    lines: list[str] = []

    ac, ar = layout.agent
    held = grid[ac][ar]
    if held[0] > _WALL:
        lines.append(f"You carry a {IDX_TO_COLOR[held[1]]} {IDX_TO_OBJECT[held[0]]}")

    for direction, cells in layout.wall_scans:
        for k, (i, j) in enumerate(cells, 1):
            obj = grid[i][j][0]
            if obj in (_UNSEEN, _EMPTY):
                continue
            if obj == _WALL:
                lines.append(layout.wall_lines[direction, k])
            break

    phrases = layout.phrases
    for i in range(size):
        column = grid[i]
        for j in range(size):
            obj, color, state = column[j]
            if obj <= _WALL or (i == ac and j == ar):
                continue
            where = phrases[i][j]
            if obj == _DOOR:
                # Always "a", also before "open": the reference's article bug, kept so that
                # our text matches what BALROG's published numbers were measured on.
                lines.append(f"{_SEE}a {_DOOR_STATES[state]} {IDX_TO_COLOR[color]} door {where}")
            else:
                lines.append(f"{_SEE}a {IDX_TO_COLOR[color]} {IDX_TO_OBJECT[obj]} {where}")
    return lines


def balrog_text(lines: list[str]) -> str:
    """BALROG's long-term observation text: every ``You see `` removed, lines joined by newlines."""
    return "\n".join(line.replace(_SEE, "") for line in lines)
