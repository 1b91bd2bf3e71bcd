"""Where a game's minigrid environment comes from, per episode seed.

- :class:`MixedSource`: our MixedTrainLocal level; one level instance per kind (the ``open``
  kind has a wider grid, so kinds cannot share an instance), created on first use.
- :class:`RegisteredSource`: one env built from gymnasium's registry, used unwrapped (minigrid
  envs handle their own step limit; the checker wrappers only add overhead).
"""

from __future__ import annotations

from typing import Any

import gymnasium
from minigrid.envs.babyai.core.roomgrid_level import RoomGridLevel

from env_server.families.babyai.levels import MixedTrainLocalLevel
from env_server.families.babyai.quiet import silence_generation
from env_server.families.babyai.tasks import kind_for_seed
from env_server.game import GameOptionError
from moria.quoting import quote


class MixedSource:
    """MixedTrainLocal levels: a fixed ``kind``, or ``None`` to draw the kind from each seed."""

    has_expert = True

    def __init__(self, kind: str | None, num_dists: int):
        self._kind = kind
        self._num_dists = num_dists
        self._levels: dict[str, MixedTrainLocalLevel] = {}

    def env_for(self, seed: int) -> tuple[str, Any]:
        """``(task_kind, level)`` for an episode seed; the level is not reset here."""
        kind = self._kind or kind_for_seed(seed)
        level = self._levels.get(kind)
        if level is None:
            level = self._levels[kind] = MixedTrainLocalLevel(kind, num_dists=self._num_dists)
        return kind, level

    def close(self) -> None:
        """Close every level created so far."""
        for level in self._levels.values():
            level.close()
        self._levels.clear()


class RegisteredSource:
    """A registered ``MiniGrid-*`` / ``BabyAI-*`` env, built with ``kwargs`` for its constructor
    (the client's ``agent_view_size``, checked against the manifest's schema; never anything
    else, and never a render mode).

    Raises:
        GameOptionError: the constructor refuses the keyword options (a keyword it does not
            take, or a value it rejects, e.g. an even ``agent_view_size``): the client's
            input, so never an internal error.
    """

    def __init__(self, env_id: str, kwargs: dict[str, Any]):
        self._env_id = env_id
        try:
            env = gymnasium.make(env_id, disable_env_checker=True, **kwargs).unwrapped
        except Exception as exc:
            if not kwargs:
                raise
            raise GameOptionError(
                f"options {', '.join(sorted(kwargs))} not accepted by {env_id}: "
                f"{type(exc).__name__}: {quote(exc, 200)}"
            ) from None
        silence_generation(env)
        self._env = env
        # The BabyAI bot needs a BabyAI level (it reads the level's instructions).
        self.has_expert = isinstance(env, RoomGridLevel)

    def env_for(self, seed: int) -> tuple[str, Any]:
        """``(task_kind, env)``; the kind of a registered task is its id."""
        del seed
        return self._env_id, self._env

    def close(self) -> None:
        """Close the env."""
        self._env.close()
