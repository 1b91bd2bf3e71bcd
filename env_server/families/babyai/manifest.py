"""The babyai family's manifest (``moria.families``): BALROG's BabyAI suite entry."""

from __future__ import annotations

from moria.families import BalrogReference, FamilyManifest, SuiteEntry
from moria.family_options import integer

#: The constructor keywords a registered id takes from a client: nothing else reaches
#: ``gymnasium.make`` (a render mode, for one, is the server's choice). ``size`` is not one: a
#: grid smaller than its env expects makes some levels' rejection sampling loop forever
#: (MiniGrid-PutNear-8x8-N3 with size 5), and others fail at their first reset.
REGISTERED_OPTIONS: tuple[str, ...] = ("agent_view_size",)

OPTIONS = {
    "num_dists": integer("distractor objects of the MixedTrainLocal level (ignored for "
                         "registered ids, whose id fixes their own)", 0, 0, 20),
    "tile_size": integer("pixels per cell of rendered frames", 32, 4, 128),
    "agent_view_size": integer("registered ids only: the side of the agent's square view, "
                               "an odd number", None, 3, 15),
}

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
    options_help="BALROG's num_dists (distractors; 0), tile_size, ...", options=OPTIONS,
)]
