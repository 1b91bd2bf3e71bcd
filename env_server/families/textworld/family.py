"""The ``textworld`` family: BALROG's three TextWorld game families as tasks.

Tasks: ``treasure_hunter``, ``the_cooking_game``, ``coin_collector`` (TaskInfo max_steps 80,
default action ``help``). The episode seed picks game ``seed mod 25`` of the task's 25 generated
games (``games.py``); a missing game is generated when a game is opened (seconds, under a lock).

Family-specific options (``GameOptions.kwargs``):
- ``keep_objective`` (bool, default false): keep the objective in the observation text (fixes the
  reference defect that hides it; docs/families/textworld.md). Recorded in the metrics.

Games run in worker processes (``isolation = "process"``). TextWorld is not thread-safe: its
logic and grammar parsers (tatsu) are shared module-level objects, and games opened concurrently
in threads of one process fail while loading (``IndexError: pop from empty list``, tatsu
``FailedToken``; reproduced with 8 threads, 7-8 of 8 failing). The interpreter itself is not the
problem: jericho loads a private copy of its frotz library per game. The worker forkserver
preloads textworld. textworld is imported when a game is opened, not with this module.
"""

from __future__ import annotations

from env_server.families.textworld.games import (
    DEFAULT_ACTION,
    GAME_FAMILIES,
    MAX_STEPS,
    build_game,
    index_for_seed,
)
from env_server.game import Family, Game, GameOptions, TaskInfo, TaskNotFoundError
from env_server.options import check_single_player, step_limit

DESCRIPTIONS: dict[str, str] = {
    "treasure_hunter": "find and take one object in a 20-room maze with locked doors and "
    "containers (tw-treasure_hunter level 30, 20-command walkthroughs)",
    "the_cooking_game": "find the recipe, gather, cut and cook 5 ingredients across 12 rooms, "
    "then prepare and eat the meal (tw-cooking, test split)",
    "coin_collector": "find the coin at the end of a 20-room chain with dead-end rooms "
    "(tw-coin_collector level 220)",
}


class TextWorldFamily(Family):
    """Lists and opens the three TextWorld tasks."""

    name = "textworld"
    packages = ("textworld",)
    isolation = "process"
    preload = ("textworld", "env_server.families.textworld.game")

    def list_tasks(self) -> list[TaskInfo]:
        """The three BALROG tasks, in BALROG's order."""
        return [
            TaskInfo(
                family=self.name,
                task=task,
                description=DESCRIPTIONS[task],
                max_steps=MAX_STEPS,
                default_action=DEFAULT_ACTION,
            )
            for task in GAME_FAMILIES
        ]

    def open(self, task: str, options: GameOptions) -> Game:
        """Create a game (not reset yet), generating its game file first if it is missing.

        Raises:
            TaskNotFoundError: unknown task.
            GameOptionError: more than one player or a player id other than ``agent_0``, a
                non-positive ``max_steps``, a non-bool ``keep_objective`` or an unknown key.
            games.GameBuildError: the game file is missing and cannot be generated.
        """
        if task not in GAME_FAMILIES:
            raise TaskNotFoundError(task, list(GAME_FAMILIES))
        options = self.check_options(task, options)
        check_single_player(self.name, options)
        step_limit(options, MAX_STEPS)  # validates options.max_steps; the game applies it
        keep_objective = options.kwargs["keep_objective"]

        build_game(task, index_for_seed(options.seed))
        from env_server.families.textworld.game import TextWorldGame

        return TextWorldGame(task, options, keep_objective)
