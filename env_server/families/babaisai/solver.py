"""A plan finder for BabaIsAI: weighted A* over full grid states, rules derived from each state.

A search state is the whole grid (every thing's cell and stack order, see ``grid.py``); the rules
in force are read from it, exactly as the game does, and each transition is one call of the real
engine (``engine.advance_cells``), so a plan found here replays identically in the game. Idle
is never useful (it changes nothing), so only the four moves are tried. Facing directions only
matter for MOVE things: when no ``move`` text block exists the search ignores them (objects
keep their facing), so states differing only in facing are one state.

Search: best-first on ``g + WEIGHT * h`` (ties: smaller ``h``), with duplicate detection on the
state key; a successor that wins ends the search; successors that lose, or leave nothing YOU,
are dropped. The plan is short but not always the shortest (``h`` is not admissible and is
weighted). ``h`` estimates the moves left to a win:

- a YOU thing and a WIN thing exist: the distance between them;
- otherwise the cheapest way to build the missing rules (``<noun> is win`` for a noun whose
  objects are on the map, ``<noun> is you`` for another noun whose objects could walk to a WIN
  thing): for every ``is`` block, horizontally and vertically, the Manhattan distance of the
  nearest fitting noun and property blocks to the slots around it, plus the walk to the first
  block to push, plus the final walk to the WIN object;
- walks use Manhattan distances, except that a walk out of the region the YOU thing can reach
  without crossing STOP things is routed through the nearest block of an active STOP rule (to
  push it out of its line).

On BALROG's 40 puzzles (seeds 0..19) the search expands 1 to about 750 states, a few
milliseconds per puzzle on average.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from env_server.families.babaisai.engine import advance_cells
from env_server.families.babaisai.grid import Board
from env_server.families.babaisai.rules import STOP, WIN, YOU, Ruleset, ruleset_for
from env_server.families.babaisai.things import (
    INFO,
    IS_CODE,
    KIND_NOUN_TEXT,
    KIND_OBJECT,
    KIND_PROPERTY_TEXT,
    WITHOUT_DIR,
    text_code,
)

MOVES: tuple[int, ...] = (1, 2, 3, 4)  # up, right, down, left (action indices)
WEIGHT = 2.0
DEFAULT_MAX_EXPANSIONS = 20_000  # ~25x the most any BALROG puzzle needed (seeds 0..19)
_INF = 1 << 20
_FAR = 1000  # no route seen by the estimate: keep the state, explore it last

_OBJ_NOUN: tuple[str, ...] = tuple(
    t.noun if t.kind == KIND_OBJECT else "" for t in INFO
)
_WORD: tuple[str, ...] = tuple(
    t.word if t.kind in (KIND_NOUN_TEXT, KIND_PROPERTY_TEXT) or t.code == IS_CODE else ""
    for t in INFO
)
_MOVE_TEXT = text_code("move")


@dataclass(frozen=True)
class Plan:
    """A plan and what it cost to find.

    ``actions``: action indices (1 up, 2 right, 3 down, 4 left), the last one wins;
    ``expanded``: states expanded by the search.
    """

    actions: tuple[int, ...]
    expanded: int


def _md(a: tuple[int, int], b: tuple[int, int]) -> int:
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def _nearest(a: tuple[int, int], cells: Iterable[tuple[int, int]]) -> int:
    return min((_md(a, b) for b in cells), default=_INF)


# (pushes, noun slot, first block to push or None when the rule is formed already)
_Build = tuple[int, tuple[int, int], tuple[int, int] | None]


class _Scan:
    """Everything the heuristic needs from one state, read in one pass over the cells.

    ``you``: cells whose top thing is YOU (only those move); ``win``: cells holding a WIN object
    at any depth (one lying under the YOU thing is won by stepping off and back on);
    ``objects``: noun -> cells holding such an object at any depth; ``words``: word -> cells of
    top text blocks; ``stop_cells``: indices of cells holding a STOP object.
    """

    __slots__ = ("objects", "stop_cells", "text_key", "win", "words", "you")

    def __init__(self, cells: tuple[int, ...], width: int, props: tuple[int, ...]):
        self.you: list[tuple[int, int]] = []
        self.win: list[tuple[int, int]] = []
        self.objects: dict[str, list[tuple[int, int]]] = {}
        self.words: dict[str, list[tuple[int, int]]] = {}
        self.stop_cells: list[int] = []
        text: list[int] = []
        for i, cell in enumerate(cells):
            if not cell:
                continue
            t = cell & 0xFF
            pos = (i % width, i // width)
            if props[t] & YOU:
                self.you.append(pos)
            word = _WORD[t]
            if word:
                self.words.setdefault(word, []).append(pos)
                text.append(i)
                text.append(t)
            while cell:
                t = cell & 0xFF
                noun = _OBJ_NOUN[t]
                if noun:
                    p = props[t]
                    self.objects.setdefault(noun, []).append(pos)
                    if p & WIN:
                        self.win.append(pos)
                    if p & STOP:
                        self.stop_cells.append(i)
                cell >>= 8
        #: where the rule words are: every rule-building estimate depends on this only
        self.text_key = tuple(text)


class _Heuristic:
    """The move estimate of the module doc, with per-search caches."""

    def __init__(self, width: int, height: int):
        self.width = width
        self.height = height
        self._regions: dict[tuple[tuple[int, ...], int], frozenset[int]] = {}
        self._build_cache: dict[tuple[object, ...], list[_Build]] = {}
        self._block_cache: dict[tuple[int, ...], list[tuple[int, int]]] = {}

    def _region(self, cells: tuple[int, ...], stop_cells: list[int], start: int) -> frozenset[int]:
        """Cells reachable from ``start`` without entering STOP things or the border."""
        key = (tuple(stop_cells), start)
        region = self._regions.get(key)
        if region is not None:
            return region
        w = self.width
        blocked = set(stop_cells)
        seen = {start}
        todo = [start]
        while todo:
            i = todo.pop()
            for j in (i - w, i + 1, i + w, i - 1):
                if j in seen or j in blocked or cells[j] & 0xFF == 1:
                    continue
                seen.add(j)
                todo.append(j)
        region = frozenset(seen)
        self._regions[key] = region
        return region

    def estimate(self, cells: tuple[int, ...], ruleset: Ruleset) -> int:
        """Estimated moves to a win from this state (``_INF`` when nothing is YOU)."""
        scan = _Scan(cells, self.width, ruleset.props)
        if not scan.you:
            return _INF
        w = self.width
        you = scan.you[0]
        region: frozenset[int] | None = None
        stop_blocks: list[tuple[int, int]] = []
        if scan.stop_cells:
            region = self._region(cells, scan.stop_cells, you[1] * w + you[0])
            stop_blocks = self._block_cache.get(scan.text_key)  # type: ignore[assignment]
            if stop_blocks is None:
                stop_blocks = self._block_cache[scan.text_key] = self._rule_blocks(scan, "stop")

        def walk(target: tuple[int, int]) -> int:
            """Moves for the YOU thing to reach (next to) ``target``."""
            direct = _md(you, target)
            if region is None:
                return direct
            x, y = target
            near = (y * w + x, y * w + x - 1, y * w + x + 1, (y - 1) * w + x, (y + 1) * w + x)
            if any(c in region for c in near):
                return direct
            return min((_md(you, b) + _md(b, target) + 2 for b in stop_blocks), default=_INF)

        you_set = set(scan.you)
        if you_set & set(scan.win):
            return 1  # a YOU thing is WIN itself, or stands on a WIN object (off and back on)
        best = min((walk(t) for t in scan.win), default=_INF)
        # build "<noun> is win" for a noun on the map, then walk from the rule to its objects
        win_cost: dict[str, int] = {}
        for noun, places in scan.objects.items():
            for cost, slot, first in self._cached_builds(scan, noun, "win"):
                if first is None:
                    continue  # formed already: its objects are WIN, walked to above
                win_cost[noun] = min(win_cost.get(noun, _INF), cost)
                best = min(best, walk(first) + cost + _nearest(slot, places))
        # build "<noun> is you" for another noun on the map; its objects then walk to a WIN
        # object (one that is WIN already, or one whose win rule is built too)
        for noun, places in scan.objects.items():
            if you_set.intersection(places):
                continue
            for cost, _, first in self._cached_builds(scan, noun, "you"):
                if first is None:
                    continue  # formed already (its objects are buried or of another colour)
                approach = walk(first)
                goal = min((_nearest(t, places) for t in scan.win), default=_INF)
                for other, extra in win_cost.items():
                    if other != noun:
                        reach = min(_nearest(q, places) for q in scan.objects[other])
                        goal = min(goal, extra + reach)
                best = min(best, approach + cost + goal)
        return best if best < _INF else _FAR

    def _rule_blocks(self, scan: _Scan, prop: str) -> list[tuple[int, int]]:
        """Cells of the text blocks forming active ``<noun> is <prop>`` lines."""
        blocks: list[tuple[int, int]] = []
        words = scan.words
        props = set(words.get(prop, ()))
        nouns = {p for word, ps in words.items() if word in _NOUN_WORDS for p in ps}
        for x, y in words.get("is", ()):
            for dx, dy in ((1, 0), (0, 1)):
                if (x - dx, y - dy) in nouns and (x + dx, y + dy) in props:
                    blocks.extend(((x - dx, y - dy), (x, y), (x + dx, y + dy)))
        return blocks

    def _cached_builds(self, scan: _Scan, noun: str, prop: str) -> list[_Build]:
        key = (scan.text_key, noun, prop)
        found = self._build_cache.get(key)
        if found is None:
            found = self._build_cache[key] = list(self._builds(scan, noun, prop))
        return found

    def _push_distance(self, block: tuple[int, int], slot: tuple[int, int]) -> int:
        """Cells a text block must be pushed to reach ``slot``; ``_INF`` when it never can.

        A block touching the border can never leave that side: pushing it away would need a
        mover standing on the border.
        """
        (bx, by), (sx, sy) = block, slot
        if (bx in (1, self.width - 2) and sx != bx) or (by in (1, self.height - 2) and sy != by):
            return _INF
        return abs(bx - sx) + abs(by - sy)

    def _stuck_other(self, scan: _Scan, slot: tuple[int, int], word: str) -> bool:
        """True when ``slot`` holds another text block wedged in an interior corner."""
        x, y = slot
        if x not in (1, self.width - 2) or y not in (1, self.height - 2):
            return False
        return any(slot in places for other, places in scan.words.items() if other != word)

    def _builds(self, scan: _Scan, noun: str, prop: str) -> Iterable[_Build]:
        """Ways to form ``noun is prop`` around an existing ``is`` block.

        Yields ``(pushes, noun slot, first block to push or None)``.
        """
        noun_blocks = scan.words.get(noun, ())
        prop_blocks = scan.words.get(prop, ())
        if not noun_blocks or not prop_blocks:
            return
        for x, y in scan.words.get("is", ()):
            for dx, dy in ((1, 0), (0, 1)):
                ns, ps = (x - dx, y - dy), (x + dx, y + dy)
                if min(ns) < 1 or ps[0] > self.width - 2 or ps[1] > self.height - 2:
                    continue  # a slot on the border
                if self._stuck_other(scan, ns, noun) or self._stuck_other(scan, ps, prop):
                    continue
                dn, nb = min((self._push_distance(b, ns), b) for b in noun_blocks)
                dp, pb = min((self._push_distance(b, ps), b) for b in prop_blocks)
                if dn >= _INF or dp >= _INF:
                    continue
                moving = [(_md(b, ns), b) for b, d in ((nb, dn), (pb, dp)) if d]
                yield 2 * (dn + dp), ns, min(moving)[1] if moving else None


_NOUN_WORDS = frozenset(t.word for t in INFO if t.kind == KIND_NOUN_TEXT)


def _facing_matters(cells: Iterable[int]) -> bool:
    """True when a ``move`` text block exists (only MOVE things use their facing)."""
    for cell in cells:
        while cell:
            if cell & 0xFF == _MOVE_TEXT:
                return True
            cell >>= 8
    return False


def _strip_stack(cell: int) -> int:
    out, shift = 0, 0
    while cell:
        out |= WITHOUT_DIR[cell & 0xFF] << shift
        shift += 8
        cell >>= 8
    return out


def solve(
    board: Board,
    budget: int = 100,
    ruleset: Ruleset | None = None,
    max_expansions: int = DEFAULT_MAX_EXPANSIONS,
) -> Plan | None:
    """A winning plan of at most ``budget`` moves from ``board``, or None.

    Args:
        board: the current grid (not modified).
        budget: the most moves the plan may use (the steps left in the episode).
        ruleset: the rules in force (default: read from ``board``; the game's own ruleset is
            the same since rules are always re-read after a move).
        max_expansions: give up (None) after expanding this many states.

    Returns:
        A ``Plan`` or None when no win was found within the budget and the expansion cap.
    """
    width, height = board.width, board.height
    rules = ruleset if ruleset is not None else ruleset_for(board)
    turn = _facing_matters(board.cells)
    start = tuple(board.cells) if turn else tuple(_strip_stack(c) for c in board.cells)
    heuristic = _Heuristic(width, height)
    h0 = heuristic.estimate(start, rules)
    if h0 >= _INF or budget <= 0:
        return None
    start_key = start
    best_g: dict[tuple[int, ...], int] = {start_key: 0}
    parent: dict[tuple[int, ...], tuple[tuple[int, ...], int] | None] = {start_key: None}
    # states waiting in the frontier -> their rules (popped when expanded)
    waiting: dict[tuple[int, ...], Ruleset] = {start_key: rules}
    counter = itertools.count()
    frontier: list[tuple[float, int, int, tuple[int, ...]]] = [
        (WEIGHT * h0, h0, next(counter), start_key)
    ]
    expanded = 0
    while frontier:
        _, _, _, key = heapq.heappop(frontier)
        rs = waiting.pop(key, None)
        if rs is None:
            continue  # already expanded through a cheaper path
        cells = key
        g = best_g[key]
        if g >= budget:
            continue
        expanded += 1
        if expanded > max_expansions:
            return None
        for action in MOVES:
            nxt = list(cells)
            out = advance_cells(nxt, width, rs, action, turn)
            if out.won:
                return Plan((*_path(parent, key), action), expanded)
            if out.lost or out.no_you:
                continue
            nkey = tuple(nxt)
            ng = g + 1
            if best_g.get(nkey, _INF) <= ng:
                continue
            h = heuristic.estimate(nkey, out.ruleset)
            if h >= _INF:
                continue
            best_g[nkey] = ng
            parent[nkey] = (key, action)
            waiting[nkey] = out.ruleset
            heapq.heappush(frontier, (ng + WEIGHT * h, h, next(counter), nkey))
    return None


def _path(
    parent: dict[tuple[int, ...], tuple[tuple[int, ...], int] | None], key: tuple[int, ...]
) -> tuple[int, ...]:
    actions: list[int] = []
    link = parent[key]
    while link is not None:
        key, action = link
        actions.append(action)
        link = parent[key]
    return tuple(reversed(actions))
