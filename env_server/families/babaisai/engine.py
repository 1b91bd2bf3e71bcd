"""One step of the rule engine: moves, pushes, pulls, win/lose checks, rule re-reading.

Source of reference behaviour: nacloos/baba-is-ai ``grid.py``, ``BabaIsYouEnv.step`` and
``move`` (the rules are summed up in docs/families/babaisai.md). Per non-idle step:

1. Every YOU thing lying on top of its cell, in row-major order of the cells at the start of the
   step, turns to the move's direction and moves one cell:
   - a pushable thing in front (text always, PUSH objects) is pushed first, recursively, so a
     whole chain moves or none of it does past a blocker;
   - the mover then enters the cell in front if it is empty or its top thing does not block
     (blocking: the border, text blocks, STOP objects), stacking on top; else it stays;
   - the win/lose check looks at the top thing of the cell the mover ends in *before* it enters:
     a WIN thing wins, a LOSE thing loses; a mover that stays checks its own cell, i.e. itself
     (so ``baba is win`` with ``baba is you`` wins on any blocked move);
   - a PULL thing behind a mover that moved follows it;
   - an OPEN thing moving into a SHUT thing (or the reverse) destroys both.
2. MOVE things that have not moved yet step once in the direction they face.
3. The rules are read again from the whole grid; NOUN IS NOUN rules then transform objects.
   (They are only re-read when a text block moved: objects never lie on top of text, so the
   top-of-cell text, which alone forms rules, changes only then.)

The checks of step 1 use the rules in force *before* the step. A thing moves at most once per
step by its own property (a YOU thing pushed onto a later cell does not move again).

Deliberate differences from the reference, each a defect there:
- with several YOU things the step wins when *any* of them wins (the reference keeps only the
  last mover's result); it is lost when none wins and any loses;
- a PULL thing follows only a mover that really moved (the reference pulls even when blocked);
- OPEN/SHUT destroy both things and stop that move (the reference then moves a wrong thing);
- a transformation replaces the objects in place, at every stack depth, with the new noun's
  default colour (the reference stacks the new object over the old one).
"""

from __future__ import annotations

from dataclasses import dataclass

from env_server.families.babaisai.grid import Board
from env_server.families.babaisai.rules import (
    BLOCKS,
    LOSE,
    MOVE,
    OPEN,
    PULL,
    PUSHABLE,
    SHUT,
    WIN,
    YOU,
    Ruleset,
    read_rules,
    ruleset_of,
)
from env_server.families.babaisai.things import (
    DEFAULT_COLOUR,
    DIRECTIONS,
    INFO,
    IS_OBJECT,
    IS_TEXT,
    object_code,
    with_direction,
)

IDLE = 0  # action index of ``idle``; 1..4 are up, right, down, left (direction = action - 1)


@dataclass(frozen=True)
class StepOutcome:
    """What one step did.

    ``won``/``lost``: a YOU thing met a WIN / LOSE thing (checked with the rules before the
    step). ``no_you``: after the step no thing on top of a cell is YOU, so nothing can move any
    more. ``rules_changed``: a text block moved (the rules were read again).
    ``ruleset``: the rules in force after the step.
    """

    won: bool
    lost: bool
    no_you: bool
    rules_changed: bool
    ruleset: Ruleset


class _Mover:
    """Moves things on a packed cell list in place (see the module doc for the rules)."""

    __slots__ = ("arrived", "cells", "height", "props", "text_moved", "turn", "width")

    def __init__(self, cells: list[int], width: int, props: tuple[int, ...], turn: bool):
        self.turn = turn
        self.cells = cells
        self.width = width
        self.height = len(cells) // width
        self.props = props
        self.arrived: set[int] = set()
        self.text_moved = False

    def move(self, i: int, d: int) -> tuple[int, bool, bool]:
        """Move the top thing of cell ``i`` one cell in direction ``d``.

        Returns ``(cell it ends in, win, lose)``.
        """
        cells, props, w = self.cells, self.props, self.width
        t = cells[i] & 0xFF
        if not t:
            return i, False, False
        dx, dy = DIRECTIONS[d]
        x, y = i % w + dx, i // w + dy
        if not (0 <= x < w and 0 <= y < self.height):
            return i, bool(props[t] & WIN), bool(props[t] & LOSE)
        f = y * w + x
        ft = cells[f] & 0xFF
        pt = props[t]
        if ft:
            pf = props[ft]
            if (pt & OPEN and pf & SHUT) or (pt & SHUT and pf & OPEN):
                cells[i] >>= 8
                cells[f] >>= 8
                return i, False, False
            if pf & PUSHABLE:
                self.move(f, d)
                ft = cells[f] & 0xFF
        dest = f if not ft or not props[ft] & BLOCKS else i
        check = props[cells[dest] & 0xFF]
        won, lost = bool(check & WIN), bool(check & LOSE)
        if dest != i:
            cells[i] >>= 8
            cells[dest] = (cells[dest] << 8) | (with_direction(t, d) if self.turn else t)
            self.arrived.add(dest)
            if IS_TEXT[t]:
                self.text_moved = True
            bx, by = i % w - dx, i // w - dy
            if 0 <= bx < w and 0 <= by < self.height:
                b = by * w + bx
                bt = cells[b] & 0xFF
                if bt and props[bt] & PULL:
                    self.move(b, d)
        return dest, won, lost


