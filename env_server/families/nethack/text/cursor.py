"""Cursor text (the ``cursor`` block of the observation).

The terminal cursor (``tty_cursor`` = (row, column)) sits on the player during normal play and
moves over the map when the game asks for a position, or onto the message line for prompts.
The cursor's map cell is (column, row - 1) because screen row 0 is the message line.

- On the player's own cell: ``Yourself a <screen name>`` (e.g. ``Yourself a samurai``).
- On another map cell: ``<distance> <direction> <screen name>``; the name may be empty, leaving a
  trailing space (e.g. the cursor over floor).
- Elsewhere (message line, status lines, the top-left map cell): ``""``.

Reference behaviour reproduced: validity is judged on the flat index ``column + (row - 1) * 79``
(it must lie strictly between 0 and 21*79), so column 79 of a row names the glyph at column 0 of
the next map row while the distance and direction are computed from column 79.
"""

from __future__ import annotations

import numpy as np

from .compass import MAX_DX, MAX_DY, key_words, offset_key
from .glyphs import glyph_tables
from .language import MAP_COLS, MAP_ROWS


def describe_cursor(glyphs: np.ndarray, blstats: np.ndarray, tty_cursor: np.ndarray) -> str:
    """Describe what the terminal cursor points at.

    Args:
        glyphs: NLE ``glyphs``, shape (21, 79).
        blstats: NLE ``blstats`` (27 int64); uses [0] = player x and [1] = player y.
        tty_cursor: NLE ``tty_cursor`` (2 uint8): (row, column) on the 24x80 terminal.

    Returns:
        The cursor text (see the module docstring), possibly ``""``.
    """
    player_x, player_y = int(blstats[0]), int(blstats[1])
    cursor_x = int(tty_cursor[1])
    cursor_y = int(tty_cursor[0]) - 1
    dx = cursor_x - player_x
    dy = player_y - cursor_y
    index = cursor_x + cursor_y * MAP_COLS
    inside = -MAX_DX <= dx < MAX_DX and -MAX_DY <= dy < MAX_DY
    if not inside or not 0 < index < MAP_ROWS * MAP_COLS:
        return ""
    glyph = int(np.asarray(glyphs).reshape(-1)[index])
    name = glyph_tables().screen_name(glyph)
    if dx == 0 and dy == 0:
        return "Yourself a " + name
    distance, direction = key_words(offset_key(dx, dy))
    return f"{distance} {direction} {name}"
