"""Hand-written grids: build a ``Board`` from rows of tokens, and print one back.

For tests, debugging and documentation. A sketch lists the *interior* rows; the border ring is
added around them. Tokens are separated by spaces:

- ``.``: an empty cell;
- lower case: an object, ``baba``, ``wall``, ``ball``, ``key``, ``door``, optionally with a colour
  (``red:key``; default: the noun's default colour, e.g. baba white, key blue);
- upper case: a text block, ``BABA``, ``IS``, ``YOU``, ``WIN``, ``RED`` ...;
- ``+`` stacks things in one cell, bottom first (``key+BABA``: a BABA block lying on a key).

Example: ``board_from_sketch(["BABA IS YOU", "baba . key", "KEY IS WIN"])``.
"""

from __future__ import annotations

from collections.abc import Sequence

from env_server.families.babaisai.grid import Board, stack_codes
from env_server.families.babaisai.things import (
    DEFAULT_COLOUR,
    INFO,
    KIND_OBJECT,
    object_code,
    text_code,
)


def _code(token: str) -> int:
    if token.isupper():
        return text_code(token.lower())
    colour, _, noun = token.rpartition(":")
    return object_code(noun, colour or DEFAULT_COLOUR[noun])


def board_from_sketch(rows: Sequence[str]) -> Board:
    """A board whose interior is ``rows`` (module doc).

    Raises:
        ValueError: rows of different lengths, no rows, or an unknown word.
        KeyError: an unknown noun.
    """
    grid = [row.split() for row in rows]
    if not grid or any(len(r) != len(grid[0]) for r in grid):
        raise ValueError("a sketch needs rows with the same number of tokens")
    board = Board(len(grid[0]) + 2, len(grid) + 2)
    for y, row in enumerate(grid, start=1):
        for x, token in enumerate(row, start=1):
            if token == ".":
                continue
            for part in token.split("+"):
                board.put(x, y, _code(part))
    return board


def _token(code: int) -> str:
    info = INFO[code]
    if info.kind == KIND_OBJECT:
        plain = DEFAULT_COLOUR[info.noun] == info.colour
        return info.noun if plain else f"{info.colour}:{info.noun}"
    return info.word.upper()


def sketch_of(board: Board) -> list[str]:
    """The interior rows of ``board`` in sketch tokens (facing directions are not shown)."""
    rows = []
    for y in range(1, board.height - 1):
        tokens = []
        for x in range(1, board.width - 1):
            codes = stack_codes(board.cells[board.index(x, y)])
            tokens.append("+".join(_token(c) for c in reversed(codes)) or ".")
        rows.append(" ".join(tokens))
    return rows
