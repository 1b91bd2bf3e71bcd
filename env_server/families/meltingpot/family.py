"""The ``meltingpot`` family: DeepMind Melting Pot substrates, every player a seat.

Tasks are substrate names (``substrates.SUBSTRATES``, social dilemmas first), then every
scenario of the package (``scenarios.scenario_specs``: a substrate with background bots, e.g.
``commons_harvest__open_0``). A scenario opens when tensorflow is installed (the
``meltingpot-scenarios`` extra), an assets path is known (the ``assets`` option, else the env
server's ``MORIA_MELTINGPOT_ASSETS``) and its substrate is one of ``SUBSTRATES``: its seats are
the focal players and ``bots.Population`` plays the rest (``game.py``). Otherwise opening it
raises ``TaskUnavailableError`` with the reason ``TaskInfo.unavailable`` gives
(``package.scenario_unavailable``, ``scenarios.NOT_SERVED``; ``ListTasks`` takes no options, so
it lists the scenarios as available only when the server's ``MORIA_MELTINGPOT_ASSETS`` is set).
Assets that cannot serve the scenario (unreadable, another layout, a bot's saved model missing)
raise ``TaskUnavailableError`` too, naming the path looked at.

Players (``GameOptions.players``): zero or more seats named ``player_<i>`` (in a scenario, the
focal players' substrate slots); ``role`` (``PlayerSpec.role``) picks one of the substrate's valid
roles for that seat (default: the substrate's default roles; a scenario's roles are fixed). Seat
options: none.

Family options (``GameOptions.kwargs``): ``assets`` (Melting Pot's assets tarball or its
extracted folder, a server file: ``moria.server_files``; it must exist), which only scenarios
read (a substrate ignores it).
``oracle`` is accepted (``oracle.expert_action``).
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
    TaskUnavailableError,
    check_player_ids,
)
from env_server.options import step_limit
from moria.quoting import quote


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
        step limit, then the scenarios (unavailable, with the reason); the default action is
        ``NOOP``."""
        if self._tasks is None:
            from env_server.families.meltingpot.game import DEFAULT_ACTION
            from env_server.families.meltingpot.package import (
                default_assets,
                scenario_unavailable,
            )
            from env_server.families.meltingpot.scenarios import NOT_SERVED, scenario_specs
            from env_server.families.meltingpot.substrates import SUBSTRATES, task_spec

            scenarios = scenario_specs()
            tasks = []
            for name in SUBSTRATES:
                spec = task_spec(name)
                count = sum(1 for s in scenarios.values() if s.substrate == name)
                note = ("" if not count else
                        "; its scenario is listed after the substrates" if count == 1 else
                        f"; its {count} scenarios are listed after the substrates")
                tasks.append(TaskInfo(
                    family=self.name, task=name, description=spec.description + note,
                    max_steps=spec.max_steps, default_action=DEFAULT_ACTION,
                    num_agents=spec.num_players))
            why = scenario_unavailable(assets=default_assets() is not None)
            for scenario in scenarios.values():
                description = scenario.description
                if not scenario.served:
                    description += "; not served here (its substrate's text is not decoded)"
                tasks.append(TaskInfo(
                    family=self.name, task=scenario.name, description=description,
                    max_steps=scenario.max_steps, default_action=DEFAULT_ACTION,
                    num_agents=scenario.num_focal,
                    # a substrate not served is the reason no install can cure: said first
                    unavailable=(why if scenario.served else NOT_SERVED)))
            self._tasks = tasks
        return list(self._tasks)

    def open(self, task: str, options: GameOptions) -> Game:
        """Create a game (not reset yet).

        Raises:
            TaskNotFoundError: neither a listed substrate nor a scenario.
            TaskUnavailableError: a scenario that cannot be played here (module doc), after
                its options are checked: no tensorflow, no assets, a substrate not served,
                assets that cannot be read or miss one of its bots' saved models.
            GameOptionError: a negative seed; a bad ``max_steps``; a player id that is not one of
                the game's or appears twice; a role the substrate does not have; player options;
                an ``assets`` path that does not exist, or an unknown option.
        """
        from env_server.families.meltingpot.game import MeltingPotGame, agent_id
        from env_server.families.meltingpot.package import default_assets, modules
        from env_server.families.meltingpot.scenarios import scenario_specs
        from env_server.families.meltingpot.substrates import SUBSTRATES, task_spec

        scenario = task not in SUBSTRATES
        if scenario and task not in scenario_specs():
            raise TaskNotFoundError(task, [*SUBSTRATES, *scenario_specs()])
        if options.seed < 0:
            raise GameOptionError(f"seed: must be >= 0, got {options.seed}")
        options = self.check_options(task, options)
        step_limit(options, 1)
        assets = options.kwargs.get("assets")
        if assets is not None and not Path(assets).exists():
            raise GameOptionError(f"assets: must be the path of Melting Pot's assets "
                                  f"tarball or folder; got {quote(assets, 128)}")
        if scenario:
            return self._open_scenario(task, options, assets or default_assets())
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

    def _open_scenario(self, task: str, options: GameOptions, assets: str | None) -> Game:
        """A scenario's game (``open``'s checks on seed and options done): its focal seats,
        its bots loaded from ``assets``. Raises as ``open``."""
        from env_server.families.meltingpot.bots import AssetsError, Population
        from env_server.families.meltingpot.game import MeltingPotGame, agent_id
        from env_server.families.meltingpot.package import scenario_configs, scenario_unavailable
        from env_server.families.meltingpot.scenarios import NOT_SERVED, scenario_specs
        from env_server.families.meltingpot.substrates import task_spec

        scenario = scenario_specs()[task]
        if not scenario.served:
            raise TaskUnavailableError(task, NOT_SERVED)
        why = scenario_unavailable(assets=assets is not None)
        if why:
            raise TaskUnavailableError(task, why)
        assert assets is not None
        config = scenario_configs()[task]
        roles = tuple(str(r) for r in config.roles)
        focal = [i for i, is_focal in enumerate(config.is_focal) if is_focal]
        ids = [agent_id(i) for i in focal]
        check_player_ids(options.players, ids)
        for player in options.players:
            if player.options:
                raise GameOptionError(f"player {player.agent_id}: meltingpot seats take no "
                                      f"options; got {', '.join(sorted(player.options))}")
            role = roles[focal[ids.index(player.agent_id)]]
            if player.role and player.role != role:
                raise GameOptionError(f"role: {task} fixes {player.agent_id}'s role to "
                                      f"{role!r}; got {player.role!r}")
        spec = task_spec(scenario.substrate)
        try:
            background = Population(config, spec, assets)
        except AssetsError as exc:
            raise TaskUnavailableError(task, str(exc)) from None
        return MeltingPotGame(spec, options, roles, scenario=scenario, background=background)
