"""BALROG's evaluation suite, as data: environments, tasks, episode counts, published numbers.

The envs, their tasks and episode counts are the families' own facts (each family folder's
manifest, read here from ``moria/families.json``); this module adds the suite's order and the
leaderboard. Source: BALROG's ``balrog/config/config.yaml`` and its leaderboard (LLM mode, naive
agent, 16-step text history). The default plan is 255 episodes: babyai 5 tasks x 10, crafter
1 x 10, textworld 3 x 10, babaisai 40 x 3, minihack 8 x 5, nle 1 x 5.
"""

from __future__ import annotations

from moria import families

#: The six environments, in BALROG's order (from the families' manifests).
SUITE_ENVS: tuple[str, ...] = families.suite_envs("balrog")

#: Envs whose observation text follows the BALROG checkout under ``agent.protocol=balrog``
#: (their family is given ``<env>_kwargs.balrog_source``).
BALROG_TEXT_ENVS: frozenset[str] = families.balrog_text_envs()

#: Named suites for ``moria eval --suite``: name -> environments.
SUITES: dict[str, tuple[str, ...]] = {"balrog": SUITE_ENVS}

#: Episodes per task of each environment (BALROG's config).
EPISODES_PER_TASK: dict[str, int] = {
    env: families.families()[env].suites["balrog"].episodes_per_task for env in SUITE_ENVS}

#: Envs whose episode seed selects one of n fixed games by ``seed mod n``: env -> n. The
#: orchestrator aligns episode i's seed on game i mod n (``seeds.derive_seed``).
SEED_CYCLES: dict[str, int] = families.seed_cycles()

#: The evaluation tasks of each environment (BALROG's config).
TASKS: dict[str, list[str]] = {
    env: list(families.families()[env].suites["balrog"].default_tasks) for env in SUITE_ENVS}

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
