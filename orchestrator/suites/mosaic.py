"""The MOSAIC-style multi-agent environments, as data: default tasks and episodes per task.

These envs have no published leaderboard protocol; the defaults are Moria's (10 episodes per
task), declared in each family's manifest (read from ``moria/families.json``). Seats are
configured with the run spec's ``players`` section (see ``spec.PlayerConfig``).
"""

from __future__ import annotations

from moria import families

#: The multi-agent envs, in the suite's order.
SUITE_ENVS: tuple[str, ...] = families.suite_envs("mosaic")

#: Episodes per task of each multi-agent env.
EPISODES_PER_TASK: dict[str, int] = {
    env: families.families()[env].suites["mosaic"].episodes_per_task for env in SUITE_ENVS}

#: The default tasks of each multi-agent env.
TASKS: dict[str, list[str]] = {
    env: list(families.families()[env].suites["mosaic"].default_tasks) for env in SUITE_ENVS}
