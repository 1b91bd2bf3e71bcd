"""Crafter observation text (docs/families/crafter.md), our own code.

Long-term text (kept in the history):

    [<status sentence>
    <blank line>]
    You see:
    - <name> <location>
    ...                               (or: You see nothing away from you.)
    <blank line>
    You face <name> at your front.

Short-term text (shown once): ``Your status:`` with health/food/drink/energy as ``<n>/9``, a
blank line, then ``Your inventory:`` with ``- <item>: <count>`` for every other item held, or
``You have nothing in your inventory.``.

Two formats of the "You see" lines (``TextOptions.text_format``):

- ``legacy`` (BALROG before its PR #55, the format behind the published leaderboard): one line
  per item kind present, ordered by crafter's semantic id, each naming the nearest cell
  (Manhattan distance; ties go to the west-most, then north-most cell):
  ``- <name> <d> steps to your <dir>``, always "steps".
- ``current`` (BALROG after PR #55): cells scanned column by column from west to east, each
  column north to south; options ``unique_items`` (keep only the nearest cell of each kind, the
  first one met on ties, listed in the order the kinds were first met), ``precise_location``
  (``<a> step[s] north|south and <b> step[s] west|east``), ``skip_items`` (never listed; facing
  one reads "nothing"), ``edge_only_items`` (only cells with an orthogonal neighbour inside the
  window that is of another kind, as scipy's default binary dilation in the reference).
  "step" is singular for 1.

``<dir>`` is north, south, east, west or a pair with the vertical word first (``north-west``).
Both formats read the faced cell as ``[x, y]`` (BALROG's PR #50 fix) and treat cells outside the
map as absent (the reference's negative-slice defect at the west/north edges is not copied), so
the "out of the map" fallback text of the reference never arises. The sleeping and death
sentences are our own wording, followed by one blank line as docs/families/crafter.md
states (the reference code actually leaves three blank lines there).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from env_server.families.crafter.manifest import TEXT_FORMATS  # noqa: F401  (re-exported; the manifest owns it)
from env_server.families.crafter.vocab import (
    ITEMS,
    PLAYER_ID,
    SEMANTIC_ID,
    SEMANTIC_NAMES,
    VITAL_MAX,
    VITALS,
)
from env_server.families.crafter.window import CENTER, OUTSIDE, Frame, local_window

SLEEPING_TEXT = "You are asleep; you cannot act until your energy is full again."
DEAD_TEXT = "You have died."
NOTHING_SEEN = "You see nothing away from you."
EMPTY_INVENTORY = "You have nothing in your inventory."


@dataclass(frozen=True)
class TextOptions:
    """How the "You see" block is written (defaults = BALROG's defaults, legacy format).

    ``skip_items`` / ``edge_only_items`` hold names from ``vocab.LISTABLE_ITEMS``; only the
    ``current`` format reads the four options (``config.parse_kwargs`` enforces that).
    """

    text_format: str = "legacy"
    unique_items: bool = True
    precise_location: bool = False
    skip_items: tuple[str, ...] = ()
    edge_only_items: tuple[str, ...] = ()


# -- phrases ----------------------------------------------------------------------------------


def steps_phrase(n: int, *, always_plural: bool = False) -> str:
    """``"1 step"`` / ``"<n> steps"``; ``always_plural`` gives ``"1 steps"`` (legacy)."""
    return f"{n} step" if n == 1 and not always_plural else f"{n} steps"


def direction_word(dx: int, dy: int) -> str:
    """Compass word for an offset (dx east, dy south), vertical part first: ``north-west``."""
    parts = []
    if dy:
        parts.append("north" if dy < 0 else "south")
    if dx:
        parts.append("west" if dx < 0 else "east")
    return "-".join(parts)


def rough_location(dx: int, dy: int, *, always_plural: bool = False) -> str:
    """``<d> step[s] to your <dir>`` with d = |dx| + |dy| (the default location phrase)."""
    distance = abs(dx) + abs(dy)
    return f"{steps_phrase(distance, always_plural=always_plural)} to your " + direction_word(
        dx, dy
    )


def precise_location(dx: int, dy: int) -> str:
    """``<a> step[s] north|south and <b> step[s] west|east``; a zero part is left out."""
    parts = []
    if dy:
        parts.append(f"{steps_phrase(abs(dy))} {'north' if dy < 0 else 'south'}")
    if dx:
        parts.append(f"{steps_phrase(abs(dx))} {'west' if dx < 0 else 'east'}")
    return " and ".join(parts)


# -- the "You see" lines ----------------------------------------------------------------------

_Cells = list[list[int]]  # window as nested lists, [x][y]


def _scan(cells: _Cells) -> list[tuple[int, int, int]]:
    """``(id, dx, dy)`` of every visible cell in scan order (west to east, north to south),
    without the player and cells outside the map."""
    found = []
    for x, column in enumerate(cells):
        for y, ident in enumerate(column):
            if ident != OUTSIDE and ident != PLAYER_ID:
                found.append((ident, x - CENTER[0], y - CENTER[1]))
    return found


def legacy_items(cells: _Cells, options: TextOptions) -> list[str]:
    """Legacy lines: nearest cell per kind, kinds in semantic-id order, "steps" always.

    ``options`` is unused (the legacy format has no options); kept for the common signature.
    """
    del options
    nearest: dict[int, tuple[int, int, int]] = {}
    for ident, dx, dy in _scan(cells):  # scan order makes ties go west-most, then north-most
        distance = abs(dx) + abs(dy)
        if ident not in nearest or distance < nearest[ident][0]:
            nearest[ident] = (distance, dx, dy)
    return [
        f"- {SEMANTIC_NAMES[ident]} {rough_location(dx, dy, always_plural=True)}"
        for ident, (_, dx, dy) in sorted(nearest.items())
    ]


def _on_edge(cells: _Cells, x: int, y: int) -> bool:
    """The cell has an orthogonal neighbour inside the window and the map of another kind."""
    ident = cells[x][y]
    for nx, ny in ((x - 1, y), (x + 1, y), (x, y - 1), (x, y + 1)):
        if 0 <= nx < len(cells) and 0 <= ny < len(cells[nx]):
            other = cells[nx][ny]
            if other != OUTSIDE and other != ident:
                return True
    return False


def current_items(cells: _Cells, options: TextOptions) -> list[str]:
    """Current-format lines (scan order, optional filters, singular "step")."""
    skip = {SEMANTIC_ID[name] for name in options.skip_items}
    edge_only = {SEMANTIC_ID[name] for name in options.edge_only_items}
    place = precise_location if options.precise_location else rough_location
    listed: list[tuple[str, int, str]] = []  # (name, distance, location)
    for ident, dx, dy in _scan(cells):
        if ident in skip:
            continue
        if ident in edge_only and not _on_edge(cells, dx + CENTER[0], dy + CENTER[1]):
            continue
        listed.append((SEMANTIC_NAMES[ident], abs(dx) + abs(dy), place(dx, dy)))
    if options.unique_items:
        nearest: dict[str, tuple[str, int, str]] = {}  # insertion order = first met
        for entry in listed:
            if entry[0] not in nearest or entry[1] < nearest[entry[0]][1]:
                nearest[entry[0]] = entry
        listed = list(nearest.values())
    return [f"- {name} {location}" for name, _, location in listed]


#: text_format -> lister of the "You see" lines (window cells, options) -> lines.
ITEM_LISTERS: dict[str, Callable[[_Cells, TextOptions], list[str]]] = {
    "legacy": legacy_items,
    "current": current_items,
}


# -- blocks -----------------------------------------------------------------------------------


def see_block(lines: list[str]) -> str:
    """``You see:`` and the lines, or the "nothing" sentence."""
    return "\n".join(["You see:", *lines]) if lines else NOTHING_SEEN


def face_line(cells: _Cells, facing: tuple[int, int], skip_items: tuple[str, ...] = ()) -> str:
    """``You face <name> at your front.``: the window cell at centre + facing, read [x, y];
    ``nothing`` when that cell is outside the map or its kind is in ``skip_items``."""
    x, y = CENTER[0] + int(facing[0]), CENTER[1] + int(facing[1])
    ident = cells[x][y] if 0 <= x < len(cells) and 0 <= y < len(cells[x]) else OUTSIDE
    name = "nothing" if ident == OUTSIDE else SEMANTIC_NAMES[ident]
    if name in skip_items:
        name = "nothing"
    return f"You face {name} at your front."


def status_sentence(frame: Frame) -> str:
    """The sleeping sentence, else the death sentence, else ``""`` (sleeping wins, as in the
    reference)."""
    if frame.sleeping:
        return SLEEPING_TEXT
    if frame.dead:
        return DEAD_TEXT
    return ""


def long_term_text(frame: Frame, options: TextOptions, window: np.ndarray | None = None) -> str:
    """The long-term text of one frame (module docstring). ``window``: the frame's
    ``local_window`` if already computed. Raises KeyError for an unknown ``text_format``."""
    lister = ITEM_LISTERS[options.text_format]
    cells: _Cells = (local_window(frame.semantic, frame.pos) if window is None else window).tolist()
    blocks = [
        see_block(lister(cells, options)),
        face_line(cells, frame.facing, options.skip_items),
    ]
    status = status_sentence(frame)
    if status:
        blocks.insert(0, status)
    return "\n\n".join(blocks)


def short_term_text(inventory: Mapping[str, int]) -> str:
    """Vitals then held items (crafter's item order, counts > 0), as described above."""
    vitals = "\n".join(f"- {name}: {int(inventory[name])}/{VITAL_MAX}" for name in VITALS)
    held = [f"- {name}: {int(inventory[name])}" for name in ITEMS if inventory.get(name, 0) > 0]
    items = "\n".join(["Your inventory:", *held]) if held else EMPTY_INVENTORY
    return f"Your status:\n{vitals}\n\n{items}"
