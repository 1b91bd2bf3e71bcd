"""Faster, bounded quest generation for TextWorld 1.7 (same games, deterministic time limit).

Why ``tw-treasure_hunter --level 30`` is slow (profiled here): TextWorld samples the quest by a
depth-first backward search (``textworld.generator.chaining``). Every candidate action of every
search node is checked against all 46 world constraints *on the whole state* (twice), matching
each constraint by recursive enumeration that re-sorts the state's facts at every level. With 20
rooms and 20 containers a single node costs 0.3-0.6 s, and some seeds need ~1,000 nodes: seed 1
takes ~310 s. A few seeds never finish at all: the walkthrough builder
(``ActionDependencyTree.flatten``) loops forever on them (seed 21 of level 30).

What this module changes, both process-wide once :func:`install` has run:

1. **Incremental constraint check (exact).** A search node's state already satisfies every
   constraint (its parent checked it), and rule preconditions cannot be negated in TextWorld's
   logic language, so a violation after adding facts must use at least one of the added facts.
   We therefore only enumerate constraint matches that bind one precondition to an added fact.
   The root node's children keep TextWorld's full check, so the search takes the same path: the
   same games (identical serialised games against stock TextWorld for level 30 seeds 1-4, levels
   21 and 23 seeds 1-3, level 15 seeds 1-3), 10-30x faster (level 30 seed 1: 310 s -> 30 s;
   seeds 2-4: 17-73 s -> 1-2 s).
2. **A deterministic work budget.** Inside :func:`budget`, the calling thread counts search-node
   expansions and dependency-tree removals and raises :class:`BudgetExceeded` past the limits, so
   a pathological seed is rejected after a bounded, machine-independent amount of work (the caller
   moves on to the next candidate seed). Other threads are not counted.

The exact fast path is only installed for TextWorld 1.7.x, whose chaining code it mirrors; on
another version only the budget counters are installed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

#: Search-node expansions allowed per game (typical level-30 games need 20-1,300).
MAX_EXPANSIONS = 2000
#: Dependency-tree removals allowed per game (normal games need < 60; looping ones never stop).
MAX_TREE_REMOVALS = 1000

#: Use the incremental constraint check (tests switch it off to compare with stock TextWorld).
INCREMENTAL = True

_INSTALL_LOCK = threading.Lock()
_installed = False
_local = threading.local()


class BudgetExceeded(Exception):
    """The generation of one candidate game used more work than :func:`budget` allows."""


@contextlib.contextmanager
def budget(
    max_expansions: int = MAX_EXPANSIONS, max_tree_removals: int = MAX_TREE_REMOVALS
) -> Iterator[None]:
    """Count this thread's quest-search work inside the block; raise BudgetExceeded past limits.

    Calls :func:`install` first. Not re-entrant (the inner block replaces the outer counters).
    """
    install()
    _local.left = {"expansions": max_expansions, "removals": max_tree_removals}
    try:
        yield
    finally:
        _local.left = None


def _spend(kind: str) -> None:
    left = getattr(_local, "left", None)
    if left is None:
        return
    left[kind] -= 1
    if left[kind] < 0:
        raise BudgetExceeded(f"quest generation exceeded its budget of {kind}")


def install() -> None:
    """Patch TextWorld's chaining and dependency tree (idempotent, thread-safe)."""
    global _installed
    with _INSTALL_LOCK:
        if _installed:
            return
        import textworld
        from textworld.generator import chaining
        from textworld.generator.game import ActionDependencyTree

        stock_chain = chaining._Chainer.chain
        stock_remove = ActionDependencyTree.remove

        def chain(self: Any, node: Any) -> Any:
            _spend("expansions")
            return stock_chain(self, node)

        def remove(self: Any, action: Any) -> Any:
            _spend("removals")
            return stock_remove(self, action)

        chaining._Chainer.chain = chain
        ActionDependencyTree.remove = remove
        if textworld.__version__.startswith("1.7."):
            stock_apply = chaining._Chainer.apply

            def apply(self: Any, node: Any, action: Any) -> Any:
                # The root's state was never checked: its children get the stock check.
                if node.action is None or not INCREMENTAL:
                    return stock_apply(self, node, action)
                return _apply_incremental(self, node, action)

            chaining._Chainer.apply = apply
        _installed = True


def _apply_incremental(chainer: Any, node: Any, action: Any) -> Any:
    """``_Chainer.apply`` of TextWorld 1.7 with the incremental constraint check.

    Same steps as the stock method: add the action's preconditions, check, apply the action,
    check, reject cycles. ``node.state`` is known to satisfy the constraints.
    """
    new_state = node.state.copy()
    fresh = [p for p in action.preconditions if not new_state.is_fact(p)]
    for prop in action.preconditions:
        new_state.add_fact(prop)
    if _violates(chainer, new_state, fresh):
        return None

    fresh = [p for p in action.added if not new_state.is_fact(p)]
    new_state.apply(action)
    fresh = [p for p in fresh if new_state.is_fact(p)]
    if _violates(chainer, new_state, fresh):
        return None

    # Cycle detection, as in the stock method.
    state = new_state.copy()
    state.apply(action.inverse())
    while node.action:
        state.apply(node.action.inverse())
        if new_state == state:
            return None
        node = node.parent
    return new_state


def _violates(chainer: Any, state: Any, fresh: Sequence[Any]) -> bool:
    """Whether a constraint whose match uses one of the ``fresh`` facts applies in ``state``.

    Mirrors the stock ``_Chainer.check_state`` restricted to those matches: a constraint fails the
    state when one of its instantiations is applicable and produces ``fail()``.
    """
    if not fresh:
        return False
    from textworld.logic import Proposition

    fail = Proposition("fail", [])
    types = state._logic.types
    for rule in chainer.constraints:
        for pred in rule.preconditions:
            for fact in fresh:
                mapping = _bind(pred, fact, types)
                if mapping is None:
                    continue
                for instance in state.all_instantiations(rule, mapping):
                    result = state.apply_on_copy(instance)
                    if result and result.is_fact(fail):
                        return True
    return False


def _bind(pred: Any, fact: Any, types: Any) -> dict[Any, Any] | None:
    """The placeholder mapping that matches ``pred`` to ``fact``, or None.

    Matching follows TextWorld's enumeration: same predicate name, each variable's type a subtype
    of its placeholder's type, one variable per placeholder and distinct variables for distinct
    placeholders.
    """
    if fact.name != pred.name or len(fact.arguments) != len(pred.parameters):
        return None
    mapping: dict[Any, Any] = {}
    for ph, var in zip(pred.parameters, fact.arguments, strict=True):
        bound = mapping.get(ph)
        if bound is None:
            if var in mapping.values():
                return None
            if not types.get(var.type).is_subtype_of(types.get(ph.type)):
                return None
            mapping[ph] = var
        elif bound != var:
            return None
    return mapping
