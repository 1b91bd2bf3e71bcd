"""The player's state as the text renderer needs it, and its 9x7 local semantic window.

Source of the geometry: BALROG's Crafter wrapper slices crafter's semantic
map to x in [px-4, px+4], y in [py-3, py+3] with the player at window cell (4, 3). Near the west
or north edge of the map the reference slice starts at a negative index and comes out empty or
shifted (a reference defect); here the window always keeps its 9x7 shape and every cell
outside the map holds ``OUTSIDE``, which the renderer treats as absent.

Axes follow crafter: arrays are indexed ``[x, y]``, x growing east, y growing south.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

WINDOW_W = 9  # cells west-east
WINDOW_H = 7  # cells north-south (the 9x9 view minus crafter's 2-row inventory strip)
CENTER = (WINDOW_W // 2, WINDOW_H // 2)  # (4, 3): the player's cell in the window
OUTSIDE = -1  # window cells that lie outside the map


@dataclass(frozen=True)
class Frame:
    """One observation's raw facts (what BALROG reads from crafter's step ``info``).

    Attributes:
        semantic: the whole map of crafter semantic ids (``vocab.SEMANTIC_NAMES``), shape
            (area_w, area_h), integer dtype, indexed ``[x, y]``; creatures overwrite the
            material under them.
        pos: the player's cell ``(x, y)``.
        facing: unit vector ``(dx, dy)`` the player faces, e.g. ``(0, 1)`` = south.
        inventory: crafter's inventory dict (vitals and items -> count).
        sleeping: the player is asleep.
        dead: the player's health is 0.
    """

    semantic: np.ndarray
    pos: tuple[int, int]
    facing: tuple[int, int]
    inventory: Mapping[str, int]
    sleeping: bool = False
    dead: bool = False


def local_window(semantic: np.ndarray, pos: tuple[int, int]) -> np.ndarray:
    """The 9x7 window around ``pos``: int16 array of shape (9, 7) indexed ``[x, y]``.

    Cell ``(4, 3)`` is the player's own cell; cells outside the map are ``OUTSIDE`` (-1).
    ``semantic`` is the full map, shape (area_w, area_h), indexed ``[x, y]``.
    """
    window = np.full((WINDOW_W, WINDOW_H), OUTSIDE, dtype=np.int16)
    x0, y0 = pos[0] - CENTER[0], pos[1] - CENTER[1]
    area_w, area_h = semantic.shape
    # intersection of the window with the map, in map coordinates
    lo_x, hi_x = max(x0, 0), min(x0 + WINDOW_W, area_w)
    lo_y, hi_y = max(y0, 0), min(y0 + WINDOW_H, area_h)
    if lo_x < hi_x and lo_y < hi_y:
        window[lo_x - x0 : hi_x - x0, lo_y - y0 : hi_y - y0] = semantic[lo_x:hi_x, lo_y:hi_y]
    return window
