"""The text observation: active rules and the objects relative to the thing you control.

Source of reference behaviour: BALROG ``babaisai/base.py`` (docs/families/babaisai.md). Layout::

    Active rules:
    <one rule per line>

    Objects on the map:
    <one object per line>

Default (``text_fixes=False``), reproducing the reference for comparable scores:

- rules of the form noun-is-property (colour forms too) in reading order, as ``<noun> is
  <property>`` without colour; transformation rules are not listed;
- "you" is the noun of the *last* listed rule with property ``you``; the reference point is the
  first cell in row-major order whose top thing is an object of that noun (if there is none but
  another thing is YOU, the first YOU thing; the reference has no such fallback);
- one line per cell, row-major, whose top thing is a ball, wall object, door, key or a noun /
  ``is`` / property text block (``rule `<word>```); baba, colour text blocks, the border and
  things lying under another thing are never listed; the reference thing's own cell gives an
  empty line when its noun is listed;
- offsets: ``<n> step[s] to the right`` / ``<n> step to the left``, then ``<n> step[s] down``
  / ``<n> step up``, joined by `` and ``; the plural is only ever used for right/down.

``text_fixes=True`` pluralises every direction, shows rule colours and transformation rules, and
lists every thing of every cell (top first), baba and colour text blocks included, except the
reference thing itself; things sharing its cell say ``on your cell``.
"""

from __future__ import annotations

from env_server.families.babaisai.grid import Board, stack_codes
from env_server.families.babaisai.rules import YOU, Ruleset
from env_server.families.babaisai.things import (
    INFO,
    KIND_COLOUR_TEXT,
    KIND_OBJECT,
)

NO_YOU_NOTICE = (
    "Nothing on the map is YOU any more (the rule that made something YOU was broken), so "
    "nothing can move: the episode is lost."
)
_LISTED_NOUNS = frozenset({"ball", "wall", "door", "key"})


def rule_lines(ruleset: Ruleset, text_fixes: bool) -> list[str]:
    """The lines under ``Active rules:`` (see the module doc for both modes)."""
    if text_fixes:
        return ruleset.texts(with_colour=True)
    return [r.text(with_colour=False) for r in ruleset.rules if r.prop]


def reference_cell(board: Board, ruleset: Ruleset) -> int | None:
    """The cell index the offsets are measured from, or None when nothing is YOU.

    The noun of the last ``<noun> is you`` rule, first top object of that noun in row-major
    order; else the first top thing that is YOU.
    """
    you_nouns = [r.noun for r in ruleset.rules if r.prop == "you"]
    cells = board.cells
    if you_nouns:
        noun = you_nouns[-1]
        for i, cell in enumerate(cells):
            info = INFO[cell & 0xFF]
            if cell and info.kind == KIND_OBJECT and info.noun == noun:
                return i
    for i, cell in enumerate(cells):
        if cell and ruleset.props[cell & 0xFF] & YOU:
            return i
    return None


def _name(code: int) -> str:
    info = INFO[code]
    return info.noun if info.kind == KIND_OBJECT else f"rule `{info.word}`"


def _listed_by_reference(code: int) -> bool:
    info = INFO[code]
    if info.kind == KIND_OBJECT:
        return info.noun in _LISTED_NOUNS
    return info.is_text and info.kind != KIND_COLOUR_TEXT


def offset_phrase(dx: int, dy: int, text_fixes: bool) -> str:
    """``"2 steps to the right and 1 step up"``; empty for (0, 0).

    Default mode keeps the reference quirk: ``steps`` only for right/down.
    """
    def unit(v: int) -> str:
        many = abs(v) > 1 if text_fixes else v > 1
        return "steps" if many else "step"

    parts = []
    if dx > 0:
        parts.append(f"{dx} {unit(dx)} to the right")
    elif dx < 0:
        parts.append(f"{-dx} {unit(dx)} to the left")
    if dy > 0:
        parts.append(f"{dy} {unit(dy)} down")
    elif dy < 0:
        parts.append(f"{-dy} {unit(dy)} up")
    return " and ".join(parts)


def object_lines(board: Board, ruleset: Ruleset, text_fixes: bool) -> list[str]:
    """The lines under ``Objects on the map:``; empty when nothing is YOU."""
    ref = reference_cell(board, ruleset)
    if ref is None:
        return []
    w = board.width
    rx, ry = ref % w, ref // w
    lines: list[str] = []
    for i, cell in enumerate(board.cells):
        if not cell:
            continue
        dx, dy = i % w - rx, i // w - ry
        if not text_fixes:
            top = cell & 0xFF
            if _listed_by_reference(top):
                # the reference thing's own cell gives an empty line (reference quirk)
                lines.append(f"{_name(top)} {offset_phrase(dx, dy, False)}" if i != ref else "")
            continue
        for depth, code in enumerate(stack_codes(cell)):
            info = INFO[code]
            if info.kind != KIND_OBJECT and not info.is_text:
                continue  # the border
            if i == ref and depth == 0:
                continue
            where = "on your cell" if i == ref else offset_phrase(dx, dy, True)
            lines.append(f"{_name(code)} {where}")
    return lines


def observation_text(
    board: Board, ruleset: Ruleset, text_fixes: bool = False, no_you: bool = False
) -> str:
    """The long-term text of one observation (module doc).

    ``no_you`` (the engine found no YOU thing after the last step), or no reference cell:
    the ``NO_YOU_NOTICE`` sentence and the rules, without an object list.
    """
    rules = "\n".join(rule_lines(ruleset, text_fixes))
    if no_you or reference_cell(board, ruleset) is None:
        return f"{NO_YOU_NOTICE}\n\nActive rules:\n{rules}"
    objects = "\n".join(object_lines(board, ruleset, text_fixes))
    return f"Active rules:\n{rules}\n\nObjects on the map:\n{objects}"
