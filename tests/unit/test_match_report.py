"""Per-team and per-seat rows of multi-agent games, from hand-built episode records."""

from __future__ import annotations

from rich.console import Console

from moria.records import EpisodeRecord
from orchestrator.report.match_report import match_summary, render_match_tables


def _soccer(index: int, green_goals: int, blue_goals: int, end: str = "terminated",
            ) -> EpisodeRecord:
    outcome = ("win", "loss") if green_goals > blue_goals else (
        ("loss", "win") if blue_goals > green_goals else ("draw", "draw"))
    teams = {
        "green": {"agents": ["agent_0", "agent_1"], "goals_for": green_goals,
                  "goals_against": blue_goals, "outcome": outcome[0], "possession_share": 0.6,
                  "passes": 1, "steals": 2},
        "blue": {"agents": ["agent_2", "agent_3"], "goals_for": blue_goals,
                 "goals_against": green_goals, "outcome": outcome[1], "possession_share": 0.4,
                 "passes": 0, "steals": 1},
    }
    players = {"agent_0": {"player": "naive local/qwen"}, "agent_1": {"player": "scripted"},
               "agent_2": {"player": "naive local/qwen"}, "agent_3": {"player": "scripted"}}
    return EpisodeRecord(run_id="r", env="multigrid", task="S-2v2", episode_index=index,
                         seed=index, end_reason=end, stats={"teams": teams}, players=players)


def test_team_rows_sum_outcomes_goals_and_events_per_team() -> None:
    episodes = [_soccer(0, 2, 0), _soccer(1, 1, 1), _soccer(2, 0, 2),
                _soccer(3, 5, 0, end="agent_error")]  # not finished: left out
    rows = {r["side"]: r for r in match_summary(episodes)["multigrid"]}
    green = rows["green"]
    assert (green["episodes"], green["wins"], green["draws"], green["losses"]) == (3, 1, 1, 1)
    assert green["win_rate"] == 0.5
    assert green["goals_for"] == 1.0 and green["goals_against"] == 1.0
    assert green["passes"] == 3 and green["steals"] == 6
    assert abs(green["possession_share"] - 0.6) < 1e-9
    assert green["lineup"] == "agent_0: naive local/qwen, agent_1: scripted"
    assert rows["blue"]["steals"] == 3


def test_seat_rows_count_wins_draws_illegal_moves_and_print() -> None:
    def game(index: int, first: str, illegal: int) -> EpisodeRecord:
        second = {"win": "loss", "loss": "win", "draw": "draw"}[first]
        return EpisodeRecord(
            run_id="r", env="pettingzoo", task="connect_four_v3", episode_index=index,
            seed=index, stats={"outcome": {"player_0": first, "player_1": second},
                               "illegal_moves": {"player_0": illegal, "player_1": 0},
                               "moves": 10 + index},
            players={"player_0": {"player": "scripted"}, "player_1": {"player": "random"}})

    rows = match_summary([game(0, "win", 1), game(1, "win", 0), game(2, "draw", 2)])
    first, second = rows["pettingzoo"]
    assert (first["side"], first["lineup"]) == ("player_0", "scripted")
    assert (first["wins"], first["draws"], first["losses"]) == (2, 1, 0)
    assert abs(first["win_rate"] - 2.5 / 3) < 1e-9
    assert first["illegal_moves"] == 3 and first["mean_moves"] == 11.0
    assert (second["wins"], second["losses"], second["win_rate"]) == (0, 2, 0.5 / 3)
    console = Console(record=True, width=200)
    for table in render_match_tables(rows):
        console.print(table)
    text = console.export_text()
    assert "2/1/0" in text and "scripted" in text and "83%" in text


def test_a_game_the_step_cap_stopped_is_unfinished_not_a_draw() -> None:
    def game(index: int, first: str) -> EpisodeRecord:
        second = {"win": "loss", "unfinished": "unfinished"}[first]
        return EpisodeRecord(
            run_id="r", env="pettingzoo", task="connect_four_v3", episode_index=index,
            seed=index, end_reason="truncated" if first == "unfinished" else "terminated",
            stats={"outcome": {"player_0": first, "player_1": second}, "moves": 6},
            players={"player_0": {"player": "rl"}, "player_1": {"player": "random"}})

    rows = match_summary([game(0, "win"), game(1, "unfinished"), game(2, "unfinished")])
    first, second = rows["pettingzoo"]
    assert (first["wins"], first["draws"], first["losses"], first["unfinished"]) == (1, 0, 0, 2)
    assert first["win_rate"] == 1.0 and second["win_rate"] == 0.0  # over the one that ended
    console = Console(record=True, width=200)
    for table in render_match_tables(rows):
        console.print(table)
    text = console.export_text()
    assert "Unfinished" in text and "1/0/0" in text and "50%" not in text


def test_single_agent_episodes_make_no_match_table() -> None:
    record = EpisodeRecord(run_id="r", env="babyai", task="goto", episode_index=0, seed=0)
    assert match_summary([record]) == {}
