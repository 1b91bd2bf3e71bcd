"""The ``nim`` family: normal-play Nim on fixed heaps (the rules are in the package docstring).

Tasks (agents ``player_0``, who moves first, and ``player_1``):

- ``nim_3-4-5``: heaps of 3, 4 and 5 objects;
- ``nim_1-3-5-7``: heaps of 1, 3, 5 and 7 objects.

A task name is ``nim_`` followed by the heap sizes joined by ``-``. The step limit is
``DEFAULT_MAX_STEPS`` plies unless ``GameOptions.max_steps`` overrides it; reaching it ends the
game *unfinished* (``env_server.turn_based.UNFINISHED``: no winner, progression 0, counted apart
from draws).

Family options (``GameOptions.kwargs``):

- ``progression_agent``: the agent whose result ``metrics["progression"]`` reports (1 win,
  0.5 draw, 0 loss or unfinished), default ``player_0``.

Players (``GameOptions.players``), when given, must use the agent ids above. There is no
oracle.
"""

from __future__ import annotations

from env_server.families.nim.manifest import AGENTS
from env_server.game import (
    Family,
    Game,
    GameOptionError,
    GameOptions,
    TaskInfo,
    TaskNotFoundError,
    check_player_ids,
)
from env_server.options import step_limit
from env_server.turn_based import TurnBasedGame

#: task -> heap sizes, the evaluation task first
TASKS: dict[str, tuple[int, ...]] = {
    "nim_3-4-5": (3, 4, 5),
    "nim_1-3-5-7": (1, 3, 5, 7),
}
#: plies after which a game is cut short (unfinished); every task ends well before
DEFAULT_MAX_STEPS = 40


class NimFamily(Family):
    """Lists and opens the Nim tasks (pure Python and numpy: games run on the thread pool)."""

    name = "nim"
    packages = ()
    isolation = "thread"
    inline_steps = True
    preload = ()

    def list_tasks(self) -> list[TaskInfo]:
        """The Nim tasks, two agents each, default action "" (illegal -> random legal)."""
        return [TaskInfo(family=self.name, task=task,
                         description=f"normal-play Nim on heaps {', '.join(map(str, heaps))}; "
                                     "moves like 'take 2 from heap 3'",
                         max_steps=DEFAULT_MAX_STEPS, default_action="",
                         num_agents=len(AGENTS))
                for task, heaps in TASKS.items()]

    def open(self, task: str, options: GameOptions) -> Game:
        """Create a game (not reset yet).

        Raises:
            TaskNotFoundError: a task not in ``TASKS``.
            GameOptionError: ``oracle``; a player id that is not ``player_0``/``player_1`` (or
                given twice); a bad ``max_steps``; a bad or unknown ``kwargs`` key.
        """
        if task not in TASKS:
            raise TaskNotFoundError(task, list(TASKS))
        if options.oracle:
            raise GameOptionError("oracle: the nim family has no expert player; "
                                  "open the game with oracle=false")
        options = self.check_options(task, options)
        check_player_ids(options.players, AGENTS)
        progression_agent = options.kwargs["progression_agent"]
        limit = step_limit(options, DEFAULT_MAX_STEPS)

        from env_server.families.nim.game import NimBoard

        return TurnBasedGame(NimBoard(task, TASKS[task], AGENTS), options, max_steps=limit,
                             progression_agent=progression_agent)

