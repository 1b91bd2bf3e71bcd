"""Task names of the BabyAI family and the seed arithmetic that picks a task kind.

Task names:
- ``BabyAI-MixedTrainLocal-v0/<kind>`` for the five BALROG kinds (our own level, ``levels.py``);
- ``BabyAI-MixedTrainLocal-v0``: the kind is drawn from the episode seed;
- any ``MiniGrid-*`` / ``BabyAI-*`` id registered in gymnasium once ``minigrid`` is imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

MIXED_ID = "BabyAI-MixedTrainLocal-v0"

# The BALROG evaluation kinds, in BALROG's order.
KINDS: tuple[str, ...] = ("goto", "pickup", "open", "putnext", "pick_up_seq_go_to")

# Step limit per kind: navigations x room_size^2 x rooms (the table of docs/families/babyai.md).
KIND_MAX_STEPS: dict[str, int] = {
    "goto": 64,
    "pickup": 64,
    "open": 128,
    "putnext": 128,
    "pick_up_seq_go_to": 128,
}

KIND_DESCRIPTIONS: dict[str, str] = {
    "goto": "go to (face) one object in a single 8x8 room",
    "pickup": "pick up one object in a single 8x8 room",
    "open": "open a locked door between two rooms (its key lies in the agent's room)",
    "putnext": "put one object next to another in a single 8x8 room",
    "pick_up_seq_go_to": "pick up one object and go to another, in a stated order",
}

_SEED_MASK = (1 << 64) - 1
_KIND_SALT = 0x6B696E64  # separates the kind draw from the layout stream


def reduce_seed(seed: int) -> int:
    """Fold any integer seed onto [0, 2**64), the range handed to ``env.reset(seed=...)``.

    gymnasium accepts any non-negative Python int; the fold only makes negative or oversized
    values deterministic instead of an error.
    """
    return int(seed) & _SEED_MASK


def kind_for_seed(seed: int) -> str:
    """The task kind of the bare ``BabyAI-MixedTrainLocal-v0`` task for one episode seed.

    Uniform over ``KINDS`` and a pure function of the seed (its own RNG stream, independent of
    the layout stream), replacing the reference's unseeded draw in the level constructor.
    """
    rng = np.random.default_rng([reduce_seed(seed), _KIND_SALT])
    return KINDS[int(rng.integers(len(KINDS)))]


@dataclass(frozen=True)
class TaskRef:
    """A parsed task name.

    ``kind`` is a BALROG kind for ``BabyAI-MixedTrainLocal-v0/<kind>``, ``None`` for the bare
    mixed id (seed-drawn) and for registered ids; ``env_id`` is the gymnasium id of a registered
    task, ``None`` for the mixed level.
    """

    name: str
    kind: str | None = None
    env_id: str | None = None

    @property
    def is_mixed(self) -> bool:
        """True for our own MixedTrainLocal level (fixed or seed-drawn kind)."""
        return self.env_id is None


@lru_cache(maxsize=1)
def registered_ids() -> tuple[str, ...]:
    """The ``MiniGrid-*`` and ``BabyAI-*`` ids in gymnasium's registry, in registration order.

    Imports ``minigrid`` (which registers them); cached after the first call. Ids whose entry
    point is not a ``MiniGridEnv`` class are left out: minigrid registers placeholders for the
    WFC envs when their optional dependencies are missing, and those cannot be opened.
    """
    import gymnasium
    import minigrid  # noqa: F401 - registers the environments
    from gymnasium.envs.registration import load_env_creator
    from minigrid.minigrid_env import MiniGridEnv

    ids: list[str] = []
    for env_id, spec in gymnasium.registry.items():
        if not env_id.startswith(("MiniGrid-", "BabyAI-")) or env_id == MIXED_ID:
            continue
        entry = spec.entry_point
        creator = load_env_creator(entry) if isinstance(entry, str) else entry
        if isinstance(creator, type) and issubclass(creator, MiniGridEnv):
            ids.append(env_id)
    return tuple(ids)


def mixed_task_names() -> list[str]:
    """The six names of our MixedTrainLocal level: the five BALROG tasks, then the bare id."""
    return [f"{MIXED_ID}/{kind}" for kind in KINDS] + [MIXED_ID]


def all_task_names() -> list[str]:
    """Every accepted task name, in ``list_tasks`` order."""
    return mixed_task_names() + list(registered_ids())


def parse_task(name: str) -> TaskRef | None:
    """Parse a task name; ``None`` when it is not accepted."""
    if name == MIXED_ID:
        return TaskRef(name)
    prefix = MIXED_ID + "/"
    if name.startswith(prefix):
        kind = name[len(prefix) :]
        return TaskRef(name, kind=kind) if kind in KINDS else None
    if name.startswith(("MiniGrid-", "BabyAI-")) and name in registered_ids():
        return TaskRef(name, env_id=name)
    return None
