"""The multigrid task catalogue, read from mosaic-multigrid's own registry.

Tasks are the Soccer (``MosaicMultiGrid-S-*``) and Collect (``MosaicMultiGrid-C-*``) ids of
``mosaic_multigrid.envs.CONFIGURATIONS`` (Basketball and American Football are not offered).
Order: symmetric Soccer matches first (1v1 .. 4v4), then asymmetric, then one-sided and solo
practice fields, then Collect.

Aliases (the seed docs' older names) map onto the current ids:
- the sport spelled out: ``-S-`` -> ``-Soccer-``, ``-C-`` -> ``-Collect-``;
- the format written ``NvsM`` or ``NvM``;
- the version ``v0`` or ``v1``;
so ``MosaicMultiGrid-Soccer-1vs1-IndAgObs-v0`` is ``MosaicMultiGrid-S-1v1-IndAgObs-v1`` and
``MosaicMultiGrid-Collect-IndAgObs-v0`` is ``MosaicMultiGrid-C-IndAgObs-v1``. The solo fields
also answer to ``MosaicMultiGrid-Soccer-Solo-{Green,Blue}-IndAgObs-v{0,1}``.

Importing this module imports mosaic_multigrid (and so numba and pygame); the family imports
it lazily.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from mosaic_multigrid.envs import CONFIGURATIONS
from mosaic_multigrid.envs.collect_game import CollectGameIndAgObsEnv
from mosaic_multigrid.envs.soccer_game import SoccerGameIndAgObsEnv

SOCCER = "soccer"
COLLECT = "collect"
_PREFIX = "MosaicMultiGrid-"
_FORMAT = re.compile(r"(\d+)v(\d+)")


@dataclass(frozen=True)
class TaskSpec:
    """One offered task: its canonical id, the env class and registry kwargs, the game kind
    (``soccer``/``collect``), the agents' team indices (the env's real ``agents_index``), the
    default step limit and (Soccer) the goals needed to win / (Collect) the number of balls."""

    task: str
    env_cls: type
    env_kwargs: dict[str, Any]
    kind: str
    team_indices: tuple[int, ...]
    max_steps: int
    goals_to_win: int
    num_balls: int

    def make_env(self, max_steps: int | None = None) -> Any:
        """A fresh env instance (not reset); ``max_steps`` overrides the default limit."""
        kwargs = dict(self.env_kwargs)
        if max_steps is not None:
            kwargs["max_steps"] = int(max_steps)
        return self.env_cls(**kwargs)

    @property
    def description(self) -> str:
        """One line for ListTasks."""
        counts = _team_sizes(self.team_indices)
        if self.kind == SOCCER:
            sides = "v".join(str(n) for n in counts)
            return (f"Soccer {sides} on a 16x11 field: carry the ball into the opponents' goal; "
                    f"first team to {self.goals_to_win} goals wins")
        teams = "individual" if all(n == 1 for n in counts) and len(counts) > 2 else \
            "v".join(str(n) for n in counts)
        return (f"Collect ({teams}, {len(self.team_indices)} agents) on a 10x10 grid: pick up "
                f"more of the {self.num_balls} balls than the other team(s)")


def _team_sizes(team_indices: tuple[int, ...]) -> list[int]:
    seen: dict[int, int] = {}
    for team in team_indices:
        seen[team] = seen.get(team, 0) + 1
    return list(seen.values())


def _order(task: str) -> tuple[int, int, str]:
    sport = 0 if task.startswith(_PREFIX + "S-") else 1
    match = _FORMAT.search(task)
    if sport == 1 or match is None:  # Collect: the registry's own order
        return sport, 0, f"{list(CONFIGURATIONS).index(task):04d}"
    left, right = int(match.group(1)), int(match.group(2))
    group = 0 if left == right and left > 0 else 1 if left and right else 2
    return sport, group, f"{max(left, right):02d}{task}"


def _spec(task: str, env_cls: type, env_kwargs: dict[str, Any]) -> TaskSpec:
    env = env_cls(**env_kwargs)  # cheap: no reset, no numba call
    if isinstance(env, SoccerGameIndAgObsEnv):
        kind = SOCCER
    elif isinstance(env, CollectGameIndAgObsEnv):
        kind = COLLECT
    else:
        raise TypeError(f"{task}: {env_cls.__name__} is neither a Soccer nor a Collect env")
    return TaskSpec(
        task=task,
        env_cls=env_cls,
        env_kwargs=dict(env_kwargs),
        kind=kind,
        team_indices=tuple(int(a.team_index) for a in env.agents),
        max_steps=int(env.max_steps),
        goals_to_win=int(getattr(env, "goals_to_win", 0)),
        num_balls=int(sum(getattr(env, "num_balls", []) or [])),
    )


@cache
def task_specs() -> dict[str, TaskSpec]:
    """Canonical id -> TaskSpec, in listing order (module doc)."""
    ids = [t for t in CONFIGURATIONS
           if t.startswith(_PREFIX + "S-") or t.startswith(_PREFIX + "C-")]
    ids.sort(key=_order)
    return {t: _spec(t, *CONFIGURATIONS[t]) for t in ids}


def _alias_forms(task: str) -> set[str]:
    sport = task.replace(_PREFIX + "S-", _PREFIX + "Soccer-", 1).replace(
        _PREFIX + "C-", _PREFIX + "Collect-", 1)
    forms = {sport, _FORMAT.sub(r"\1vs\2", sport)}
    out = set()
    for form in forms:
        stem = form[: -len("-v1")] if form.endswith("-v1") else form
        out.update({stem + "-v0", stem + "-v1"})
    return out - {task}


@cache
def aliases() -> dict[str, str]:
    """Old id -> canonical id (module doc)."""
    specs = task_specs()
    table: dict[str, str] = {}
    for task in specs:
        for alias in _alias_forms(task):
            table.setdefault(alias, task)
    for colour, team_id in (("Green", "S-G-1v0-v1"), ("Blue", "S-B-0v1-v1")):
        if _PREFIX + team_id in specs:
            for version in ("v0", "v1"):
                table[f"{_PREFIX}Soccer-Solo-{colour}-IndAgObs-{version}"] = _PREFIX + team_id
    return table


def resolve(task: str) -> TaskSpec | None:
    """The TaskSpec of a canonical id or an alias; None when unknown."""
    specs = task_specs()
    canonical = task if task in specs else aliases().get(task)
    return specs.get(canonical) if canonical else None
