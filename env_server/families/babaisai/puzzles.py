"""The 40 BALROG BabaIsAI puzzles: layouts drawn from ``numpy.random.default_rng(seed)``.

Source of reference behaviour: nacloos/baba-is-ai ``envs.py`` (tasks: docs/families/babaisai.md).
Coordinates include the border; x grows to the right, y downward.

Random parts (which nouns and colours obj1/obj2/obj3 are, which cells things go to, which block
of a rule is displaced) all come from the episode's generator, so ``(task, seed)`` fixes the
layout. Random cells are drawn uniformly among the *empty* cells of the allowed area (the
reference rejection-samples the same distribution).

Deliberate difference: the reference puts the ``obj3 is win`` distractor rule of the
``distr_win_rule`` tasks on top of whatever already lies at (9,4)-(11,4), which can bury the
distractor text block or the displaced obj1 word under it; here those three cells are reserved
before anything random is placed, so nothing is ever hidden at the start.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from env_server.families.babaisai.grid import Board
from env_server.families.babaisai.things import object_code, text_code

OBJECT_NAMES: tuple[str, ...] = ("ball", "key", "door")
OBJECT_COLOURS: tuple[str, ...] = ("red", "blue", "green")
BABA = object_code("baba", "white")
WALL = object_code("wall", "grey")

Pos = tuple[int, int]
Obj = tuple[str, str]  # (colour, noun)


@dataclass(frozen=True)
class Puzzle:
    """A generated puzzle: the start grid and BALROG's ``target_plan`` (never shown to a model)."""

    board: Board
    target_plan: str


@dataclass(frozen=True)
class Distractors:
    """Which distractors a puzzle has (the ``-distr_*`` parts of its name)."""

    obj: bool = False
    rule: bool = False
    irrelevant_rule: bool = False
    win_rule: bool = False


class _Layout:
    """A board under construction plus the episode's random generator."""

    def __init__(self, width: int, height: int, rng: np.random.Generator):
        self.board = Board(width, height)
        self.rng = rng

    def put(self, pos: Pos, code: int) -> None:
        if not self.board.is_empty(*pos):
            raise RuntimeError(f"layout bug: cell {pos} is not empty")
        self.board.put(*pos, code)

    def rule(self, words: Sequence[str], start: Pos) -> None:
        """Put text blocks for ``words`` left to right from ``start``."""
        for k, word in enumerate(words):
            self.put((start[0] + k, start[1]), text_code(word))

    def empty_in(self, xs: range, ys: range) -> list[Pos]:
        return [(x, y) for y in ys for x in xs if self.board.is_empty(x, y)]

    def pick(self, cells: Sequence[Pos]) -> Pos:
        if not cells:
            raise RuntimeError("layout bug: no empty cell left in the area")
        return cells[int(self.rng.integers(len(cells)))]

    def place(self, code: int, xs: range, ys: range) -> Pos:
        """Put ``code`` on a random empty cell of the rectangle ``xs`` x ``ys``."""
        pos = self.pick(self.empty_in(xs, ys))
        self.put(pos, code)
        return pos

    def relocate(self, source: Pos, target: Pos) -> None:
        """Move the thing at ``source`` to the empty cell ``target``."""
        code = self.board.remove_top(*source)
        self.put(target, code)

    def objects(self) -> tuple[Obj, Obj, Obj]:
        """obj1, obj2, obj3: three different nouns, each with an independent colour."""
        names = self.rng.choice(len(OBJECT_NAMES), size=3, replace=False)
        colours = self.rng.choice(len(OBJECT_COLOURS), size=3, replace=True)
        a, b, c = (
            (OBJECT_COLOURS[int(k)], OBJECT_NAMES[int(n)])
            for n, k in zip(names, colours, strict=True)
        )
        return a, b, c


def _obj(obj: Obj) -> int:
    return object_code(obj[1], obj[0])


# -- single room (8x8) ---------------------------------------------------------------------------

