"""Reading the active rules off the grid and turning them into per-code property bits.

Source of reference behaviour: nacloos/baba-is-ai ``rule.py``. For every
``is`` block on top of its cell, in row-major order: horizontally (when the cells to its left and
right exist) first the 4-block colour form ``[colour][noun] is [property]`` using the two cells on
the left, else ``[noun] is [property]`` or ``[noun] is [noun]``; then the same vertically (cells
above and below, read top to bottom). Only the top thing of a cell takes part.

Deliberate difference: the reference lets a colour rule *narrow* a plain rule of the same noun
and property (with ``key is win`` and ``red key is win`` a blue key is not WIN); here a thing has
a property when any rule gives it one (plain rule, or colour rule with its colour).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from env_server.families.babaisai.grid import Board
from env_server.families.babaisai.things import (
    BORDER,
    COLOURS,
    INFO,
    IS_CODE,
    KIND_COLOUR_TEXT,
    KIND_IS_TEXT,
    KIND_NOUN_TEXT,
    KIND_OBJECT,
    KIND_PROPERTY_TEXT,
    N_CODES,
    NOUNS,
    PROPERTIES,
    object_code,
)

# Property bits (one per property word, in PROPERTIES order) and two derived bits.
PROP_BIT: dict[str, int] = {p: 1 << i for i, p in enumerate(PROPERTIES)}
YOU, WIN, STOP, PUSH, LOSE, PULL, MOVE, OPEN, SHUT = (PROP_BIT[p] for p in PROPERTIES)
BLOCKS = 1 << 10  # cannot be entered: the border, text blocks, STOP objects
PUSHABLE = 1 << 11  # moves when pushed: text blocks, PUSH objects


@dataclass(frozen=True)
class Rule:
    """One active rule: ``noun is prop`` (``colour`` optional) or ``noun is target``."""

    noun: str
    prop: str = ""
    target: str = ""
    colour: str = ""

    def text(self, with_colour: bool = True) -> str:
        """``"key is win"``, ``"red key is win"`` (colour shown when asked), ``"key is ball"``."""
        head = f"{self.colour} {self.noun}" if self.colour and with_colour else self.noun
        return f"{head} is {self.prop or self.target}"


@dataclass(frozen=True)
class Ruleset:
    """The rules in reading order and what they mean for every code.

    ``props[code]`` is the bit mask (``YOU``, ``WIN``, ... , ``BLOCKS``, ``PUSHABLE``) of a thing;
    ``transforms`` maps a noun to the noun its objects turn into (first rule read wins);
    ``any_move``: some rule gives MOVE (else the MOVE phase of a step is skipped).
    """

    rules: tuple[Rule, ...]
    props: tuple[int, ...]
    transforms: tuple[tuple[str, str], ...]
    any_move: bool = False

    def texts(self, with_colour: bool = True) -> list[str]:
        """Every rule as text, in reading order."""
        return [r.text(with_colour) for r in self.rules]


def _match(codes: list[int]) -> Rule | None:
    kinds = [INFO[c].kind for c in codes]
    words = [INFO[c].word for c in codes]
    if len(codes) == 4:
        if kinds == [KIND_COLOUR_TEXT, KIND_NOUN_TEXT, KIND_IS_TEXT, KIND_PROPERTY_TEXT]:
            return Rule(noun=words[1], prop=words[3], colour=words[0])
        return None
    if kinds[0] != KIND_NOUN_TEXT or kinds[1] != KIND_IS_TEXT:
        return None
    if kinds[2] == KIND_PROPERTY_TEXT:
        return Rule(noun=words[0], prop=words[2])
    if kinds[2] == KIND_NOUN_TEXT:
        return Rule(noun=words[0], target=words[2])
    return None


def read_rules(cells: list[int] | tuple[int, ...], width: int) -> tuple[Rule, ...]:
    """The rules formed on a grid, in the reference reading order (module doc).

    Args:
        cells: row-major packed stacks (``Board.cells``); width: cells per row.
    """
    height = len(cells) // width
    found: list[Rule] = []
    for i, cell in enumerate(cells):
        if cell & 0xFF != IS_CODE:
            continue
        x, y = i % width, i // width
        for dx, dy in ((1, 0), (0, 1)):
            bx, by, ax, ay = x - dx, y - dy, x + dx, y + dy
            if bx < 0 or by < 0 or ax >= width or ay >= height:
                continue
            before = cells[by * width + bx] & 0xFF
            after = cells[ay * width + ax] & 0xFF
            rule = None
            if x - 2 * dx >= 0 and y - 2 * dy >= 0:
                first = cells[(y - 2 * dy) * width + (x - 2 * dx)] & 0xFF
                rule = _match([first, before, IS_CODE, after])
            if rule is None:
                rule = _match([before, IS_CODE, after])
            if rule is not None:
                found.append(rule)
    return tuple(found)


def _base_props() -> list[int]:
    props = [0] * N_CODES
    props[BORDER] = BLOCKS
    for code in range(N_CODES):
        if INFO[code].is_text:
            props[code] = BLOCKS | PUSHABLE
    return props


_BASE = tuple(_base_props())


@lru_cache(maxsize=4096)
def ruleset_of(rules: tuple[Rule, ...]) -> Ruleset:
    """The ``Ruleset`` of a rule tuple (cached: a pure function of the rules)."""
    props = list(_BASE)
    for rule in rules:
        if not rule.prop:
            continue
        bit = PROP_BIT[rule.prop]
        colours = (rule.colour,) if rule.colour else COLOURS
        for colour in colours:
            for d in range(4):
                props[object_code(rule.noun, colour, d)] |= bit
    for code in range(N_CODES):
        p = props[code]
        if INFO[code].kind == KIND_OBJECT:
            if p & STOP:
                p |= BLOCKS
            if p & PUSH:
                p |= PUSHABLE
            props[code] = p
    transforms: dict[str, str] = {}
    for rule in rules:
        if rule.target and rule.noun not in transforms and rule.noun in NOUNS:
            transforms[rule.noun] = rule.target
    return Ruleset(
        rules=rules,
        props=tuple(props),
        transforms=tuple((a, b) for a, b in transforms.items() if a != b),
        any_move=any(r.prop == "move" for r in rules),
    )


def ruleset_for(board: Board) -> Ruleset:
    """The ``Ruleset`` formed on ``board`` right now."""
    return ruleset_of(read_rules(board.cells, board.width))
