"""The babyai family's manifest (``moria.families``): BALROG's BabyAI suite entry."""

from __future__ import annotations

from moria.families import BalrogReference, FamilyManifest, SuiteEntry

#: BALROG's five BabyAI tasks (one per mission kind of MixedTrainLocal).
BALROG_TASKS: tuple[str, ...] = (
    "BabyAI-MixedTrainLocal-v0/goto",
    "BabyAI-MixedTrainLocal-v0/pickup",
    "BabyAI-MixedTrainLocal-v0/open",
    "BabyAI-MixedTrainLocal-v0/putnext",
    "BabyAI-MixedTrainLocal-v0/pick_up_seq_go_to",
)

MANIFESTS = [FamilyManifest(
    name="babyai", entry_point="env_server.families.babyai:BabyAIFamily",
    balrog=BalrogReference(env="babyai", package="babyai_text",
                           check_task="BabyAI-MixedTrainLocal-v0/goto"),
    suites={"balrog": SuiteEntry(position=0, default_tasks=BALROG_TASKS, episodes_per_task=10)},
    oracle_source="babyai-bot", extra="babyai", image="babyai", default_options={"num_dists": 0},
    id_prefixes=("BabyAI-", "MiniGrid-"), aliases=("minigrid",),
    options_help="BALROG's num_dists (distractors; 0), tile_size, ...",
)]
