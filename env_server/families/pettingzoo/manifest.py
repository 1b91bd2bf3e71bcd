"""The pettingzoo family's manifest (``moria.families``): the four classic two-player games."""

from __future__ import annotations

from moria.families import FamilyManifest, SuiteEntry

MANIFESTS = [FamilyManifest(
    name="pettingzoo", entry_point="env_server.families.pettingzoo:PettingZooFamily",
    suites={"mosaic": SuiteEntry(
        position=1, default_tasks=("chess_v6", "connect_four_v3", "go_v5", "tictactoe_v3"),
        episodes_per_task=10)},
    report_kind="two_player", extra="pettingzoo", image="pettingzoo",
    id_prefixes=("chess_", "connect_four_", "go_", "tictactoe_"),
    options_help="board_size and komi for Go, progression_agent",
)]
