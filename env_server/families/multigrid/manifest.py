"""The multigrid family's manifest (``moria.families``): MOSAIC's Soccer 2v2 and Collect 2v2
(every registered variant is accepted as a task; ``moria tasks --env multigrid`` lists them)."""

from __future__ import annotations

from moria.families import FamilyManifest, SuiteEntry
from moria.family_options import choice, integer

#: The coordination levels (``instruction.py`` writes each one's protocol).
LEVELS: tuple[int, ...] = (1, 2, 3)
#: The roles of a Soccer agent with teammates (used at coordination level 3).
ROLES: tuple[str, ...] = ("forward", "defender")
#: What a seat sees of its teammates.
OBSERVATION_MODES: tuple[str, ...] = ("egocentric", "visible_teammates")

_LEVEL_HELP = "the coordination level (instruction.py)"
_MODE_HELP = "egocentric (default) or visible_teammates"

MANIFESTS = [FamilyManifest(
    name="multigrid", entry_point="env_server.families.multigrid:MultigridFamily",
    suites={"mosaic": SuiteEntry(
        position=0, default_tasks=("MosaicMultiGrid-S-2v2-IndAgObs-v1",
                                   "MosaicMultiGrid-C-2v2-IndAgObs-v1"),
        episodes_per_task=10)},
    report_kind="team", extra="multigrid", image="multigrid", id_prefixes=("MosaicMultiGrid-",),
    options_help="coordination_level, observation_mode (for every seat)",
    options={
        "coordination_level": integer(_LEVEL_HELP + ", for every seat", LEVELS[0], LEVELS[0],
                                      LEVELS[-1]),
        "observation_mode": choice(_MODE_HELP + ", for every seat", OBSERVATION_MODES[0],
                                   OBSERVATION_MODES),
    },
    player_options={
        "coordination_level": integer(_LEVEL_HELP + " of this seat", None, LEVELS[0],
                                      LEVELS[-1]),
        "observation_mode": choice(_MODE_HELP + ", for this seat", None, OBSERVATION_MODES),
        "role": choice("this seat's role (as PlayerSpec.role)", None, ("", *ROLES)),
    },
)]
