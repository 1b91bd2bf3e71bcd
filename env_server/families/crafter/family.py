"""The ``crafter`` family: BALROG's Crafter, one task ``default``.

Family options (``GameOptions.kwargs``) are described in ``config.py``: ``text_format``
("legacy" default / "current") with the current format's ``unique_items``,
``precise_location``, ``skip_items``, ``edge_only_items``, and BALROG's ``crafter_kwargs`` keys
``size``, ``area``, ``view``, ``reward``, ``seed``, ``max_episode_steps``.

crafter is imported when a game is opened, not when this module is imported.
"""

from __future__ import annotations

from env_server.game import Family, Game, GameOptionError, GameOptions, TaskInfo, TaskNotFoundError
from env_server.options import check_single_player, step_limit

TASK = "default"
AGENT_ID = "agent_0"


class CrafterFamily(Family):
    """Lists and opens the Crafter task."""

    name = "crafter"
    packages = ("crafter", "numba")
    #: crafter is pure Python + numpy with no global state; games run on the server's threads.
    isolation = "thread"
    #: used only when a server forces process isolation for this family
    preload = ("crafter", "env_server.families.crafter.game")

    def list_tasks(self) -> list[TaskInfo]:
        """One task, ``default`` (BALROG's): 2000 steps, default action ``Noop``."""
        from env_server.families.crafter.config import DEFAULT_MAX_STEPS
        from env_server.families.crafter.vocab import DEFAULT_ACTION

        return [
            TaskInfo(
                family=self.name,
                task=TASK,
                description="survive and unlock as many of Crafter's 22 achievements as "
                "possible in a procedurally generated 64x64 world",
                max_steps=DEFAULT_MAX_STEPS,
                default_action=DEFAULT_ACTION,
            )
        ]

    def open(self, task: str, options: GameOptions) -> Game:
        """Create a game (not reset yet); the first open in a process also warms crafter's
        world generation (``world.warm_up``).

        Raises:
            TaskNotFoundError: a task other than ``default``.
            GameOptionError: more than one player or a player id other than ``agent_0``, a
                non-positive ``max_steps``, ``oracle`` (there is no expert), or a bad ``kwargs``
                value (``config.parse_kwargs``).
        """
        if task != TASK:
            raise TaskNotFoundError(task, [TASK])
        options = self.check_options(task, options)
        check_single_player(self.name, options)
        step_limit(options, 1)  # validates options.max_steps; the game applies it
        if options.oracle:
            raise GameOptionError(
                "oracle: crafter has no expert player; open the game with oracle=false"
            )

        from env_server.families.crafter.config import parse_kwargs
        from env_server.families.crafter.game import CrafterGame
        from env_server.families.crafter.world import warm_up

        config = parse_kwargs(options.kwargs, task)
        warm_up()
        return CrafterGame(config, options)
