"""The grid: a row-major list of cell stacks, each stack packed into one Python int.

A cell holds a stack of things, as in the reference; the top one is what counts for display and
blocking. A stack of codes ``c1`` (bottom) .. ``ck`` (top) is the
int ``c1 << 8*(k-1) | ... | ck``: the top is the lowest byte, 0 is an empty cell. This keeps a
whole grid state a flat tuple of ints, cheap to copy and hash for the solver.

Coordinates: ``x`` grows to the right, ``y`` downward, ``(0, 0)`` is the top-left border cell;
cell index = ``y * width + x``.
"""

from __future__ import annotations

from collections.abc import Iterator

from env_server.families.babaisai.things import BORDER


def stack_top(cell: int) -> int:
    """The top code of a packed stack (0 for an empty cell)."""
    return cell & 0xFF


def stack_push(cell: int, code: int) -> int:
    """The stack with ``code`` put on top."""
    return (cell << 8) | code


def stack_pop(cell: int) -> int:
    """The stack without its top thing (an empty stack stays empty)."""
    return cell >> 8


def stack_codes(cell: int) -> list[int]:
    """The codes of a packed stack, top first."""
    codes = []
    while cell:
        codes.append(cell & 0xFF)
        cell >>= 8
    return codes


class Board:
    """A mutable grid of ``width`` x ``height`` cell stacks (packed ints, see module doc).

    Args:
        width, height: size in cells, border included (>= 3 each).
        cells: optional row-major packed stacks (length ``width * height``); default: an
            empty interior inside a one-cell border ring.

    Raises:
        ValueError: bad size or a ``cells`` list of the wrong length.
    """

    def __init__(self, width: int, height: int, cells: list[int] | None = None):
        if width < 3 or height < 3:
            raise ValueError(f"grid must be at least 3x3, got {width}x{height}")
        self.width = width
        self.height = height
        if cells is None:
            cells = [0] * (width * height)
            for x in range(width):
                cells[x] = BORDER
                cells[(height - 1) * width + x] = BORDER
            for y in range(height):
                cells[y * width] = BORDER
                cells[y * width + width - 1] = BORDER
        elif len(cells) != width * height:
            raise ValueError(f"cells: expected {width * height} stacks, got {len(cells)}")
        self.cells = list(cells)

    def index(self, x: int, y: int) -> int:
        """The cell index of ``(x, y)``; raises ``IndexError`` outside the grid."""
        if not (0 <= x < self.width and 0 <= y < self.height):
            raise IndexError(f"({x}, {y}) is outside the {self.width}x{self.height} grid")
        return y * self.width + x

    def position(self, index: int) -> tuple[int, int]:
        """``(x, y)`` of a cell index."""
        return index % self.width, index // self.width

    def top(self, x: int, y: int) -> int:
        """The top code at ``(x, y)``, 0 when empty."""
        return stack_top(self.cells[self.index(x, y)])

    def codes(self, x: int, y: int) -> list[int]:
        """All codes at ``(x, y)``, top first."""
        return stack_codes(self.cells[self.index(x, y)])

    def put(self, x: int, y: int, code: int) -> None:
        """Stack ``code`` on top of ``(x, y)``."""
        i = self.index(x, y)
        self.cells[i] = stack_push(self.cells[i], code)

    def remove_top(self, x: int, y: int) -> int:
        """Take the top thing off ``(x, y)`` and return its code (0 if the cell was empty)."""
        i = self.index(x, y)
        code = stack_top(self.cells[i])
        self.cells[i] = stack_pop(self.cells[i])
        return code

    def is_empty(self, x: int, y: int) -> bool:
        """True when nothing lies at ``(x, y)``."""
        return self.cells[self.index(x, y)] == 0

    def copy(self) -> Board:
        """An independent copy."""
        return Board(self.width, self.height, self.cells)

    def key(self) -> tuple[int, ...]:
        """The state as a hashable tuple (equal tuples = equal grids)."""
        return tuple(self.cells)

    def tops(self) -> Iterator[tuple[int, int, int]]:
        """``(x, y, top_code)`` of every non-empty cell in row-major order."""
        w = self.width
        for i, cell in enumerate(self.cells):
            if cell:
                yield i % w, i // w, cell & 0xFF

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Board)
            and (self.width, self.height) == (other.width, other.height)
            and self.cells == other.cells
        )

    __hash__ = None  # type: ignore[assignment]  # mutable