# Where a distractor text block goes in a single room: spots from which it cannot help make
# obj2 win (bottom row right part, top row right part, right column); (6, 1) is listed twice as
# in the reference.
_SINGLE_DISTRACTOR_SPOTS: tuple[Pos, ...] = (
    (4, 6), (5, 6), (6, 6), (4, 1), (5, 1), (6, 1),
    (6, 1), (6, 2), (6, 3), (6, 4), (6, 5), (6, 6),
)


def single_room(rng: np.random.Generator, *, make_win: bool, distractors: Distractors) -> Puzzle:
    """``goto_win*`` / ``make_win*`` (single room).

    ``baba is you`` at (1,6)-(3,6), ``obj1 is win`` at (1,1)-(3,1); ``make_win`` moves the obj1
    word to an empty cell with x, y in 2..5; ``distractors.rule`` adds a text block naming obj2
    (obj3 with ``irrelevant_rule``) at an unusable spot; baba, obj1 (and obj2 with
    ``distractors.obj``) go to empty cells with y >= 2.
    """
    lay = _Layout(8, 8, rng)
    obj1, obj2, obj3 = lay.objects()
    lay.rule(("baba", "is", "you"), (1, 6))
    lay.rule((obj1[1], "is", "win"), (1, 1))
    if make_win:
        lay.relocate((1, 1), lay.pick(lay.empty_in(range(2, 6), range(2, 6))))
    if distractors.rule:
        spot = _SINGLE_DISTRACTOR_SPOTS[int(rng.integers(len(_SINGLE_DISTRACTOR_SPOTS)))]
        lay.put(spot, text_code(obj3[1] if distractors.irrelevant_rule else obj2[1]))
    interior = (range(1, 7), range(2, 7))
    lay.place(BABA, *interior)
    lay.place(_obj(obj1), *interior)
    if distractors.obj:
        lay.place(_obj(obj2), *interior)
    name = obj1[1]
    plan = f"make[{name} is win], goto[{name}]" if make_win else f"goto[{name}]"
    return Puzzle(lay.board, plan)


# -- two rooms (13x9) ----------------------------------------------------------------------------

_TWO_W, _TWO_H, _DIVIDER_X = 13, 9, 6
# Right-room spots along the right border and the bottom row: a text block there can never be
# pushed into a usable rule position.
_RIGHT_UNPUSHABLE: tuple[Pos, ...] = (
    (11, 2), (11, 3), (11, 4), (11, 5), (11, 6), (11, 7), (10, 7), (9, 7), (8, 7),
)
_AREAS: dict[str, tuple[range, range]] = {
    "left": (range(1, 5), range(1, 8)),
    "right": (range(7, 11), range(2, 8)),
    "anywhere": (range(1, 12), range(2, 8)),
}


def _two_room_base(rng: np.random.Generator) -> _Layout:
    lay = _Layout(_TWO_W, _TWO_H, rng)
    for y in range(1, _TWO_H - 1):
        lay.put((_DIVIDER_X, y), WALL)
    return lay


