"""The nim family's manifest (``moria.families``): normal-play Nim, a two-player game that
needs no package beyond numpy."""

from __future__ import annotations

from moria.families import FamilyManifest, SuiteEntry
from moria.family_options import choice

#: The two seats, the first moving first.
AGENTS: tuple[str, str] = ("player_0", "player_1")

MANIFESTS = [FamilyManifest(
    name="nim", entry_point="env_server.families.nim:NimFamily",
    suites={"mosaic": SuiteEntry(position=2, default_tasks=("nim_3-4-5",),
                                 episodes_per_task=10)},
    report_kind="two_player", options_help="progression_agent", id_prefixes=("nim_",),
    options={"progression_agent": choice("the seat whose result metrics.progression reports",
                                         AGENTS[0], AGENTS)},
)]
