"""The Boxoban level text format: parse, format, read and write level files.

A Boxoban level is a rectangle of ASCII characters (10x10 in the official sets):

- ``#`` wall, ``@`` player, ``$`` box, ``.`` goal, space floor.

Coordinates are ``(x, y)`` with ``x`` the column and ``y`` the row, both counted from 0 at the
top-left corner of the text. Official level files hold many levels, each headed by a line
``; N`` (N is the level number inside the file) and followed by a blank line.

Boxes that start on a goal (``*``) and a player standing on a goal (``+``) are rejected: the
official Boxoban sets never contain them, and MiniHack's Boxoban task cannot show them (it finds
its targets by looking for visible fountains at reset).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from moria.files import atomic_write_text

Pos = tuple[int, int]

WALL = "#"
PLAYER = "@"
BOX = "$"
GOAL = "."
FLOOR = " "
_ALLOWED = frozenset(WALL + PLAYER + BOX + GOAL + FLOOR)
BOXOBAN_BOXES = 4


@dataclass(frozen=True)
class Level:
    """One Sokoban position on a rectangular grid.

    Attributes:
        walls: wall cells ``(x, y)``.
        goals: goal cells.
        boxes: box cells (disjoint from goals in a parsed level; the solver accepts overlaps).
        player: the player cell.
        width: number of columns.
        height: number of rows.
    """

    walls: frozenset[Pos]
    goals: frozenset[Pos]
    boxes: frozenset[Pos]
    player: Pos
    width: int
    height: int

    def with_state(self, player: Pos, boxes: Iterable[Pos]) -> Level:
        """Return the same room with another player cell and box set."""
        return Level(
            walls=self.walls,
            goals=self.goals,
            boxes=frozenset(boxes),
            player=player,
            width=self.width,
            height=self.height,
        )

    @property
    def solved(self) -> bool:
        """True when every box stands on a goal."""
        return self.boxes == self.goals


def _strip_header(lines: list[str]) -> list[str]:
    while lines and (not lines[0].strip() or lines[0].lstrip().startswith(";")):
        lines = lines[1:]
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


def parse_level(text: str, *, n_boxes: int | None = BOXOBAN_BOXES) -> Level:
    """Parse one level from its text.

    Args:
        text: the level rows separated by newlines. A leading ``; N`` header line and leading or
            trailing blank lines are ignored; short rows are padded with floor on the right.
        n_boxes: the number of boxes (and goals) required; ``None`` accepts any positive number
            as long as boxes and goals are equally many.

    Returns:
        The parsed :class:`Level`.

    Raises:
        ValueError: unknown characters, no or several players, box and goal counts that differ
            or are not ``n_boxes``, or an empty text. The message says what is wrong.
    """
    lines = _strip_header(text.replace("\r\n", "\n").split("\n"))
    if not lines:
        raise ValueError("level text is empty")
    width = max(len(line) for line in lines)
    height = len(lines)
    walls: set[Pos] = set()
    goals: set[Pos] = set()
    boxes: set[Pos] = set()
    players: list[Pos] = []
    for y, line in enumerate(lines):
        for x, ch in enumerate(line):
            if ch not in _ALLOWED:
                hint = ""
                if ch in "*+":
                    hint = " (a box or player starting on a goal is not supported)"
                raise ValueError(f"unknown character {ch!r} at x={x}, y={y}{hint}")
            if ch == WALL:
                walls.add((x, y))
            elif ch == GOAL:
                goals.add((x, y))
            elif ch == BOX:
                boxes.add((x, y))
            elif ch == PLAYER:
                players.append((x, y))
    if len(players) != 1:
        raise ValueError(f"a level needs exactly one player '@', found {len(players)}")
    if len(boxes) != len(goals):
        raise ValueError(f"boxes and goals differ: {len(boxes)} boxes '$', {len(goals)} goals '.'")
    if n_boxes is not None and len(boxes) != n_boxes:
        raise ValueError(f"expected {n_boxes} boxes and goals, found {len(boxes)}")
    if not boxes:
        raise ValueError("a level needs at least one box and one goal")
    return Level(
        walls=frozenset(walls),
        goals=frozenset(goals),
        boxes=frozenset(boxes),
        player=players[0],
        width=width,
        height=height,
    )


def format_level(level: Level) -> str:
    """Render a level as text: ``height`` rows of ``width`` characters joined by ``\\n``.

    There is no trailing newline and no ``; N`` header. A box on a goal is written ``*`` and the
    player on a goal ``+`` (only reachable for states, never in a parsed level).
    """
    rows = []
    for y in range(level.height):
        row = []
        for x in range(level.width):
            p = (x, y)
            if p in level.walls:
                ch = WALL
            elif p == level.player:
                ch = "+" if p in level.goals else PLAYER
            elif p in level.boxes:
                ch = "*" if p in level.goals else BOX
            elif p in level.goals:
                ch = GOAL
            else:
                ch = FLOOR
            row.append(ch)
        rows.append("".join(row))
    return "\n".join(rows)


def read_level_file(path: str | os.PathLike[str]) -> list[str]:
    """Read a level file in the official layout.

    Returns:
        The level texts in file order, each as rows joined by ``\\n`` without header or trailing
        newline. A final level without a closing blank line is kept.

    Raises:
        OSError: the file cannot be read.
    """
    levels: list[str] = []
    current: list[str] = []
    for raw in Path(path).read_text(encoding="utf-8").splitlines():
        line = raw.rstrip("\r")
        if line.startswith(";") or not line.strip():
            if current:
                levels.append("\n".join(current))
            current = []
        else:
            current.append(line)
    if current:
        levels.append("\n".join(current))
    return levels


def write_level_file(path: str | os.PathLike[str], levels: Iterable[str]) -> None:
    """Write levels in the official layout (``; N`` header, rows, blank line per level).

    The file is written atomically (``moria.files.atomic_write_text``: a temporary name beside
    ``path``, renamed into place), so readers never see a partial file. Missing parent folders
    are created. Raises OSError when the file cannot be written (``path`` is then untouched).
    """
    parts = []
    for i, text in enumerate(levels):
        rows = _strip_header(text.split("\n"))
        parts.append(f"; {i}\n" + "\n".join(rows) + "\n\n")
    atomic_write_text(path, "".join(parts))
