"""The meltingpot family's manifest (``moria.families``): Melting Pot's social dilemmas
(every substrate the family decodes is a task, and so is every scenario, playable with
tensorflow and the assets tarball, else listed as unavailable; ``moria tasks --env meltingpot``
lists them)."""

from __future__ import annotations

from moria.families import FamilyManifest, SuiteEntry
from moria.family_options import server_path

MANIFESTS = [FamilyManifest(
    name="meltingpot", entry_point="env_server.families.meltingpot:MeltingPotFamily",
    suites={"mosaic": SuiteEntry(
        position=3, default_tasks=("commons_harvest__open",
                                   "prisoners_dilemma_in_the_matrix__repeated",
                                   "stag_hunt_in_the_matrix__repeated",
                                   "collaborative_cooking__asymmetric", "clean_up"),
        episodes_per_task=2)},
    oracle_source="meltingpot-greedy", extra="meltingpot",
    image="meltingpot",
    # every substrate and scenario name starts with one of these (`moria tasks --env meltingpot`;
    # a scenario is its substrate's name and a number, and scenarios cover more substrates)
    id_prefixes=("allelopathic_harvest__", "bach_or_stravinsky_in_the_matrix__", "boat_race__",
                 "chemistry__", "chicken_in_the_matrix__", "clean_up", "coins",
                 "collaborative_cooking__", "commons_harvest__", "coop_mining", "daycare",
                 "externality_mushrooms__", "factory_commons__", "fruit_market__",
                 "gift_refinements", "hidden_agenda", "paintball__", "predator_prey__",
                 "prisoners_dilemma_in_the_matrix__", "pure_coordination_in_the_matrix__",
                 "rationalizable_coordination_in_the_matrix__",
                 "running_with_scissors_in_the_matrix__", "stag_hunt_in_the_matrix__",
                 "territory__"),
    options_help=("assets: PATH of the assets tarball or folder (scenarios only; needs the "
                  "meltingpot-scenarios extra; MORIA_MELTINGPOT_ASSETS sets it server-wide)"),
    # ListTasks takes no options: a local env server learns the assets from the variable
    server_env={"assets": "MORIA_MELTINGPOT_ASSETS"},
    replay_refusal=("Melting Pot's engine does not play an episode the same way twice from "
                    "its seed and actions, so a replay could neither verify it nor draw its "
                    "frames"),
    options={"assets": server_path("Melting Pot's assets tarball or extracted folder "
                                   "(scenarios only; a substrate ignores it)",
                                   "meltingpot_assets")},
)]
