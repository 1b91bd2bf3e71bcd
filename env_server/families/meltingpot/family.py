"""The ``meltingpot`` family: DeepMind Melting Pot substrates, every player a seat.

Tasks are substrate names (``substrates.SUBSTRATES``, social dilemmas first). Players
(``GameOptions.players``): zero or more seats named ``player_<i>``; ``role`` (``PlayerSpec.role``)
picks one of the substrate's valid roles for that seat (default: the substrate's default roles).
Seat options: none.

Family options (``GameOptions.kwargs``): ``assets`` (the path of Melting Pot's assets tarball or
its extracted folder), which only scenarios use: scenarios (substrates with background bots)
need tensorflow, which the meltingpot extra does not install, so this family serves none and
each substrate's description says so (``package.scenario_support``). ``oracle`` is accepted
(``oracle.expert_action``).
"""

from __future__ import annotations

from pathlib import Path

from env_server.game import (
    Family,
    Game,
    GameOptionError,
    GameOptions,
    TaskInfo,
    TaskNotFoundError,
    check_player_ids,
)
from env_server.options import reject_unknown, step_limit

FAMILY_OPTIONS = ["assets"]


class MeltingPotFamily(Family):
    """Lists and opens Melting Pot substrates."""

    name = "meltingpot"
    packages = ("dm-meltingpot", "dmlab2d", "dm-env", "ml-collections")
    isolation = "thread"
    preload = ("env_server.families.meltingpot.game",)

    def __init__(self) -> None:
        self._tasks: list[TaskInfo] | None = None

    def list_tasks(self) -> list[TaskInfo]:
        """The substrates (headline social dilemmas first), each with its player count and
        step limit; the default action is ``NOOP``."""
        if self._tasks is None:
            from env_server.families.meltingpot.package import scenario_support
            from env_server.families.meltingpot.substrates import SUBSTRATES, task_spec

            why = scenario_support()
            note = f"; its scenarios are unavailable: {why}" if why else ""
            self._tasks = []
            for name in SUBSTRATES:
                spec = task_spec(name)
                self._tasks.append(TaskInfo(
                    family=self.name, task=name, description=spec.description + note,
                    max_steps=spec.max_steps, default_action="NOOP",
                    num_agents=spec.num_players))
        return list(self._tasks)

    def open(self, task: str, options: GameOptions) -> Game:
        """Create a game (not reset yet).

        Raises:
            TaskNotFoundError: not a listed substrate.
            GameOptionError: a negative seed; a bad ``max_steps``; a player id that is not one of
                the game's or appears twice; a role the substrate does not have; player options;
                ``assets`` (scenarios are not served: module doc) or an unknown option.
        """
        from env_server.families.meltingpot.game import MeltingPotGame, agent_id
        from env_server.families.meltingpot.package import modules, scenario_support
        from env_server.families.meltingpot.substrates import SUBSTRATES, task_spec

        if task not in SUBSTRATES:
            raise TaskNotFoundError(task, list(SUBSTRATES))
        if options.seed < 0:
            raise GameOptionError(f"seed: must be >= 0, got {options.seed}")
        step_limit(options, 1)
        kwargs = dict(options.kwargs)
        if "assets" in kwargs:
            assets = kwargs.pop("assets")
            if not isinstance(assets, str) or not Path(assets).exists():
                raise GameOptionError(f"assets: must be the path of Melting Pot's assets "
                                      f"tarball or folder; got {assets!r}")
            why = scenario_support() or "this family serves substrates only"
            raise GameOptionError(f"assets: only scenarios use the assets, and {why}")
        reject_unknown(kwargs, "meltingpot", FAMILY_OPTIONS)
        spec = task_spec(task)
        ids = [agent_id(i) for i in range(spec.num_players)]
        roles = list(spec.roles)
        valid_roles = set(modules().configs.get_config(task).valid_roles)
        check_player_ids(options.players, ids)
        for player in options.players:
            if player.options:
                raise GameOptionError(f"player {player.agent_id}: meltingpot seats take no "
                                      f"options; got {', '.join(sorted(player.options))}")
            if player.role:
                if player.role not in valid_roles:
                    raise GameOptionError(f"role: {task} has roles "
                                          f"{', '.join(sorted(valid_roles))}; got "
                                          f"{player.role!r}")
                roles[ids.index(player.agent_id)] = player.role
        return MeltingPotGame(spec, options, tuple(roles))
