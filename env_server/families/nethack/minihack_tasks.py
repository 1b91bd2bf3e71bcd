"""Task names of the ``minihack`` family and how each task's env is built.

Tasks: BALROG's eight evaluation tasks first (in BALROG's order), then every other id minihack
registers that can run on the pinned packages. Left out, with the reason:

- ``MiniHack-Navigation-Custom-v0``, ``MiniHack-Skill-Custom-v0``: need a caller's des-file;
- ids whose entry point lives in ``minihack.envs.minigrid`` (MultiRoom, LavaCrossing,
  SimpleCrossing): minihack 1.0.2 calls minigrid/gymnasium APIs that minigrid 3 and gymnasium 1
  no longer have (``env.seed``, ``width``/``height`` with ``size``), so they fail to build;
- ``MiniHack-Boxoban-Unfiltered-v0``: its level files are not shipped, and our level source
  serves the medium and hard sets only.

The two BALROG Boxoban tasks are built by ``boxoban.env.make_boxoban_env`` on a level from
``boxoban.source.LevelSource``; every other task by its registered class.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

BALROG_TASKS: tuple[str, ...] = (
    "MiniHack-Boxoban-Hard-v0",
    "MiniHack-Boxoban-Medium-v0",
    "MiniHack-MazeWalk-9x9-v0",
    "MiniHack-MazeWalk-15x15-v0",
    "MiniHack-Corridor-R3-v0",
    "MiniHack-CorridorBattle-Dark-v0",
    "MiniHack-Quest-Easy-v0",
    "MiniHack-Quest-Medium-v0",
)

BOXOBAN_DIFFICULTY: dict[str, str] = {
    "MiniHack-Boxoban-Hard-v0": "hard",
    "MiniHack-Boxoban-Medium-v0": "medium",
}

#: Step limit of every task (BALROG's ``max_episode_steps=100`` overrides each task's own).
MAX_STEPS = 100

#: BALROG's keyword arguments for every MiniHack task, plus the
#: determinism switch. Tasks that force a character (CorridorBattle, Quest-Medium) keep theirs:
#: their constructors overwrite ``character``.
BALROG_KWARGS: dict[str, Any] = {
    "character": "@",
    "penalty_step": -0.01,
    "penalty_time": 0.0,
    "penalty_mode": "constant",
    "autopickup": False,
    "savedir": None,
    "fix_moon_phase": True,
}

_EXCLUDED = {
    "MiniHack-Navigation-Custom-v0",
    "MiniHack-Skill-Custom-v0",
    "MiniHack-Boxoban-Unfiltered-v0",
}


@lru_cache(maxsize=1)
def registered_ids() -> tuple[str, ...]:
    """The runnable ``MiniHack-*`` ids besides BALROG's eight, in registration order.

    Imports minihack (which registers them); cached after the first call.
    """
    import warnings

    import gymnasium

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # minihack's pkg_resources deprecation notice
        import minihack  # noqa: F401 - registers the environments

    ids = []
    for env_id, spec in gymnasium.registry.items():
        if not env_id.startswith("MiniHack-") or env_id in BALROG_TASKS or env_id in _EXCLUDED:
            continue
        entry = spec.entry_point
        if isinstance(entry, str) and entry.startswith("minihack.envs.minigrid:"):
            continue
        ids.append(env_id)
    return tuple(ids)


def all_task_names() -> list[str]:
    """Every accepted task name, in ``list_tasks`` order."""
    return list(BALROG_TASKS) + list(registered_ids())


@dataclass(frozen=True)
class TaskSpec:
    """How to build one task: ``difficulty`` is set for the Boxoban tasks only."""

    task: str
    difficulty: str | None = None

    @property
    def is_boxoban(self) -> bool:
        """True for BALROG's two Boxoban tasks."""
        return self.difficulty is not None


def parse_task(task: str) -> TaskSpec | None:
    """The spec of an accepted task name, else ``None``."""
    if task in BOXOBAN_DIFFICULTY:
        return TaskSpec(task, BOXOBAN_DIFFICULTY[task])
    if task in BALROG_TASKS or task in registered_ids():
        return TaskSpec(task)
    return None


def build_registered(task: str, observation_keys: tuple[str, ...], env_steps: int) -> Any:
    """Instantiate a registered (non-Boxoban) task's env class with BALROG's kwargs.

    The class is called directly (no gymnasium wrappers): ``max_episode_steps`` then reaches the
    env (``gymnasium.make`` would turn it into a TimeLimit wrapper instead).
    """
    import warnings

    import gymnasium
    from gymnasium.envs.registration import load_env_creator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import minihack  # noqa: F401

    spec = gymnasium.registry[task]
    entry = spec.entry_point
    if entry is None:  # gymnasium.make refuses such a spec the same way
        raise ValueError(f"{task} is registered without an entry point")
    creator = load_env_creator(entry) if isinstance(entry, str) else entry
    return creator(
        **{**spec.kwargs, **BALROG_KWARGS},
        observation_keys=observation_keys,
        max_episode_steps=env_steps,
    )


def build_boxoban(
    level_text: str, difficulty: str, observation_keys: tuple[str, ...], env_steps: int
) -> Any:
    """Our Boxoban env (``boxoban.env.make_boxoban_env``) on one level with BALROG's kwargs."""
    from env_server.families.nethack.boxoban.env import make_boxoban_env

    return make_boxoban_env(
        level_text,
        difficulty,
        observation_keys=observation_keys,
        max_episode_steps=env_steps,
        **BALROG_KWARGS,
    )
