"""Building seeded crafter worlds, reading a ``Frame`` from them, and the once-per-process warm-up.

Seeding (fixing a BALROG defect): BALROG builds ``crafter.Env(seed=None)`` before it seeds the
global RNGs, so crafter draws its own world seed and logged episode seeds do not reproduce worlds.
Here a fresh env (``seeded_env.DeterministicEnv``) is built for every episode with the episode
seed, so (task, seed) fixes the world: crafter generates it from ``hash((seed, 1))``, a pure
function of the integer. For a seed below 2**31 - 1 the world equals the one BALROG plays when
crafter drew that seed.

Warm-up: crafter's world generation calls opensimplex's ``noise3``, which numba compiles on its
first call in a process (about 2 s; without numba a pure-Python ``noise3`` makes every reset take
about 1.5 s). numba keeps the machine code in its on-disk cache (``cache=True``), so a later
process only loads it (about 0.2 s), and every later reset in the same process costs about
0.08 s of world generation. ``warm_up`` pays that first-call cost once per process, at open time.
numba compiles one machine-code version per argument-type signature, and crafter calls
``noise3(float, float, int)``; a warm-up with other types (e.g. three floats) compiles another
version and leaves crafter's cold, which is why it generates a real (tiny) world.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import numpy as np

from env_server.families.crafter.config import CrafterConfig
from env_server.families.crafter.manifest import VIEW
from env_server.families.crafter.window import Frame

_WARM_AREA = (16, 16)


def new_env(config: CrafterConfig, seed: int) -> Any:
    """A ``crafter.Env`` for one episode (not reset yet) whose world comes from ``seed``.

    It is a ``seeded_env.DeterministicEnv``, so the whole episode (not only the world) follows
    from the seed and the actions. crafter's own episode length is disabled (``length=None``):
    the game applies the step limit itself, so crafter's default of 10000 can never end an
    episode early.
    """
    from env_server.families.crafter.seeded_env import DeterministicEnv

    return DeterministicEnv(
        area=config.area, view=VIEW, size=config.size, reward=True, length=None, seed=int(seed)
    )


def frame_from(env: Any, info: dict[str, Any]) -> Frame:
    """The ``Frame`` after a step, from crafter's step ``info`` plus the player's facing and
    sleep flag (read from ``env._player``, as BALROG's wrapper does)."""
    player = env._player
    return Frame(
        semantic=np.asarray(info["semantic"]),
        pos=(int(info["player_pos"][0]), int(info["player_pos"][1])),
        facing=(int(player.facing[0]), int(player.facing[1])),
        inventory=dict(info["inventory"]),
        sleeping=bool(player.sleeping),
        dead=bool(player.health <= 0),
    )


@functools.cache
def warm_up() -> float:
    """Generate one tiny world so numba compiles (or loads) crafter's noise code in this
    process; returns the seconds it took. Later calls return the first result at once."""
    from env_server.families.crafter.seeded_env import DeterministicEnv

    start = time.perf_counter()
    DeterministicEnv(area=_WARM_AREA, seed=0).reset()
    return time.perf_counter() - start
