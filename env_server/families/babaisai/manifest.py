"""The babaisai family's manifest (``moria.families``): BALROG's 40 BabaIsAI puzzles."""

from __future__ import annotations

from moria.families import BalrogReference, FamilyManifest, SuiteEntry
from moria.family_options import boolean, integer

_ONE_ROOM = ("goto_win", "make_win")
_DISTRACTORS = ("", "-distr_obj", "-distr_rule", "-distr_obj_rule", "-distr_obj-irrelevant_rule")
_TWO_ROOM = ("two_room-goto_win", "two_room-break_stop-goto_win",
             "two_room-maybe_break_stop-goto_win", "two_room-make_win",
             "two_room-break_stop-make_win")
_WIN_RULE_DISTRACTOR = frozenset({"two_room-goto_win", "two_room-make_win"})

#: The 40 puzzles BALROG evaluates, as it names them (``env/<name>``).
BALROG_TASKS: tuple[str, ...] = (
    *(f"env/{base}{d}" for base in _ONE_ROOM for d in _DISTRACTORS),
    *(f"env/{base}{d}" for base in _TWO_ROOM
      for d in (*_DISTRACTORS, *(("-distr_win_rule",) if base in _WIN_RULE_DISTRACTOR else ()))),
    "env/two_room-make_you", "env/two_room-make_you-make_win", "env/two_room-make_wall_win",
)

MANIFESTS = [FamilyManifest(
    name="babaisai", entry_point="env_server.families.babaisai:BabaIsAIFamily",
    balrog=BalrogReference(env="babaisai", package="babaisai", check_task="env/goto_win"),
    suites={"balrog": SuiteEntry(position=3, default_tasks=BALROG_TASKS, episodes_per_task=3)},
    oracle_source="solver", image="babaisai", id_prefixes=("env/",),
    options_help="text_fixes: true, tile_size",
    options={
        "tile_size": integer("pixels per cell of rendered frames", 32, 4, 128),
        "text_fixes": boolean("corrected text observations instead of the reference's text "
                              "(the default, for comparable scores)", False),
    },
)]
