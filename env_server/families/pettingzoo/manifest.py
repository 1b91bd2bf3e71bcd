"""The pettingzoo family's manifest (``moria.families``): the four classic two-player games."""

from __future__ import annotations

from moria.families import FamilyManifest, SuiteEntry
from moria.family_options import integer, number, text

MANIFESTS = [FamilyManifest(
    name="pettingzoo", entry_point="env_server.families.pettingzoo:PettingZooFamily",
    suites={"mosaic": SuiteEntry(
        position=1, default_tasks=("chess_v6", "connect_four_v3", "go_v5", "tictactoe_v3"),
        episodes_per_task=10)},
    report_kind="two_player", extra="pettingzoo", image="pettingzoo",
    id_prefixes=("chess_", "connect_four_", "go_", "tictactoe_"),
    options_help="board_size and komi for Go, progression_agent",
    options={
        "board_size": integer("the Go board's side, odd (5..19; default 9)", None, 5, 19,
                              tasks=("go_v5",)),
        "komi": number("points for White, ending in .5 (default 7.5)", None, 0.5, 50.5,
                       tasks=("go_v5",)),
        "progression_agent": text("the seat (agent id) whose result metrics.progression "
                                  "reports (default: the first seat)"),
    },
)]
