"""The "language observation": a text description of the map.

``describe_map(glyphs, player_x, player_y)`` lists what the player can know about the level, one
line per (name, distance) group, e.g.::

    stairs up far west
    tame little dog adjacent east
    horizontal wall adjacent north and northeast

Entries:

1. *screen features*: every cell (row-major) whose glyph has a screen name (monsters, objects,
   corpses, closed doors, stairs, fountains, ...), anywhere on the level, except the player's cell;
2. *structure rays*: from the player in the order E, SE, S, SW, W, NW, N, NE, steps 1..9 (up to
   the map edge), every cell with no screen name but a structure name (walls, doorways, open
   doors, traps, dark area...); a *blocking* structure (dark area, walls, corners, t-walls, cross
   wall) ends its ray after being reported. Floors and screen features never end a ray.

Reference behaviour kept (**defect**): closed doors and raised drawbridges are
screen features, so rays pass through them although the reference lists them as blocking.

Entries are sorted by distance (very far first) then clockwise direction from north, stable
(screen scan before rays); grouped by (name, distance) in order of first appearance; directions
seen once go on a singular line, directions seen two or more times on a plural line after it.
Reference quirk reproduced: lines are keyed by (displayed name, distance), so when the plural
equals the singular (``bars``) the repeated-direction list overwrites the single-direction list
and is printed twice. A line is ``<name> <distance> <d1>``, ``... <d1> and <d2>`` or
``... <d1>, <d2>, ..., and <dn>``; lines are joined by newlines, no trailing newline.

Cost: one table look-up over the whole glyph array in numpy, then Python only over the named
cells and the at most 72 ray cells (tens of microseconds per call).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from .compass import DIRECTIONS, DISTANCES, KEY_TABLE, MAX_DX, MAX_DY, offset_key
from .glyphs import glyph_tables

#: Map size of NLE's ``glyphs`` observation (rows, columns).
MAP_ROWS = 21
MAP_COLS = 79

# Ray order of the reference: E, SE, S, SW, W, NW, N, NE as (column step, row step).
_RAY_STEPS = ((1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1))
_RAY_LENGTH = 9


def join_directions(words: list[str]) -> str:
    """``a``, ``a and b`` or ``a, b, ..., and z`` (serial comma)."""
    if len(words) == 1:
        return words[0]
    if len(words) == 2:
        return f"{words[0]} and {words[1]}"
    return ", ".join(words[:-1]) + ", and " + words[-1]


_KEY_LIST: list[int] = KEY_TABLE.reshape(-1).tolist()
_KEY_ROW = KEY_TABLE.shape[1]


@lru_cache(maxsize=MAP_ROWS * MAP_COLS)
def _rays(player_x: int, player_y: int) -> tuple[np.ndarray, tuple[int, ...], tuple[int, ...]]:
    """Flat cell indices of the 8 rays (concatenated), their sort keys, and the ray end offsets."""
    cells: list[int] = []
    keys: list[int] = []
    ends: list[int] = []
    for step_x, step_y in _RAY_STEPS:
        for k in range(1, _RAY_LENGTH + 1):
            x, y = player_x + k * step_x, player_y + k * step_y
            if not (0 <= x < MAP_COLS and 0 <= y < MAP_ROWS):
                break
            cells.append(y * MAP_COLS + x)
            keys.append(offset_key(k * step_x, -k * step_y))
        ends.append(len(cells))
    indices = np.array(cells, dtype=np.intp)
    indices.setflags(write=False)  # cached and shared between calls
    return indices, tuple(keys), tuple(ends)


def _screen_entries(
    flat: np.ndarray, player_x: int, player_y: int, keys: list[int], ids: list[int]
) -> None:
    """Append sort keys and name ids of the named cells (row-major), player cell excluded."""
    tables = glyph_tables()
    cells = np.flatnonzero(tables.has_screen[flat])
    if cells.size == 0:
        return
    screen_id = tables.screen_id
    in_map = 0 <= player_x < MAP_COLS and 0 <= player_y < MAP_ROWS
    player = player_y * MAP_COLS + player_x if in_map else -1
    # Index of the offset (dx, dy) in _KEY_LIST is base + x - y * _KEY_ROW for cell (x, y).
    base = (player_y + MAX_DY) * _KEY_ROW + MAX_DX - player_x
    for cell, glyph in zip(cells.tolist(), flat[cells].tolist(), strict=True):
        if cell == player:
            continue
        y, x = divmod(cell, MAP_COLS)
        if in_map:
            keys.append(_KEY_LIST[base + x - y * _KEY_ROW])
        else:  # never in NLE: compute the offset the slow way
            keys.append(offset_key(x - player_x, player_y - y))
        ids.append(screen_id[glyph])


def _ray_entries(
    flat: np.ndarray, player_x: int, player_y: int, keys: list[int], ids: list[int]
) -> None:
    """Append sort keys and name ids contributed by the 8 structure rays, in ray order."""
    if not (0 <= player_x < MAP_COLS and 0 <= player_y < MAP_ROWS):
        return
    ray_code = glyph_tables().ray_code
    cells, ray_keys, ends = _rays(player_x, player_y)
    glyphs = flat[cells].tolist()
    start = 0
    for end in ends:
        for i in range(start, end):
            code = ray_code[glyphs[i]]
            if code:
                keys.append(ray_keys[i])
                if code < 0:
                    ids.append(-code)
                    break
                ids.append(code)
        start = end


def _split_repeats(dirs: list[int]) -> tuple[list[int], list[int]]:
    """Directions seen once and directions seen more than once, each in order; ``dirs`` is
    sorted (entries are sorted by direction within one distance), so repeats are adjacent."""
    if len(dirs) == 1:
        return dirs, []
    singles: list[int] = []
    repeated: list[int] = []
    j, n = 0, len(dirs)
    while j < n:
        d = dirs[j]
        k = j + 1
        while k < n and dirs[k] == d:
            k += 1
        (singles if k - j == 1 else repeated).append(d)
        j = k
    return singles, repeated


def _group_lines(keys: list[int], ids: list[int]) -> list[str]:
    """Sort, group and phrase the entries (reference quirks included)."""
    tables = glyph_tables()
    names, plurals = tables.names, tables.plurals
    # Stable sort by key: the entry index breaks ties (at most 21*79 + 72 entries < 2**12).
    order = sorted([key << 12 | i for i, key in enumerate(keys)])
    # (name id, distance rank) -> direction ranks, in order of first appearance.
    groups: dict[int, list[int]] = {}
    for packed in order:
        key = packed >> 12
        group = ids[packed & 0xFFF] << 3 | key >> 4
        dirs = groups.get(group)
        if dirs is None:
            groups[group] = [key & 15]
        else:
            dirs.append(key & 15)
    # Second pass keyed by the *displayed* name, as the reference does (mass-noun quirk).
    line_keys: list[tuple[str, int]] = []
    line_dirs: dict[tuple[str, int], list[int]] = {}
    for group, dirs in groups.items():
        name_id, dist = group >> 3, group & 7
        singles, repeated = _split_repeats(dirs)
        if singles:
            line = (names[name_id], dist)
            line_keys.append(line)
            line_dirs[line] = singles
        if repeated:
            line = (plurals[name_id], dist)
            line_keys.append(line)
            line_dirs[line] = repeated
    lines = []
    for line in line_keys:
        name, dist = line
        directions = join_directions([DIRECTIONS[d] for d in line_dirs[line]])
        lines.append(f"{name} {DISTANCES[dist]} {directions}")
    return lines


def _as_table_index(flat: np.ndarray) -> np.ndarray:
    """Glyphs as uint16 table indices; int16 input is reinterpreted (negatives land on unnamed
    entries), other dtypes have out-of-range values mapped to 0xFFFF (unnamed)."""
    if flat.dtype == np.int16:
        return flat.view(np.uint16)
    if flat.dtype == np.uint16:
        return flat
    wide = flat.astype(np.int64)
    return np.where((wide < 0) | (wide > 0xFFFF), 0xFFFF, wide).astype(np.uint16)


def describe_map(glyphs: np.ndarray, player_x: int, player_y: int) -> str:
    """Language observation of a map.

    Args:
        glyphs: NLE ``glyphs``, shape (21, 79), any integer dtype (normally int16). Values outside
            0..MAX_GLYPH-1 have no name.
        player_x: the player's column (``blstats[0]``), 0..78.
        player_y: the player's row (``blstats[1]``), 0..20.

    Returns:
        The description, lines joined by ``"\\n"`` without a trailing newline; ``""`` when
        nothing is named.

    Raises:
        ValueError: ``glyphs`` does not have 21*79 cells.
    """
    arr = np.asarray(glyphs)
    if arr.size != MAP_ROWS * MAP_COLS:
        raise ValueError(f"glyphs must have shape (21, 79), got {arr.shape}")
    flat = _as_table_index(arr.reshape(-1))
    px, py = int(player_x), int(player_y)
    keys: list[int] = []
    ids: list[int] = []
    _screen_entries(flat, px, py, keys, ids)
    _ray_entries(flat, px, py, keys, ids)
    return "\n".join(_group_lines(keys, ids))
