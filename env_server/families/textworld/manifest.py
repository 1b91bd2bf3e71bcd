"""The textworld family's manifest (``moria.families``): BALROG's three TextWorld families, 25
generated games each (an episode's seed picks game ``seed mod 25``)."""

from __future__ import annotations

from moria.families import BalrogReference, FamilyManifest, SuiteEntry
from moria.family_options import boolean

MANIFESTS = [FamilyManifest(
    name="textworld", entry_point="env_server.families.textworld:TextWorldFamily",
    balrog=BalrogReference(env="textworld", package="textworld", check_task="coin_collector"),
    suites={"balrog": SuiteEntry(
        position=2, default_tasks=("treasure_hunter", "the_cooking_game", "coin_collector"),
        episodes_per_task=10)},
    oracle_source="walkthrough", seed_cycle=25, prepare=("textworld",), extra="textworld",
    image="textworld", id_prefixes=("treasure_hunter", "the_cooking_game", "coin_collector"),
    options_help="keep_objective: true shows the objective BALROG strips",
    options={"keep_objective": boolean("keep the objective in the observation text (BALROG "
                                       "strips it)", False)},
)]
