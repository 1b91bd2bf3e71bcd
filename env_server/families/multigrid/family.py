"""The ``multigrid`` family: mosaic-multigrid Soccer and Collect, several agents acting at once.

Tasks are the package's own registry ids (``tasks.py``), e.g.
``MosaicMultiGrid-S-2v2-IndAgObs-v1``; the seed docs' older ids
(``MosaicMultiGrid-Soccer-1vs1-IndAgObs-v0``) are accepted as aliases.

Players (``GameOptions.players``): zero or more seats named ``agent_<i>`` (one per env agent
at most; unnamed seats get the defaults). Per player:
- ``role`` (``PlayerSpec.role`` or the option ``role``): ``forward`` or ``defender``, used at
  coordination level 3 (Soccer agents with teammates). Every Soccer agent with teammates gets
  a role (recorded in the metrics at every level): a player without one is given, in seat
  order, the role its team has fewest of so far (``forward`` on a tie), so a 2-player team
  without roles is forward + defender and one explicit defender gets a forward partner;
- option ``coordination_level``: 1, 2 or 3 (default 1; see ``instruction.py``);
- option ``observation_mode``: ``egocentric`` (default) or ``visible_teammates``.

Family options (``GameOptions.kwargs``): ``coordination_level`` and ``observation_mode`` as
defaults for every player. ``oracle`` is refused (there is no expert).

mosaic-multigrid (with numba and pygame) is imported on the first ``list_tasks``/``open``. The
first reset in a process compiles the package's numba kernels (about 11 s without a warm
cache; the package caches them on disk).
"""

from __future__ import annotations

from typing import Any

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


class MultigridFamily(Family):
    """Lists and opens mosaic-multigrid Soccer and Collect games."""

    name = "multigrid"
    packages = ("mosaic-multigrid", "numba", "gymnasium")
    isolation = "thread"
    preload = ("mosaic_multigrid", "env_server.families.multigrid.game")

    def __init__(self) -> None:
        self._tasks: list[TaskInfo] | None = None

    def list_tasks(self) -> list[TaskInfo]:
        """Soccer then Collect ids from the package registry, with their agent counts and step
        limits; the default action is ``noop``."""
        if self._tasks is None:
            from env_server.families.multigrid.instruction import DEFAULT_ACTION
            from env_server.families.multigrid.tasks import task_specs

            self._tasks = [
                TaskInfo(family=self.name, task=spec.task, description=spec.description,
                         max_steps=spec.max_steps, default_action=DEFAULT_ACTION,
                         num_agents=len(spec.team_indices))
                for spec in task_specs().values()
            ]
        return list(self._tasks)

    def open(self, task: str, options: GameOptions) -> Game:
        """Create a game (not reset yet).

        Raises:
            TaskNotFoundError: unknown task or alias (``valid`` lists the canonical ids).
            GameOptionError: ``oracle``; a negative seed; a non-positive ``max_steps``; a
                player id that is not one of the task's agents or appears twice; a bad or
                unknown player option or family option; conflicting ``role`` values.
        """
        from env_server.families.multigrid.game import MultigridGame
        from env_server.families.multigrid.tasks import resolve, task_specs

        spec = resolve(task)
        if spec is None:
            raise TaskNotFoundError(task, list(task_specs()))
        if options.oracle:
            raise GameOptionError("oracle: multigrid has no expert player; open the game with "
                                  "oracle=false")
        if options.seed < 0:
            raise GameOptionError(f"seed: must be >= 0, got {options.seed}")
        step_limit(options, 1)  # validates options.max_steps; the env applies it
        players = plan_players(spec.kind, spec.team_indices, self.check_options(task, options))
        return MultigridGame(spec, options, players)


def plan_players(kind: str, team_indices: tuple[int, ...], options: GameOptions) -> dict[str, Any]:
    """Every agent's ``PlayerSetup`` from the open options (module doc), checked against the
    manifest's schema (``MultigridFamily.check_options``) first.

    Raises ``GameOptionError`` as ``MultigridFamily.open`` documents."""
    from env_server.families.multigrid.game import PlayerSetup, agent_id
    from env_server.families.multigrid.instruction import effective_level
    from env_server.families.multigrid.manifest import ROLES
    from env_server.families.multigrid.tasks import SOCCER

    ids = [agent_id(i) for i in range(len(team_indices))]
    default_level = options.kwargs["coordination_level"]
    default_mode = options.kwargs["observation_mode"]

    asked: dict[str, tuple[int, str, str]] = {}
    check_player_ids(options.players, ids)
    for player in options.players:
        opts = player.options
        level = opts.get("coordination_level", default_level)
        mode = opts.get("observation_mode", default_mode)
        role = opts.get("role", player.role)
        if player.role and role != player.role:
            raise GameOptionError(f"role: {player.agent_id} has role {player.role!r} and option "
                                  f"role {role!r}; give one")
        if player.role and player.role not in ROLES:
            raise GameOptionError(f"role: must be one of {', '.join(ROLES)}; got "
                                  f"{player.role!r}")
        asked[player.agent_id] = (level, mode, role)

    # Soccer agents with teammates always have a role, so every level-3 protocol can name its
    # teammates' roles: a player without one gets, in seat order, the role its team has
    # fewest of so far (forward first on a tie).
    chosen = {aid: asked.get(aid, (default_level, default_mode, ""))[2] for aid in ids}
    counts: dict[int, dict[str, int]] = {}
    for aid, team in zip(ids, team_indices, strict=True):
        tally = counts.setdefault(team, dict.fromkeys(ROLES, 0))
        if chosen[aid]:
            tally[chosen[aid]] += 1
    setups: dict[str, Any] = {}
    for aid, team in zip(ids, team_indices, strict=True):
        level, mode, role = asked.get(aid, (default_level, default_mode, ""))
        has_roles = kind == SOCCER and team_indices.count(team) > 1
        if has_roles and not role:
            tally = counts[team]
            role = min(ROLES, key=lambda r: tally[r])
            tally[role] += 1
        setups[aid] = PlayerSetup(observation_mode=mode, level=level,
                                  level_used=effective_level(level, kind, has_roles), role=role)
    return setups