def two_room(rng: np.random.Generator, *, objects_in: str, stop_broken: bool, make_win: bool,
             distractors: Distractors) -> Puzzle:
    """The ``two_room-*`` goto/break_stop/maybe_break_stop/make_win tasks (two rooms).

    A divider of wall objects at x = 6; ``baba is you`` at (1,7)-(3,7), ``wall is stop`` at
    (1,2)-(3,2), ``obj1 is win`` at (9,1)-(11,1). ``stop_broken`` moves its ``is`` or ``stop``
    block to an empty cell in x 2..5, y 3..5; ``make_win`` moves the obj1 word to x 7..10,
    y 3..5. ``objects_in`` (``left``, ``right``, ``anywhere``) is the area of obj1/obj2; baba
    starts in x 2..5, y 3..5. Distractor text: with ``irrelevant_rule`` a block naming obj3 in
    x 7..10, y 3..5; else with ``obj`` a block naming obj2 at an unusable right/bottom border
    spot; else a block naming obj2 in x 7..10, y 3..5. ``win_rule`` adds ``obj3 is win`` at
    (9,4)-(11,4).
    """
    lay = _two_room_base(rng)
    obj1, obj2, obj3 = lay.objects()
    lay.rule(("baba", "is", "you"), (1, 7))
    lay.rule(("wall", "is", "stop"), (1, 2))
    lay.rule((obj1[1], "is", "win"), (9, 1))
    if distractors.win_rule:
        lay.rule((obj3[1], "is", "win"), (9, 4))
    right_pushable = (range(7, 11), range(3, 6))
    if distractors.rule:
        if distractors.irrelevant_rule:
            lay.place(text_code(obj3[1]), *right_pushable)
        elif distractors.obj:
            spots = [p for p in _RIGHT_UNPUSHABLE if lay.board.is_empty(*p)]
            lay.put(lay.pick(spots), text_code(obj2[1]))
        else:
            lay.place(text_code(obj2[1]), *right_pushable)
    if stop_broken:
        target = lay.pick(lay.empty_in(range(2, 6), range(3, 6)))
        lay.relocate(((2, 2), (3, 2))[int(rng.integers(2))], target)
    if make_win:
        lay.relocate((9, 1), lay.pick(lay.empty_in(*right_pushable)))
    lay.place(BABA, range(2, 6), range(3, 6))
    obj1_pos = lay.place(_obj(obj1), *_AREAS[objects_in])
    if distractors.obj:
        lay.place(_obj(obj2), *_AREAS[objects_in])
    name = obj1[1]
    steps = []
    if not stop_broken and (make_win or obj1_pos[0] > _DIVIDER_X):
        steps.append("break[wall is stop]")
    if make_win:
        steps.append(f"make[{name} is win]")
    steps.append(f"goto[{name}]")
    return Puzzle(lay.board, ", ".join(steps))


def make_you(rng: np.random.Generator, *, make_win: bool) -> Puzzle:
    """``two_room-make_you`` / ``two_room-make_you-make_win``.

    ``baba is you`` at (1,6)-(3,6) (breakable: row 7 is free), ``wall is stop`` at (1,1)-(3,1),
    ``obj1 is win`` at (9,1)-(11,1); a text block naming obj2 at x 2..4, y 3..5; ``make_win``
    moves the obj1 word to x 8..10, y 3..5; baba at x 2..4, y 3..5; obj1 and obj2 in the right
    room. Plan: make ``obj2 is you`` (pushing the obj2 word down onto the ``baba`` word's
    place), then move obj2 onto obj1.
    """
    lay = _two_room_base(rng)
    obj1, obj2, _ = lay.objects()
    lay.rule(("baba", "is", "you"), (1, 6))
    lay.rule(("wall", "is", "stop"), (1, 1))
    lay.rule((obj1[1], "is", "win"), (9, 1))
    left = (range(2, 5), range(3, 6))
    lay.place(text_code(obj2[1]), *left)
    if make_win:
        lay.relocate((9, 1), lay.pick(lay.empty_in(range(8, 11), range(3, 6))))
    lay.place(BABA, *left)
    lay.place(_obj(obj1), *_AREAS["right"])
    lay.place(_obj(obj2), *_AREAS["right"])
    steps = [f"make[{obj2[1]} is you]"]
    if make_win:
        steps.append(f"make[{obj1[1]} is win]")
    steps.append(f"goto[{obj1[1]}]")
    return Puzzle(lay.board, ", ".join(steps))


