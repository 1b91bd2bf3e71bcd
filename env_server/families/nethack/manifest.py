"""The manifests (``moria.families``) of the two families this folder hosts: ``minihack``
(BALROG's eight MiniHack tasks; Boxoban levels are built by ``moria prepare``) and ``nle``
(NetHackChallenge)."""

from __future__ import annotations

from env_server.families.nethack.minihack_tasks import BALROG_TASKS as MINIHACK_BALROG_TASKS
from moria.families import BalrogReference, FamilyManifest, SuiteEntry

MANIFESTS = [
    FamilyManifest(
        name="minihack", entry_point="env_server.families.nethack:MiniHackFamily",
        balrog=BalrogReference(env="minihack", package="minihack",
                               check_task="MiniHack-MazeWalk-9x9-v0"),
        suites={"balrog": SuiteEntry(position=4, default_tasks=MINIHACK_BALROG_TASKS,
                                     episodes_per_task=5)},
        oracle_source="minihack-expert", prepare=("boxoban",), extra="nethack", image="nethack",
        id_prefixes=("MiniHack-",),
        options_help=("BALROG's character/penalty/step settings are the defaults; "
                      "boxoban_levels: DIR selects an official Boxoban level set"),
    ),
    FamilyManifest(
        name="nle", entry_point="env_server.families.nethack:NLEFamily",
        balrog=BalrogReference(env="nle", package="nle", check_task="NetHackChallenge-v0"),
        suites={"balrog": SuiteEntry(position=5, default_tasks=("NetHackChallenge-v0",),
                                     episodes_per_task=5)},
        extra="nethack", image="nethack", options_help="e.g. text_mode: language",
        id_prefixes=("NetHack",),
    ),
]
