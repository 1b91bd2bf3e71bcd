"""BALROG's evaluation suite, as data: environments, tasks, episode counts, published numbers.

Source: ``balrog/config/config.yaml`` and the BALROG leaderboard (LLM mode, naive agent, 16-step
text history). The default plan is 255 episodes:
babyai 5 tasks x 10, crafter 1 x 10, textworld 3 x 10, babaisai 40 x 3, minihack 8 x 5,
nle 1 x 5.
"""

from __future__ import annotations

from env_server.families.nethack.minihack_tasks import BALROG_TASKS as MINIHACK_BALROG_TASKS

#: The six environments, in BALROG's order.
SUITE_ENVS: tuple[str, ...] = ("babyai", "crafter", "textworld", "babaisai", "minihack", "nle")

#: Envs whose observation text differs between BALROG commits: under ``agent.protocol=balrog``
#: their family is given the checkout (``<env>_kwargs.balrog_source``) and writes the text with
#: that checkout's own code.
BALROG_TEXT_ENVS: frozenset[str] = frozenset({"crafter"})

#: Named suites for ``moria eval --suite``: name -> environments.
SUITES: dict[str, tuple[str, ...]] = {"balrog": SUITE_ENVS}

#: Episodes per task of each environment.
EPISODES_PER_TASK: dict[str, int] = {
    "babyai": 10, "crafter": 10, "textworld": 10, "babaisai": 3, "minihack": 5, "nle": 5,
}

#: Envs whose episode seed selects one of n fixed games by ``seed mod n``: env -> n. The
#: orchestrator aligns episode i's seed on game i mod n (``runner.derive_seed``).
SEED_CYCLES: dict[str, int] = {"textworld": 25}

BABYAI_TASKS: list[str] = [
    "BabyAI-MixedTrainLocal-v0/goto",
    "BabyAI-MixedTrainLocal-v0/pickup",
    "BabyAI-MixedTrainLocal-v0/open",
    "BabyAI-MixedTrainLocal-v0/putnext",
    "BabyAI-MixedTrainLocal-v0/pick_up_seq_go_to",
]

CRAFTER_TASKS: list[str] = ["default"]

TEXTWORLD_TASKS: list[str] = ["treasure_hunter", "the_cooking_game", "coin_collector"]

_BABAISAI_ONE_ROOM = ["goto_win", "make_win"]
_DISTRACTORS = ["", "-distr_obj", "-distr_rule", "-distr_obj_rule",
                "-distr_obj-irrelevant_rule"]
_BABAISAI_TWO_ROOM = ["two_room-goto_win", "two_room-break_stop-goto_win",
                      "two_room-maybe_break_stop-goto_win", "two_room-make_win",
                      "two_room-break_stop-make_win"]
_WIN_RULE_DISTRACTOR = {"two_room-goto_win", "two_room-make_win"}

#: The 40 BabaIsAI puzzles, as BALROG names them (``env/<name>``).
BABAISAI_TASKS: list[str] = (
    [f"env/{base}{d}" for base in _BABAISAI_ONE_ROOM for d in _DISTRACTORS]
    + [f"env/{base}{d}" for base in _BABAISAI_TWO_ROOM
       for d in (_DISTRACTORS + (["-distr_win_rule"] if base in _WIN_RULE_DISTRACTOR else []))]
    + ["env/two_room-make_you", "env/two_room-make_you-make_win", "env/two_room-make_wall_win"]
)

#: MiniHack's BALROG set is defined next to the family (its tasks are listed first there).
MINIHACK_TASKS: list[str] = list(MINIHACK_BALROG_TASKS)

NLE_TASKS: list[str] = ["NetHackChallenge-v0"]

#: The evaluation tasks of each environment.
TASKS: dict[str, list[str]] = {
    "babyai": BABYAI_TASKS,
    "crafter": CRAFTER_TASKS,
    "textworld": TEXTWORLD_TASKS,
    "babaisai": BABAISAI_TASKS,
    "minihack": MINIHACK_TASKS,
    "nle": NLE_TASKS,
}

#: Published progression percentages (LLM mode, naive agent, 16-step history) of reference
#: models: model -> env -> percent, plus "average".
PUBLISHED: dict[str, dict[str, float]] = {
    "Grok-4": {"average": 43.6, "babyai": 76.0, "crafter": 57.3, "textworld": 62.9,
               "babaisai": 45.8, "minihack": 17.5, "nle": 1.8},
    "Gemini-2.5-Pro": {"average": 43.4, "babyai": 80.0, "crafter": 55.0, "textworld": 49.2,
                       "babaisai": 56.7, "minihack": 17.5, "nle": 1.7},
    "Claude-3.5-Sonnet": {"average": 32.6, "babyai": 68.0, "crafter": 32.7, "textworld": 42.1,
                          "babaisai": 37.5, "minihack": 15.0, "nle": 0.6},
    "GPT-4o": {"average": 32.3, "babyai": 77.6, "crafter": 33.1, "textworld": 39.3,
               "babaisai": 33.7, "minihack": 10.0, "nle": 0.4},
    "Llama-3.1-70B": {"average": 27.9, "babyai": 73.2, "crafter": 31.2, "textworld": 15.0,
                      "babaisai": 40.0, "minihack": 7.5, "nle": 0.4},
}


def plan_size() -> int:
    """Episodes in the default plan (255)."""
    return sum(len(TASKS[env]) * EPISODES_PER_TASK[env] for env in SUITE_ENVS)
