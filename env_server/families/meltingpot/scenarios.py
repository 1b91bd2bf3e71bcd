"""Melting Pot scenarios as listed tasks: a substrate played by focal players beside a
population of background bots (``meltingpot.configs.scenarios.SCENARIO_CONFIGS``, 312 in
dm-meltingpot 2.4.1).

The family lists every scenario after the substrates, under its own name
(``commons_harvest__open_0``). It plays those whose substrate it serves (``SUBSTRATES``: 194 of
the 312) when tensorflow is installed and an assets path is known (``bots.py`` runs the bots;
``package.scenario_unavailable`` gives the reason otherwise); the others stay unavailable
(``NOT_SERVED``: their substrate's observations are not decoded). A scenario's seats are its
focal players (``num_agents``); its step limit is its substrate's ``maxEpisodeLengthFrames``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from env_server.families.meltingpot.package import scenario_configs
from env_server.families.meltingpot.substrates import SUBSTRATES, raw_settings, task_spec


@dataclass(frozen=True)
class ScenarioSpec:
    """One scenario as the family lists it: its substrate, Melting Pot's one-line
    description and tags, the number of focal players (the seats) and of background bots, and
    the substrate's step limit."""

    name: str
    substrate: str
    summary: str
    tags: tuple[str, ...]
    num_focal: int
    num_bots: int
    max_steps: int

    @property
    def served(self) -> bool:
        """Whether the family serves the scenario's substrate (``SUBSTRATES``)."""
        return self.substrate in SUBSTRATES

    @property
    def description(self) -> str:
        """The ``TaskInfo.description``: what the scenario is, from its config."""
        tags = f" (tags: {', '.join(self.tags)})" if self.tags else ""
        return (f"scenario of {self.substrate}: {self.summary}{tags}; "
                f"{_count(self.num_focal, 'focal player')}, "
                f"{_count(self.num_bots, 'background bot')}")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


#: The reason a scenario of a substrate outside ``SUBSTRATES`` cannot be opened (its
#: description names the substrate); no install cures it, so it is given before any other.
NOT_SERVED = (f"its substrate is not one this family serves (its observation text is not "
              f"decoded); the family plays the scenarios of its {len(SUBSTRATES)} substrates")


@cache
def _substrate_steps(substrate: str) -> int:
    """The substrate's ``maxEpisodeLengthFrames`` (0 when it sets none)."""
    if substrate in SUBSTRATES:
        return task_spec(substrate).max_steps
    return int(raw_settings(substrate).get("maxEpisodeLengthFrames", 0) or 0)


@cache
def scenario_specs() -> dict[str, ScenarioSpec]:
    """Every scenario of the installed package, in its order (sorted by name)."""
    specs = {}
    for name, config in scenario_configs().items():
        focal = sum(1 for is_focal in config.is_focal if is_focal)
        specs[name] = ScenarioSpec(
            name=name, substrate=str(config.substrate), summary=str(config.description),
            tags=tuple(sorted(config.tags)), num_focal=focal,
            num_bots=len(config.is_focal) - focal,
            max_steps=_substrate_steps(str(config.substrate)))
    return specs
