"""The family's expert (``oracle=True``): a greedy player that shows the rewards are reachable.

It reads only the player's own decoded view and observations (``text.View``), as an LLM player
does, and picks one of the substrate's named actions:

- commons harvest and clean up: walk to the nearest apple (eating it is the reward); in clean up
  with no apple in view, walk to the nearest dirt and fire the cleaning beam at it;
- the ``*_in_the_matrix`` games: while holding fewer than ``COLLECT`` resources, walk to the
  nearest resource; then walk to the nearest other player and fire the interaction beam once it
  stands straight ahead within the beam's reach (the interaction pays both players);
- every other substrate: walk to the nearest thing in view that is not a wall.

Walking: forward while the target is ahead and the way is free, else a free side step towards
it, else a turn towards it; when every way towards it is blocked it wanders. With nothing to go
to it walks forward, turning at walls and on one step in four (the turn picked from its
position and the step number, so the expert is a function of what the player sees).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from env_server.families.meltingpot.substrates import TaskSpec
from env_server.families.meltingpot.text import SpriteTable, View, players_in_view, things_in_view

#: Resources held before seeking a partner: the matrix games start each player with one of
#: each (two), and an interaction is refused until both players collected one more.
COLLECT = 3
BEAM_REACH = 3


def _has(spec: TaskSpec, name: str) -> bool:
    return any(a.name == name for a in spec.actions)


def _blocked(view: View, ahead: int, right: int) -> bool:
    """Whether the cell at (``ahead``, ``right``) cannot be walked into: outside the view or
    the map, or holding a wall or a counter."""
    seen = view.cells.get((ahead, right))
    if seen is None:
        return True
    return seen.outside or any(name.startswith(("Wall", "wall", "counter")) for name, _ in
                               seen.sprites)


def _blocked_ahead(view: View) -> bool:
    return _blocked(view, 1, 0)


def _towards(spec: TaskSpec, view: View, ahead: int, right: int, seed: int = 0) -> str:
    """One step towards the target at (``ahead``, ``right``): forward while it is ahead and
    the way is free, else a free side step towards it, else a turn towards it (a turn round
    when it is straight behind); when every way towards it is blocked, wander (``seed``)."""
    if ahead > 0 and not _blocked_ahead(view):
        return "FORWARD"
    for side, action in ((1, "STEP_RIGHT"), (-1, "STEP_LEFT")):
        if right * side > 0 and _has(spec, action) and not _blocked(view, 0, side):
            return action
    if ahead <= 0:
        return "TURN_LEFT" if right < 0 else "TURN_RIGHT"
    return _wander(view, seed)


def _wander(view: View, seed: int) -> str:
    """Forward, turning at walls and, to leave corridors, on one step in four (left or
    right by ``seed``: the player's position and the step number)."""
    if _blocked_ahead(view) or seed % 4 == 0:
        return "TURN_LEFT" if seed % 8 == 0 else "TURN_RIGHT"
    return "FORWARD"


def _nearest(things: Mapping[str, list[tuple[int, int]]],
             kinds: list[str]) -> tuple[int, int] | None:
    best: tuple[int, int, int] | None = None
    for kind in kinds:
        for ahead, right in things.get(kind, []):
            key = (abs(ahead) + abs(right), ahead, right)
            if best is None or key < best:
                best = key
    return (best[1], best[2]) if best else None


def expert_action(spec: TaskSpec, view: View, table: SpriteTable, index: int,
                  scalars: Mapping[str, Any], seed: int = 0) -> str:
    """The expert's next action for player ``index`` (module doc); ``seed`` varies its
    wandering (the game passes the step number and the player's position)."""
    if not view.on_grid:
        return "NOOP"
    things = things_in_view(view, table)
    name = spec.name
    if "in_the_matrix" in name:
        inventory = np.asarray(scalars.get("INVENTORY", [0]), dtype=float)
        if float(inventory.sum()) < COLLECT:
            target = _nearest(things, [k for k in things if k.startswith("resource")])
            if target:
                return _towards(spec, view, *target, seed)
        others = players_in_view(view, index)
        for _, ahead, right, _ in others:
            if right == 0 and 0 < ahead <= BEAM_REACH and _has(spec, "INTERACT"):
                return "INTERACT"
        if others:
            _, ahead, right, _ = others[0]
            return _towards(spec, view, ahead, right, seed)
        return _wander(view, seed)
    if name.startswith(("commons_harvest", "clean_up")):
        target = _nearest(things, ["Apple"])
        if target:
            return _towards(spec, view, *target, seed)
        if name.startswith("clean_up"):
            dirt = _nearest(things, ["Dirt"])
            if dirt:
                ahead, right = dirt
                if right == 0 and 0 < ahead <= BEAM_REACH and _has(spec, "FIRE_CLEAN"):
                    return "FIRE_CLEAN"
                return _towards(spec, view, ahead, right, seed)
        return _wander(view, seed)
    target = _nearest(things, [k for k in things if not k.lower().startswith("wall")])
    return _towards(spec, view, *target, seed) if target else _wander(view, seed)
