"""Distance and compass words for map offsets, as the language observation words them.

An offset is (dx, dy) with dx growing east and dy growing **north** (dy = player_y - cell_y, since
screen rows grow downwards).

- Distance word from the Chebyshev distance c = max(|dx|, |dy|): 1 ``adjacent``, 2 ``very near``,
  3-5 ``near``, 6-19 ``far``, 20 and more ``very far``.
- Direction word on a 16-point compass: the diagonal part (k = min(|dx|, |dy|) > 0) is
  northeast/northwest/southeast/southwest by the signs; the remaining straight part goes *in front*
  of it (north/south first, then east/west), e.g. (3, 1) -> ``eastnortheast``, (-1, 3) ->
  ``northnorthwest``, (5, 0) -> ``east``. The offset (0, 0) has the empty direction.

Everything downstream sorts and groups by a small integer *sort key*:
``key = distance_rank * 16 + direction_rank`` with distance ranks in the reference's sort order
(very far 0 ... adjacent 4) and direction ranks clockwise from north (north 0 ... northnorthwest
15). ``KEY_TABLE`` holds the key of every offset a 79x21 map can produce, so the hot path never
builds a string per cell.
"""

from __future__ import annotations

from functools import cache

import numpy as np

#: Distance words in sort order (farthest first), index = distance rank.
DISTANCES: tuple[str, ...] = ("very far", "far", "near", "very near", "adjacent")

#: Direction words clockwise from north, index = direction rank.
DIRECTIONS: tuple[str, ...] = (
    "north", "northnortheast", "northeast", "eastnortheast",
    "east", "eastsoutheast", "southeast", "southsoutheast",
    "south", "southsouthwest", "southwest", "westsouthwest",
    "west", "westnorthwest", "northwest", "northnorthwest",
)  # fmt: skip

_DIRECTION_RANK = {word: rank for rank, word in enumerate(DIRECTIONS)}

#: Offsets covered by ``KEY_TABLE``: dx in [-MAX_DX, MAX_DX], dy in [-MAX_DY, MAX_DY].
MAX_DX = 79
MAX_DY = 21

#: Key of the zero offset (no direction); it never appears in the language observation.
NO_KEY = -1


def distance_word(dx: int, dy: int) -> str:
    """Distance word of an offset (``adjacent`` ... ``very far``); (0, 0) counts as very far,
    as in the reference, but callers never ask for it."""
    c = max(abs(dx), abs(dy))
    if c == 1:
        return "adjacent"
    if c == 2:
        return "very near"
    if 3 <= c <= 5:
        return "near"
    if 6 <= c <= 19:
        return "far"
    return "very far"


def direction_word(dx: int, dy: int) -> str:
    """16-point compass word of an offset (dy grows north); ``""`` for (0, 0)."""
    k = min(abs(dx), abs(dy))
    diagonal = ""
    if k > 0:
        diagonal = ("north" if dy > 0 else "south") + ("east" if dx > 0 else "west")
    rest_y = abs(dy) - k
    rest_x = abs(dx) - k
    vertical = ("north" if dy > 0 else "south") if rest_y else ""
    horizontal = ("east" if dx > 0 else "west") if rest_x else ""
    return vertical + horizontal + diagonal


@cache
def offset_key(dx: int, dy: int) -> int:
    """Sort key (distance_rank * 16 + direction_rank) of an offset, ``NO_KEY`` for (0, 0)."""
    if dx == 0 and dy == 0:
        return NO_KEY
    dist_rank = DISTANCES.index(distance_word(dx, dy))
    return dist_rank * 16 + _DIRECTION_RANK[direction_word(dx, dy)]


def key_words(key: int) -> tuple[str, str]:
    """(distance word, direction word) of a sort key."""
    return DISTANCES[key >> 4], DIRECTIONS[key & 15]


def _build_key_table() -> np.ndarray:
    """int16 array of shape (2*MAX_DY+1, 2*MAX_DX+1); entry [dy + MAX_DY, dx + MAX_DX]."""
    table = np.empty((2 * MAX_DY + 1, 2 * MAX_DX + 1), dtype=np.int16)
    for dy in range(-MAX_DY, MAX_DY + 1):
        for dx in range(-MAX_DX, MAX_DX + 1):
            table[dy + MAX_DY, dx + MAX_DX] = offset_key(dx, dy)
    table.setflags(write=False)
    return table


#: Sort key of every offset, indexed ``[dy + MAX_DY, dx + MAX_DX]`` (dy grows north).
KEY_TABLE: np.ndarray = _build_key_table()
