"""The ``babyai`` family: BALROG's MixedTrainLocal tasks plus every registered minigrid env.

Family-specific options (``GameOptions.kwargs``; the schema is the manifest's ``OPTIONS``):
- ``num_dists`` (default 0 as in BALROG): distractor objects of the MixedTrainLocal level;
  ignored for registered ids, whose id fixes their own distractor count;
- ``tile_size``: pixels per cell of rendered frames;
- ``agent_view_size`` (registered ids only): passed to the env constructor; no other key
  ever reaches it (``manifest.REGISTERED_OPTIONS`` says why ``size`` does not).

minigrid is imported on first use, not when this module is imported.
"""

from __future__ import annotations

from typing import Any

from env_server.families.babyai.manifest import REGISTERED_OPTIONS
from env_server.game import Family, Game, GameOptionError, GameOptions, TaskInfo, TaskNotFoundError
from env_server.options import check_single_player, step_limit
from moria.quoting import quote


class BabyAIFamily(Family):
    """Lists and opens BabyAI tasks (see ``tasks.py`` for the names)."""

    name = "babyai"
    packages = ("minigrid", "gymnasium")
    inline_steps = True

    def __init__(self) -> None:
        self._tasks: list[TaskInfo] | None = None

    def list_tasks(self) -> list[TaskInfo]:
        """The five BALROG tasks, the bare ``BabyAI-MixedTrainLocal-v0``, then registered ids."""
        if self._tasks is None:
            from env_server.families.babyai import tasks as t
            from env_server.families.babyai.instruction import DEFAULT_ACTION

            listed = [
                TaskInfo(
                    family=self.name,
                    task=f"{t.MIXED_ID}/{kind}",
                    description=t.KIND_DESCRIPTIONS[kind],
                    max_steps=t.KIND_MAX_STEPS[kind],
                    default_action=DEFAULT_ACTION,
                )
                for kind in t.KINDS
            ]
            listed.append(
                TaskInfo(
                    family=self.name,
                    task=t.MIXED_ID,
                    description="one of the five MixedTrainLocal kinds, drawn from the seed",
                    default_action=DEFAULT_ACTION,
                )
            )
            listed.extend(
                TaskInfo(
                    family=self.name,
                    task=env_id,
                    description=f"registered minigrid environment {env_id}",
                    default_action=DEFAULT_ACTION,
                )
                for env_id in t.registered_ids()
            )
            self._tasks = listed
        return list(self._tasks)

    def open(self, task: str, options: GameOptions) -> Game:
        """Create a game (not reset yet).

        Raises:
            TaskNotFoundError: unknown task (``valid`` lists every accepted name).
            GameOptionError: more than one player or a player id other than ``agent_0``, a
                non-positive ``max_steps``, a bad ``kwargs`` value, or ``oracle`` on an env that
                is not a BabyAI level (the bot needs BabyAI instructions).
        """
        from env_server.families.babyai import tasks as t
        from env_server.families.babyai.game import BabyAIGame
        from env_server.families.babyai.sources import MixedSource, RegisteredSource

        ref = t.parse_task(task)
        if ref is None:
            raise TaskNotFoundError(task, t.all_task_names())
        options = self.check_options(task, options)
        check_single_player(self.name, options)
        step_limit(options, 1)  # validates options.max_steps; the game applies it

        kwargs = options.kwargs
        constructor = {key: kwargs[key] for key in REGISTERED_OPTIONS if key in kwargs}
        if ref.is_mixed:
            if constructor:
                raise GameOptionError(
                    f"options: {', '.join(constructor)} only for registered ids; "
                    f"{quote(task, 128)} takes num_dists, tile_size")
            source: Any = MixedSource(ref.kind, kwargs["num_dists"])
        else:
            # num_dists configures MixedTrainLocal only; registered ids carry their own counts
            # (e.g. GoToLocalS8N7), and BALROG's family-wide num_dists=0 would break them.
            assert ref.env_id is not None  # a registered id (not is_mixed) names its env
            source = RegisteredSource(ref.env_id, constructor)
            if options.oracle and not source.has_expert:
                source.close()
                raise GameOptionError(
                    f"oracle: no expert for {task}; the BabyAI bot only plays BabyAI levels"
                )
        return BabyAIGame(task, source, options, kwargs["tile_size"])