def make_wall_win(rng: np.random.Generator) -> Puzzle:
    """``two_room-make_wall_win``.

    ``baba is you`` at (1,7)-(3,7), ``wall is stop`` at (2,2)-(4,2), ``obj1 is win`` at
    (9,1)-(11,1) with its obj1 word moved to an unusable border spot; a text block naming obj3 at
    x 8..10, y 3..5; baba at x 2..4, y 3..5; obj1/obj2 in the right room. Plan: break
    ``wall is stop``, make ``wall is win``, step onto a wall.
    """
    lay = _two_room_base(rng)
    obj1, obj2, obj3 = lay.objects()
    lay.rule(("baba", "is", "you"), (1, 7))
    lay.rule(("wall", "is", "stop"), (2, 2))
    lay.rule((obj1[1], "is", "win"), (9, 1))
    lay.place(text_code(obj3[1]), range(8, 11), range(3, 6))
    lay.relocate((9, 1), lay.pick([p for p in _RIGHT_UNPUSHABLE if lay.board.is_empty(*p)]))
    lay.place(BABA, range(2, 5), range(3, 6))
    lay.place(_obj(obj1), *_AREAS["right"])
    lay.place(_obj(obj2), *_AREAS["right"])
    return Puzzle(lay.board, "break[wall is stop], make[wall is win], goto[wall]")


# -- the registry --------------------------------------------------------------------------------

Builder = Callable[[np.random.Generator], Puzzle]


_VARIANTS: dict[str, Distractors] = {
    "": Distractors(),
    "-distr_obj": Distractors(obj=True),
    "-distr_rule": Distractors(rule=True),
    "-distr_obj_rule": Distractors(obj=True, rule=True),
    "-distr_obj-irrelevant_rule": Distractors(obj=True, rule=True, irrelevant_rule=True),
}
_DISTR_WIN_RULE = Distractors(obj=True, rule=True, win_rule=True)


def _registry() -> dict[str, Builder]:
    table: dict[str, Builder] = {}
    for stem, make in (("goto_win", False), ("make_win", True)):
        for suffix, flags in _VARIANTS.items():
            table[stem + suffix] = partial(single_room, make_win=make, distractors=flags)
    two = "two_room-"
    for suffix, flags in _VARIANTS.items():
        table[f"{two}goto_win{suffix}"] = partial(
            two_room, objects_in="left", stop_broken=True, make_win=False, distractors=flags)
    table[f"{two}goto_win-distr_win_rule"] = partial(
        two_room, objects_in="left", stop_broken=True, make_win=False,
        distractors=_DISTR_WIN_RULE)
    for suffix, flags in _VARIANTS.items():
        table[f"{two}break_stop-goto_win{suffix}"] = partial(
            two_room, objects_in="right", stop_broken=False, make_win=False, distractors=flags)
    for suffix, flags in _VARIANTS.items():
        table[f"{two}maybe_break_stop-goto_win{suffix}"] = partial(
            two_room, objects_in="anywhere", stop_broken=False, make_win=False,
            distractors=flags)
    for suffix, flags in _VARIANTS.items():
        table[f"{two}make_win{suffix}"] = partial(
            two_room, objects_in="left", stop_broken=True, make_win=True, distractors=flags)
    table[f"{two}make_win-distr_win_rule"] = partial(
        two_room, objects_in="left", stop_broken=True, make_win=True,
        distractors=_DISTR_WIN_RULE)
    for suffix, flags in _VARIANTS.items():
        table[f"{two}break_stop-make_win{suffix}"] = partial(
            two_room, objects_in="right", stop_broken=False, make_win=True, distractors=flags)
    table[f"{two}make_you"] = partial(make_you, make_win=False)
    table[f"{two}make_you-make_win"] = partial(make_you, make_win=True)
    table[f"{two}make_wall_win"] = make_wall_win
    return table


#: Bare puzzle name (``goto_win``, ``two_room-make_you`` ...) -> builder taking the generator.
PUZZLES: dict[str, Builder] = _registry()


def generate(name: str, seed: int) -> Puzzle:
    """The puzzle ``name`` (bare name, see ``PUZZLES``) for ``seed`` (any int >= 0).

    Raises ``KeyError`` for an unknown name.
    """
    return PUZZLES[name](np.random.default_rng(seed))
