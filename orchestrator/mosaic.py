"""The MOSAIC-style multi-agent environments, as data: default tasks and episodes per task.

These envs have no published leaderboard protocol; the defaults are Moria's (10 episodes per
task). Seats are configured with the run spec's ``players`` section (see ``spec.PlayerConfig``).
"""

from __future__ import annotations

#: Episodes per task of each multi-agent env.
EPISODES_PER_TASK: dict[str, int] = {"multigrid": 10, "pettingzoo": 10}

#: mosaic-multigrid's team games: Soccer 2v2 and Collect 2v2 (every registered variant and the
#: old seed-doc names are accepted as tasks; ``moria tasks --env multigrid`` lists them).
MULTIGRID_TASKS: list[str] = [
    "MosaicMultiGrid-S-2v2-IndAgObs-v1", "MosaicMultiGrid-C-2v2-IndAgObs-v1",
]

#: The PettingZoo classic games (two players each).
PETTINGZOO_TASKS: list[str] = ["chess_v6", "connect_four_v3", "go_v5", "tictactoe_v3"]
