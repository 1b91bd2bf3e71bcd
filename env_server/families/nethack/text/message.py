"""Message text from the terminal screen.

NLE's ``message`` key holds only the last top-line message; the text a player reads also includes
multi-line messages, menus and pop-up windows drawn over the map. The reference therefore reads
the message off ``tty_chars`` (24 rows x 80 columns, uint8):

- ``indent`` = column of the first non-space byte of row 0. "Trim" strips spaces and 0x1A at both
  ends, except that a string whose first non-blank byte is its last byte trims to ``""``.
- Rows 0 and 1 both blank after trimming -> ``""``.
- Death screen: trimmed row 1 contains ``Points`` or ``list!`` (the top-ten list).
- Walk the 24 rows, each cut from ``indent`` to the end of the row and trimmed; append each
  non-empty row and a newline. As soon as a row contains ``--More--``, ``(end)`` or a page marker
  ``(n of m)`` (the row's *first* ``" of "`` with ``(`` two bytes before and ``)`` five bytes after)
  return the text so far without that row's newline. On a death screen also return (trailing
  newline included) at the second blank row in a row.
- No stop fired -> the message is trimmed row 0 alone.

Reference quirk reproduced: when row 0 is entirely spaces (but row 1 is not), the reference's
indent is "not found" and its row slices start one byte to the left and are 81 bytes long: each
row string is the last byte of the previous row followed by the row. We do the same, reading a
space for the byte before the screen (the reference reads one byte of unrelated memory there).
This only matters when a stop condition fires with a blank row 0, which is the case on NLE's
top-ten screen (row 0 blank, row 1 ``You made the top ten list!``): a word cut at column 79
reappears at the start of the next line (``The Dunge`` / ``eons of Doom on``).

Output bytes are decoded as Latin-1, as the reference's consumer does.
"""

from __future__ import annotations

import numpy as np

ROWS = 24
COLUMNS = 80
_BLANK = b" \x1a"
_STOP_MARKERS = (b"--More--", b"(end)")


def trim(row: bytes) -> bytes:
    """The reference's trim: strip spaces and 0x1A at both ends; a string whose first non-blank
    byte is its last byte (or a one-byte string) trims to ``b""``."""
    stripped = row.lstrip(_BLANK)
    if len(stripped) <= 1:
        return b""
    return stripped.rstrip(_BLANK)


def _is_stop_row(row: bytes) -> bool:
    """True when a trimmed row ends a multi-line message: ``--More--``, ``(end)`` or a page
    marker such as ``(1 of 3)`` around the row's first ``" of "``."""
    if _STOP_MARKERS[0] in row or _STOP_MARKERS[1] in row:
        return True
    pos = row.find(b" of ")
    return pos >= 2 and pos + 5 < len(row) and row[pos - 2] == 0x28 and row[pos + 5] == 0x29


def _row_slices(screen: bytes, indent: int | None) -> list[bytes]:
    """The 24 row strings the reference reads (see the module docstring for ``indent=None``)."""
    if indent is not None:
        return [screen[r * COLUMNS + indent : (r + 1) * COLUMNS] for r in range(ROWS)]
    padded = b" " + screen  # a space stands in for the byte before the screen
    return [padded[r * COLUMNS : (r + 1) * COLUMNS + 1] for r in range(ROWS)]


def extract_message(tty_chars: np.ndarray) -> str:
    """Message (or menu / pop-up text) currently on screen.

    Args:
        tty_chars: NLE ``tty_chars``, shape (24, 80), uint8.

    Returns:
        The message; ``""`` when the two top rows are blank. Multi-line texts are joined with
        ``"\\n"``; a death-screen text ends with ``"\\n"``.

    Raises:
        ValueError: ``tty_chars`` does not have 24*80 cells.
    """
    arr = np.asarray(tty_chars)
    if arr.size != ROWS * COLUMNS:
        raise ValueError(f"tty_chars must have shape (24, 80), got {arr.shape}")
    screen = arr.astype(np.uint8, copy=False).tobytes()
    row0 = screen[:COLUMNS]
    first = trim(row0)
    second = trim(screen[COLUMNS : 2 * COLUMNS])
    if not first and not second:
        return ""
    death_screen = b"Points" in second or b"list!" in second
    if not death_screen and not (b"--More--" in screen or b"(end)" in screen or b" of " in screen):
        return first.decode("latin-1")  # no row can stop the walk
    stripped = row0.lstrip(b" ")
    indent = COLUMNS - len(stripped) if stripped else None
    parts: list[bytes] = []
    blank_rows = 0
    for raw in _row_slices(screen, indent):
        row = trim(raw)
        blank_rows = 0 if row else blank_rows + 1
        if row:
            parts.append(row)
        if _is_stop_row(row):
            return b"".join(parts).decode("latin-1")
        if row:
            parts.append(b"\n")
        if death_screen and blank_rows > 1:
            return b"".join(parts).decode("latin-1")
    return first.decode("latin-1")
