"""TextWorld game files: paths, seeds, deterministic generation, the build-once lock, errors.

Generation uses the cheap test variants of the recipes (``recipes.small_recipe``); the real
level-30/220 recipes take seconds per game and are measured outside the test suite.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from env_server.families.textworld import games, quest_search, recipes

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.filterwarnings("ignore:Game .* is not fully supported")


@pytest.fixture
def small_recipes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Swap the cheap test recipes in and clear the games-folder override."""
    for family in games.GAME_FAMILIES:
        monkeypatch.setitem(recipes.RECIPES, family, recipes.small_recipe(family))
    monkeypatch.delenv(games.GAMES_ENV, raising=False)


def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's cache folder of small games (the textworld family tests reuse it)."""
    return tmp_path_factory.getbasetemp() / "textworld-small-games"


def test_games_dir_follows_the_cache_and_the_override(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(games.GAMES_ENV, raising=False)
    monkeypatch.setenv("MORIA_CACHE_DIR", str(tmp_path / "cache"))
    assert games.games_dir() == tmp_path / "cache" / "textworld"
    assert games.game_path("coin_collector", 7) == (
        tmp_path / "cache" / "textworld" / "coin_collector" / "coin_collector-07.z8"
    )
    monkeypatch.setenv(games.GAMES_ENV, str(tmp_path / "prebuilt"))
    assert games.games_dir() == tmp_path / "prebuilt"
    assert not games.is_built("coin_collector", 7)


def test_seed_to_index_and_candidate_seeds() -> None:
    assert [games.index_for_seed(s) for s in (0, 1, 24, 25, 27)] == [0, 1, 24, 0, 2]
    assert games.index_for_seed(2**64 - 1) == (2**64 - 1) % 25
    assert recipes.candidate_seed(0, 0) == 0
    assert recipes.candidate_seed(3, 2) == 3002
    with pytest.raises(ValueError):
        recipes.candidate_seed(3, recipes.MAX_ATTEMPTS)


def test_recipes_state_balrog_generator_calls() -> None:
    assert "tw-treasure_hunter --level 30" in games.recipe("treasure_hunter")
    assert "walkthrough is 20 commands" in games.recipe("treasure_hunter")
    assert "tw-coin_collector --level 220" in games.recipe("coin_collector")
    assert "--recipe 5 --take 5 --go 12 --open --cook --cut --split test" in games.recipe(
        "the_cooking_game"
    )
    assert games.GAME_FAMILIES == ("treasure_hunter", "the_cooking_game", "coin_collector")
    assert games.GAMES_PER_FAMILY == 25


@pytest.mark.parametrize(("family", "index"), [("zork", 0), ("coin_collector", 25),
                                               ("coin_collector", -1), ("coin_collector", True)])
def test_bad_family_or_index_is_a_clear_error(family: str, index: int) -> None:
    with pytest.raises(ValueError, match=r"family|index"):
        games.game_path(family, index)


@pytest.mark.slow
def test_same_inputs_give_byte_identical_games(
    small_recipes: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    built = []
    for cache in (shared_cache(tmp_path_factory), tmp_path):
        monkeypatch.setenv("MORIA_CACHE_DIR", str(cache))
        path = games.build_game("coin_collector", 0)
        assert games.is_built("coin_collector", 0)
        assert games.build_game("coin_collector", 0) == path  # idempotent
        built.append(path)
    assert built[0] != built[1]
    for suffix in (".z8", ".json", ".ni", ".meta.json"):
        first, second = (p.with_suffix(suffix).read_bytes() for p in built)
        assert first == second, suffix
    story = built[0].read_bytes()
    assert story[0] == 8 and story[0x12:0x18] == b"000000"  # z8, compile date normalised
    meta = json.loads(built[0].with_suffix(".meta.json").read_text())
    assert meta["generation_seed"] == 0 and meta["attempt"] == 0
    assert meta["recipe"] == recipes.small_recipe("coin_collector").as_dict()
    assert meta["walkthrough_length"] == 5 and meta["max_score"] == 1
    # no scratch folders or temp files are left behind (the shared cache may also hold other
    # games that other tests built)
    for folder in (p.parent for p in built):
        names = [p.name for p in folder.iterdir()]
        assert all(re.fullmatch(r"coin_collector-\d\d(\.z8|\.json|\.ni|\.meta\.json)", n)
                   for n in names), names
        assert {f"coin_collector-00{s}" for s in (".z8", ".json", ".ni", ".meta.json")} <= set(
            names)
    # a game made with another recipe does not count as built
    other = dataclasses.replace(recipes.small_recipe("coin_collector"), settings={"level": 6})
    monkeypatch.setitem(recipes.RECIPES, "coin_collector", other)
    assert not games.is_built("coin_collector", 0)


# A builder process whose generation step is a stand-in (writes placeholder files), so the test
# exercises the lock and the atomic renames, not TextWorld. The first process (argv[1] "first")
# holds the lock, in its generation step, until the second one has found no game and gone for
# the lock (the second's ``file_lock`` touches the marker first): so the second cannot find the
# game built before it checks, and must take it from under the lock.
_BUILDER = """
import pathlib, sys, time
from env_server.families.textworld import games
marker = pathlib.Path(sys.argv[2])
def fake_generate(recipe, index, stem):
    print("BUILDING", flush=True)
    deadline = time.monotonic() + 300
    while not marker.exists():
        if time.monotonic() > deadline:
            sys.exit("the second builder never went for the lock")
        time.sleep(0.05)
    for suffix in (".json", ".ni"):
        stem.with_suffix(suffix).write_text("{}")
    stem.with_suffix(".z8").write_bytes(bytes(64))
    return {"recipe": recipe.as_dict(), "generation_seed": 0, "attempt": 0}
real_lock = games.file_lock
def announced_lock(path):
    marker.touch()
    return real_lock(path)
games._generate = fake_generate
print("BEFORE", games.is_built("coin_collector", 0), flush=True)
if sys.argv[1] == "second":
    games.file_lock = announced_lock
print("PATH", games.build_game("coin_collector", 0), flush=True)
"""


def test_two_processes_build_the_same_game_once(tmp_path: Path) -> None:
    env = {"MORIA_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    marker = tmp_path / "second-went-for-the-lock"
    first = subprocess.Popen([sys.executable, "-c", _BUILDER, "first", str(marker)], cwd=REPO,
                             env=env, stdout=subprocess.PIPE, text=True)
    assert first.stdout is not None
    assert first.stdout.readline().split() == ["BEFORE", "False"]
    assert first.stdout.readline().strip() == "BUILDING"  # the first one now holds the lock
    second = subprocess.run([sys.executable, "-c", _BUILDER, "second", str(marker)], cwd=REPO,
                            env=env, capture_output=True, text=True, timeout=300)
    rest, _ = first.communicate(timeout=300)
    assert first.returncode == 0 and second.returncode == 0, second.stderr
    # the second one found no game, went for the lock, then took the first one's game
    assert second.stdout.splitlines()[0] == "BEFORE False" and marker.exists()
    assert "BUILDING" not in second.stdout
    path = tmp_path / "textworld" / "coin_collector" / "coin_collector-00.z8"
    assert rest.split() == ["PATH", str(path)]
    assert second.stdout.splitlines()[-1] == f"PATH {path}"
    assert path.read_bytes()[0x12:0x18] == b"000000"


def test_unwritable_games_folder_is_a_clear_build_error(
    small_recipes: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(games.GAMES_ENV, str(blocker / "games"))
    with pytest.raises(games.GameBuildError, match=r"treasure_hunter #4"):
        games.build_game("treasure_hunter", 4)


@pytest.mark.slow
def test_incremental_constraint_check_gives_the_stock_game(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import textworld
    from textworld.challenges import CHALLENGES

    def make(level: int) -> dict:
        options = textworld.GameOptions()
        options.seeds = 3
        options.grammar.only_last_action = True
        with quest_search.budget():
            game = CHALLENGES["tw-treasure_hunter"][1](settings={"level": level}, options=options)
        return game.serialize()

    fast = make(15)  # medium mode: 10 rooms, closed doors and containers, a 6-action quest
    monkeypatch.setattr(quest_search, "INCREMENTAL", False)
    assert make(15) == fast


def test_budget_rejects_a_long_quest_search() -> None:
    import textworld
    from textworld.challenges import CHALLENGES

    options = textworld.GameOptions()
    options.seeds = 2
    with pytest.raises(quest_search.BudgetExceeded), quest_search.budget(max_expansions=3):
        CHALLENGES["tw-treasure_hunter"][1](settings={"level": 15}, options=options)
