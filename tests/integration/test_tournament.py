"""Round-robin tournaments through the real orchestrator: real Env and Policy servers on
loopback (or the CLI's own local stack), the real PettingZoo games, results read back from the
episode files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from orchestrator.apps import cli
from orchestrator.apps.tournament import (
    TournamentResult,
    TournamentSpecError,
    load_tournament,
    render_markdown,
    run_tournament,
)
from orchestrator.core.runner import PreflightError
from tests.support.servers import env_server, policy_server

ROOT = Path(__file__).resolve().parents[2]

#: Three non-LLM players: random and dummy are the same strategy (each seat draws from its own
#: seeded stream); the third is random with other (irrelevant to it) settings.
PLAYERS = {
    "random": {"agent": {"type": "random"}},
    "dummy": {"agent": {"type": "dummy"}},
    "random_h2": {"agent": {"type": "random", "max_text_history": 2}},
}


def _write(tmp_path: Path, **spec: object) -> Path:
    path = tmp_path / "tournament.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


async def _play(path: Path, *overrides: str) -> TournamentResult:
    async with env_server(("pettingzoo",)) as env_srv, policy_server() as pol:
        spec = load_tournament(path, [f"endpoints.env.pettingzoo=[{env_srv.target}]",
                                      f"endpoints.policy=[{pol.target}]", *overrides])
        return await run_tournament(spec, console=Console(quiet=True), show_progress=False)


async def test_round_robin_reports_every_game_once_and_a_rerun_plays_nothing(
        tmp_path: Path) -> None:
    out = tmp_path / "out"
    seeds = 2
    path = _write(tmp_path, env="pettingzoo", task="connect_four_v3", seeds=seeds,
                  players=PLAYERS, eval={"output_dir": str(out), "num_workers": 4, "seed": 7})
    result = await _play(path)
    assert result.ran == 3 * 2 * seeds and result.succeeded and not result.unscored

    assert len(result.standings) == 3
    assert [s.rank for s in result.standings] == [1, 2, 3]
    ordinals = [s.rating.ordinal for s in result.standings]
    assert ordinals == sorted(ordinals, reverse=True)
    for s in result.standings:
        assert s.games == 2 * seeds * 2  # two opponents, both seat orders
        assert s.wins + s.draws + s.losses == s.games
        assert s.win_rate is not None and 0.0 <= s.win_rate <= 1.0
        assert s.win_rate == pytest.approx((s.wins + s.draws / 2) / s.games)
        assert s.ci95 is not None and s.ci95[0] <= s.win_rate <= s.ci95[1]
        assert s.rating.sigma < 25.0 / 3.0

    document = json.loads((out / "tournament.json").read_text())
    games = document["games"]
    assert len(games) == 3 * 2 * seeds
    keys = {(tuple(g["pairing"]), g["seed_index"], g["seats"]["player_0"]) for g in games}
    assert len(keys) == len(games)  # every game exactly once
    assert len({g["episode_file"] for g in games}) == len(games)
    # the same seeds for every pairing and seat order
    for index in range(seeds):
        assert len({g["seed"] for g in games if g["seed_index"] == index}) == 1
    for game in games:
        # outcomes are those of the episode files, mapped from seats to players
        episode = json.loads((out / game["episode_file"]).read_text())
        assert episode["seed"] == game["seed"] and episode["num_steps"] == game["steps"]
        assert {game["seats"][seat]: result for seat, result in
                episode["stats"]["outcome"].items()} == game["outcome"]
        assert sorted(game["outcome"].values()) in (["draw", "draw"], ["loss", "win"])
    # the matrix agrees with the standings, and a pair's rates are complementary
    for s in result.standings:
        row = document["matrix"][s.name]
        assert sum(cell["wins"] for cell in row.values()) == s.wins
        assert sum(cell["games"] for cell in row.values()) == s.games
        for other, cell in row.items():
            back = document["matrix"][other][s.name]
            assert cell["win_rate"] + back["win_rate"] == pytest.approx(1.0)
    assert [row["player"] for row in document["standings"]] == [s.name for s in
                                                                  result.standings]
    markdown = (out / "tournament.md").read_text()
    assert markdown == render_markdown(result)
    assert all(f"| {name} |" in markdown for name in PLAYERS)
    assert (out / "random_vs_dummy" / "pettingzoo").is_dir()
    assert (out / "dummy_vs_random" / "pettingzoo").is_dir()

    before = (out / "tournament.json").read_bytes()
    again = await _play(path)
    assert again.ran == 0
    assert (out / "tournament.json").read_bytes() == before
    assert [(s.name, s.rating) for s in again.standings] == [(s.name, s.rating) for s in
                                                               result.standings]


async def test_tictactoe_uses_its_own_seat_ids(tmp_path: Path) -> None:
    path = _write(tmp_path, task="tictactoe_v3", seeds=1,
                  players={"a": PLAYERS["random"], "b": PLAYERS["dummy"]},
                  eval={"output_dir": str(tmp_path / "out")})
    result = await _play(path)
    assert result.ran == 2 and not result.unscored
    assert {tuple(g.seats) for g in result.games} == {("player_1", "player_2")}
    assert [s.games for s in result.standings] == [2, 2]


async def test_seats_the_game_does_not_have_stop_before_any_game(tmp_path: Path) -> None:
    path = _write(tmp_path, task="connect_four_v3", seeds=1, seats=["white", "black"],
                  players={"a": PLAYERS["random"], "b": PLAYERS["dummy"]},
                  eval={"output_dir": str(tmp_path / "out")})
    with pytest.raises(PreflightError, match="player_0"):
        await _play(path)
    assert not list((tmp_path / "out").rglob("*_run_*.json"))


def test_bad_spec_key_exits_2_naming_the_key(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, task="connect_four_v3", players=PLAYERS, sedes=3)
    assert cli.main(["tournament", str(path)]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'sedes'" in err and "seeds" in err and "players" in err
    # nested keys are named with their path, and the allowed keys of that section listed
    assert cli.main(["tournament", str(path), "seeds=1", "players.random.agent.typo=1"]) == 2
    err = capsys.readouterr().err
    assert "players.random.agent.typo" in err and "max_text_history" in err
    assert "sedes" in err  # the file's own bad key is still reported


@pytest.mark.parametrize(("spec", "expected"), [
    ({"env": "multigrid", "task": "connect_four_v3"}, "supported: pettingzoo"),
    ({"task": "checkers_v3"}, "connect_four_v3"),
    ({"task": "connect_four_v3", "eval": {"num_episodes": {"pettingzoo": 3}}}, "'seeds'"),
    ({"task": "connect_four_v3", "seats": ["player_0"]}, "two different agent ids"),
])
def test_bad_values_are_rejected_with_what_is_allowed(tmp_path: Path, spec: dict[str, object],
                                                       expected: str) -> None:
    path = _write(tmp_path, players=PLAYERS, **spec)
    with pytest.raises(TournamentSpecError, match=expected):
        load_tournament(path)


def test_bad_players_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(TournamentSpecError, match="at least 2 players"):
        load_tournament(_write(tmp_path, task="go_v5", players={"a": PLAYERS["random"]}))
    with pytest.raises(TournamentSpecError, match="no agent section"):
        load_tournament(_write(tmp_path, task="go_v5",
                               players={"a": PLAYERS["random"], "b": {"role": "x"}}))
    with pytest.raises(TournamentSpecError, match="names a folder"):
        load_tournament(_write(tmp_path, task="go_v5",
                               players={"a": PLAYERS["random"], "x/y": PLAYERS["dummy"]}))


def test_cli_plays_every_match_on_one_local_stack(tmp_path: Path) -> None:
    out = tmp_path / "out"
    path = _write(tmp_path, task="connect_four_v3", seeds=1,
                  players={"a": PLAYERS["random"], "b": PLAYERS["dummy"]})
    run = subprocess.run(
        [sys.executable, "-m", "orchestrator.apps.cli", "tournament", str(path), "--no-progress",
         f"eval.output_dir={out}"], cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "COLUMNS": "200"})
    assert run.returncode == 0, run.stderr
    assert "played 2 game(s)" in run.stderr
    assert "95% CI" in run.stdout and "ordinal" in run.stdout
    document = json.loads((out / "tournament.json").read_text())
    assert [s["games"] for s in document["standings"]] == [2, 2]
    # one stack for the tournament: its logs sit at the top, none in the match folders
    assert (out / "logs" / "env_server.log").is_file()
    assert not list(out.glob("*_vs_*/logs"))


async def test_a_stronger_player_ranks_first(tmp_path: Path) -> None:
    # the scripted connect-four bot (it takes wins and blocks threats) against two random players
    path = _write(tmp_path, task="connect_four_v3", seeds=3,
                  players={"random": PLAYERS["random"], "scripted": {"agent": {"type": "scripted"}},
                           "dummy": PLAYERS["dummy"]},
                  eval={"output_dir": str(tmp_path / "out"), "num_workers": 4})
    result = await _play(path)
    assert not result.unscored
    best, *rest = result.standings
    assert best.name == "scripted"
    assert best.rating.mu > max(s.rating.mu for s in rest)
    assert best.win_rate is not None and best.win_rate > max(s.win_rate or 0.0 for s in rest)
    assert result.matrix["scripted"]["random"]["win_rate"] > 0.5
