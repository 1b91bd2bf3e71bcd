"""The ``babaisai`` family: BALROG's 40 BabaIsAI puzzles on Moria's own engine.

Tasks: ``env/<puzzle>`` (BALROG's ids, see ``tasks.py``); the bare ``<puzzle>`` is an alias.

Family-specific options (``GameOptions.kwargs``; the schema is the manifest's ``options``):
- ``tile_size`` (default 32): pixels per cell of rendered frames;
- ``text_fixes`` (default False): corrected text observations (plural "steps" in every
  direction, every thing listed including baba and stacked things, rule colours shown) instead
  of the reference's text, which is the default for comparable scores.

Pure Python (numpy and Pillow only); the game modules are imported on first use.
"""

from __future__ import annotations

from env_server.game import Family, Game, GameOptionError, GameOptions, TaskInfo, TaskNotFoundError
from env_server.options import check_single_player, step_limit


class BabaIsAIFamily(Family):
    """Lists and opens the BabaIsAI puzzles."""

    name = "babaisai"
    packages = ("numpy", "pillow")
    inline_steps = True

    def __init__(self) -> None:
        self._tasks: list[TaskInfo] | None = None

    def list_tasks(self) -> list[TaskInfo]:
        """The 40 BALROG tasks in BALROG's order, 100 steps each, default action ``idle``."""
        if self._tasks is None:
            from env_server.families.babaisai.instruction import DEFAULT_ACTION
            from env_server.families.babaisai.tasks import MAX_STEPS, TASK_NAMES, describe

            self._tasks = [
                TaskInfo(
                    family=self.name,
                    task=task,
                    description=describe(task.split("/", 1)[1]),
                    max_steps=MAX_STEPS,
                    default_action=DEFAULT_ACTION,
                )
                for task in TASK_NAMES
            ]
        return list(self._tasks)

    def open(self, task: str, options: GameOptions) -> Game:
        """Create a game (not reset yet).

        Raises:
            TaskNotFoundError: unknown task (``valid`` lists the 40 canonical ids).
            GameOptionError: more than one player or a player id other than ``agent_0``, a
                non-positive ``max_steps``, a negative seed, or a bad / unknown ``kwargs`` key.
        """
        from env_server.families.babaisai.game import BabaIsAIGame
        from env_server.families.babaisai.tasks import PREFIX, TASK_NAMES, puzzle_name

        puzzle = puzzle_name(task)
        if puzzle is None:
            raise TaskNotFoundError(task, list(TASK_NAMES))
        options = self.check_options(task, options)
        check_single_player(self.name, options)
        step_limit(options, 1)  # validates options.max_steps; the game applies it
        if options.seed < 0:
            raise GameOptionError(f"seed: must be >= 0, got {options.seed}")
        kwargs = options.kwargs
        return BabaIsAIGame(PREFIX + puzzle, puzzle, options, kwargs["tile_size"],
                            kwargs["text_fixes"])
