"""``DeterministicEnv``: ``crafter.Env`` whose creature balancing does not depend on memory
addresses.

crafter keeps the objects of each world chunk in a ``set``; objects hash by identity, so the order
in which ``Env._balance_object`` lists a chunk's zombies, skeletons or cows (and hence which one a
despawn draw removes) changes from process to process even with the same seed and the same world
RNG state. That makes episodes irreproducible (verified: two envs with seed 0 and the same
actions diverged after 9 steps). Here the chunk's objects are handed over sorted by position
(one object per cell, so the order is total) before crafter draws from them. Nothing else
changes: the random draws, their number and their meaning are crafter's own, so the distribution
of worlds and dynamics is the same as crafter's (and BALROG's).

Importing this module imports crafter.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import crafter


def _position(obj: Any) -> tuple[int, int]:
    return int(obj.pos[0]), int(obj.pos[1])


class DeterministicEnv(crafter.Env):  # type: ignore[misc]
    """``crafter.Env`` (1.8.3) with a position-ordered creature list in chunk balancing."""

    def _balance_object(self, chunk: Any, objs: Iterable[Any], *rest: Any) -> Any:
        """crafter's balancing of one creature kind in one chunk, over the chunk's objects
        sorted by (x, y) instead of in set order."""
        return super()._balance_object(chunk, sorted(objs, key=_position), *rest)