def _apply_transforms(cells: list[int], ruleset: Ruleset) -> None:
    mapping = dict(ruleset.transforms)
    for i, cell in enumerate(cells):
        if not cell:
            continue
        out, shift, changed = 0, 0, False
        while cell:
            code = cell & 0xFF
            info = INFO[code]
            if IS_OBJECT[code] and info.noun in mapping:
                new = mapping[info.noun]
                code = object_code(new, DEFAULT_COLOUR[new], info.direction)
                changed = True
            out |= code << shift
            shift += 8
            cell >>= 8
        if changed:
            cells[i] = out


def has_you(cells: list[int] | tuple[int, ...], props: tuple[int, ...]) -> bool:
    """True when some thing on top of a cell is YOU (only top things can move)."""
    return any(c and props[c & 0xFF] & YOU for c in cells)


def advance(board: Board, ruleset: Ruleset, action: int) -> StepOutcome:
    """Apply one action (0 idle, 1 up, 2 right, 3 down, 4 left) to ``board`` in place.

    Args:
        board: the grid, modified in place.
        ruleset: the rules in force before the step (``rules.ruleset_for(board)`` at the start).
        action: the action index.

    Returns:
        A ``StepOutcome``; its ``ruleset`` is the one to pass to the next call.

    Raises:
        ValueError: action outside 0..4.
    """
    if not 0 <= action <= 4:
        raise ValueError(f"action must be 0..4, got {action}")
    return advance_cells(board.cells, board.width, ruleset, action)


def advance_cells(
    cells: list[int], width: int, ruleset: Ruleset, action: int, turn: bool = True
) -> StepOutcome:
    """``advance`` on a bare packed cell list (``Board.cells``), modified in place.

    The solver's fast path; ``action`` must be 0..4 (not checked). ``turn=False`` leaves every
    object facing where it faced (the solver's choice when no MOVE rule can ever form, since
    facing matters only for MOVE things).
    """
    if action == IDLE:
        return StepOutcome(False, False, not has_you(cells, ruleset.props), False, ruleset)
    d = action - 1
    props = ruleset.props
    mover = _Mover(cells, width, props, turn)
    won = lost = False
    starts = [i for i, c in enumerate(cells) if c and props[c & 0xFF] & YOU]
    for i in starts:
        t = cells[i] & 0xFF
        if i in mover.arrived or not props[t] & YOU:
            continue
        if turn:
            cells[i] = (cells[i] & ~0xFF) | with_direction(t, d)
        dest, w, lo = mover.move(i, d)
        mover.arrived.add(dest)
        won = won or w
        lost = lost or lo
    movers = (
        [i for i, c in enumerate(cells) if c and props[c & 0xFF] & MOVE] if ruleset.any_move
        else []
    )
    for i in movers:
        t = cells[i] & 0xFF
        if i in mover.arrived or not props[t] & MOVE:
            continue
        dest, _, _ = mover.move(i, INFO[t].direction)
        mover.arrived.add(dest)
    new_rules = ruleset_of(read_rules(cells, width)) if mover.text_moved else ruleset
    if new_rules.transforms:
        _apply_transforms(cells, new_rules)
    return StepOutcome(
        won=won,
        lost=lost and not won,
        no_you=not has_you(cells, new_rules.props),
        rules_changed=mover.text_moved,
        ruleset=new_rules,
    )
