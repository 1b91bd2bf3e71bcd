"""The manifests (``moria.families``) of the two families this folder hosts: ``minihack``
(BALROG's eight MiniHack tasks; Boxoban levels are built by ``moria prepare``) and ``nle``
(NetHackChallenge)."""

from __future__ import annotations

from env_server.families.nethack.minihack_tasks import BALROG_TASKS as MINIHACK_BALROG_TASKS
from moria.families import BalrogReference, FamilyManifest, SuiteEntry
from moria.family_options import boolean, choice, integer, server_path

#: ``hybrid``: the ASCII map (BALROG's text-only setting); ``language``: statistics instead of
#: the map (BALROG's setting with images).
TEXT_MODES: tuple[str, ...] = ("hybrid", "language")
#: MiniHack's progression rules: BALROG's (the reference, bit for bit) and the fixed one.
PROGRESSION_RULES: tuple[str, ...] = ("balrog", "fixed")
#: The NetHack Challenge's no-progress abort (env steps without the turn counter advancing).
NO_PROGRESS_TIMEOUT = 150

_TEXT_MODE = choice("hybrid (the ASCII map) or language (statistics instead of the map); "
                    "default language with images, else hybrid", None, TEXT_MODES)

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
        options={
            "text_mode": _TEXT_MODE,
            "progression_rule": choice("which rule fills progression: balrog (the "
                                       "reference's) or fixed", PROGRESSION_RULES[0],
                                       PROGRESSION_RULES),
            "boxoban_levels": server_path("a folder of official Boxoban level files "
                                          "(default: Moria's generated levels)",
                                          "boxoban_levels"),
            "oracle_lookahead": boolean("MazeWalk/Corridor experts explore a private copy "
                                        "of the level first", True),
        },
    ),
    FamilyManifest(
        name="nle", entry_point="env_server.families.nethack:NLEFamily",
        balrog=BalrogReference(env="nle", package="nle", check_task="NetHackChallenge-v0"),
        suites={"balrog": SuiteEntry(position=5, default_tasks=("NetHackChallenge-v0",),
                                     episodes_per_task=5)},
        extra="nethack", image="nethack", options_help="e.g. text_mode: language",
        options={
            "text_mode": _TEXT_MODE,
            "no_progress_timeout": integer("env steps without the turn counter advancing "
                                           "before the episode is truncated",
                                           NO_PROGRESS_TIMEOUT, 1, 100_000),
            "fixed_levels": boolean("also seed NetHack's level-generation RNG", False),
            "image_scale": integer("pixel enlargement of the rendered terminal", 2, 1, 8),
        },
        id_prefixes=("NetHack",),
    ),
]
