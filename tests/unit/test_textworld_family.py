"""The textworld family in-process: tasks, options, oracle wins, progression, text, threads.

Games come from the cheap test variants of the recipes (``recipes.small_recipe``), generated
once per test session into a shared temporary cache.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from env_server.families import load_family
from env_server.families.textworld import games, recipes
from env_server.families.textworld.game import BLOCKED_NOTICE, TextWorldGame
from env_server.game import (
    Family,
    GameOptionError,
    GameOptions,
    PlayerSpec,
    StepResult,
    TaskNotFoundError,
)

#: slow: the family plays games it builds first (seconds per pytest worker)
pytestmark = [pytest.mark.filterwarnings("ignore:Game .* is not fully supported"),
              pytest.mark.slow]

METRIC_KEYS = {"progression", "score", "max_score", "won", "lost", "steps", "episode_return",
               "game_index", "game_file", "generation_seed", "keep_objective"}


@pytest.fixture
def family(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Family:
    """The family, playing small games from the session's shared cache."""
    for name in games.GAME_FAMILIES:
        monkeypatch.setitem(recipes.RECIPES, name, recipes.small_recipe(name))
    monkeypatch.delenv(games.GAMES_ENV, raising=False)
    monkeypatch.setenv("MORIA_CACHE_DIR",
                       str(tmp_path_factory.getbasetemp() / "textworld-small-games"))
    return load_family("textworld")


def _open(family: Family, task: str, seed: int = 0, **kw: object) -> TextWorldGame:
    game = family.open(task, GameOptions(seed=seed, **kw))  # type: ignore[arg-type]
    assert isinstance(game, TextWorldGame)
    return game


def _play_oracle(game: TextWorldGame) -> tuple[list[str], list[StepResult]]:
    """Follow the expert to the end; returns the texts (reset first) and the step results."""
    view = game.reset()["agent_0"]
    texts, results = [view.long_term_context], []
    while True:
        result = game.step({"agent_0": view.info["expert_action"]})
        view = result.transitions["agent_0"].view
        texts.append(view.long_term_context)
        results.append(result)
        if result.done:
            return texts, results
        assert result.metrics["progression"] == 0.0  # only set when the game ends


def test_lists_the_three_balrog_tasks() -> None:
    family = load_family("textworld")
    tasks = family.list_tasks()
    assert [t.task for t in tasks] == ["treasure_hunter", "the_cooking_game", "coin_collector"]
    assert all(t.max_steps == 80 and t.default_action == "help" for t in tasks)
    assert family.name == "textworld" and family.packages == ("textworld",)
    assert family.isolation == "process" and "textworld" in family.preload


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"kwargs": {"keep_objective": "yes"}}, "keep_objective"),
    ({"kwargs": {"level": 3}}, "unknown key 'level'"),
    ({"max_steps": 0}, "max_steps"),
    ({"players": [PlayerSpec("agent_0"), PlayerSpec("agent_1")]}, "single-agent"),
    ({"players": [PlayerSpec("bob")]}, "agent_0"),
])
def test_bad_options_are_rejected_before_any_build(
    family: Family, kwargs: dict, message: str
) -> None:
    with pytest.raises(GameOptionError, match=message):
        family.open("coin_collector", GameOptions(seed=0, **kwargs))


def test_unknown_task_lists_the_valid_ones(family: Family) -> None:
    with pytest.raises(TaskNotFoundError) as err:
        family.open("zork", GameOptions(seed=0))
    assert err.value.valid == ["treasure_hunter", "the_cooking_game", "coin_collector"]


def test_oracle_wins_coin_collector(family: Family) -> None:
    game = _open(family, "coin_collector", seed=50, oracle=True)  # 50 mod 25 = game 0
    assert game.actions("agent_0") == [] and game.default_action("agent_0") == "help"
    assert "at most 80 commands" in game.instruction("agent_0")
    texts, results = _play_oracle(game)
    assert texts[0].startswith("-= ")  # banner and objective removed: the first room
    last = results[-1]
    assert last.transitions["agent_0"].terminated and not last.transitions["agent_0"].truncated
    assert last.next_agents == []
    metrics = last.metrics
    assert set(metrics) == METRIC_KEYS
    assert metrics["progression"] == 1.0 and metrics["won"] and not metrics["lost"]
    assert metrics["score"] == metrics["max_score"] == 1 and metrics["episode_return"] == 1.0
    assert metrics["steps"] == len(results) == 5
    assert metrics["game_index"] == 0 and metrics["game_file"] == "coin_collector-00.z8"
    assert metrics["generation_seed"] == 0 and metrics["keep_objective"] is False
    with pytest.raises(RuntimeError):
        game.step({"agent_0": "look"})
    game.close()
    game.close()


def test_oracle_wins_the_cooking_game_and_rewards_are_score_changes(family: Family) -> None:
    game = _open(family, "the_cooking_game", seed=0, oracle=True)
    _, results = _play_oracle(game)
    metrics = results[-1].metrics
    rewards = [r.transitions["agent_0"].reward for r in results]
    assert metrics["progression"] == 1.0 and metrics["won"]
    assert metrics["max_score"] > 1 and metrics["score"] == metrics["max_score"]
    assert set(rewards) == {0.0, 1.0}  # one point per completed recipe step, not the total
    assert sum(rewards) == metrics["episode_return"] == metrics["max_score"]
    game.close()


def test_step_limit_ends_with_partial_progression_and_invalid_answers_become_help(
    family: Family,
) -> None:
    game = _open(family, "coin_collector", seed=0, max_steps=3)
    assert game.max_steps == 3 and "at most 3 commands" in game.instruction("agent_0")
    game.reset()
    first = game.step({"agent_0": 7}).transitions["agent_0"]  # an index: not a command
    assert not first.valid and first.applied_action == "help"
    assert "'help'" in first.feedback and first.view.short_term_context == ""
    assert "look" in first.view.long_term_context  # the help text
    # the command goes to the game as submitted, as BALROG sends it
    second = game.step({"agent_0": "  look\n"}).transitions["agent_0"]
    assert second.valid and second.applied_action == "  look\n"
    assert "Cellar" in second.view.long_term_context
    assert second.view.short_term_context == ""
    last = game.step({"agent_0": "xyzzy"})
    assert last.done and last.transitions["agent_0"].truncated
    assert last.transitions["agent_0"].view.long_term_context == "That's not a verb I recognise."
    assert last.metrics["progression"] == 0.0 and last.metrics["steps"] == 3
    game.close()


def test_objective_is_hidden_unless_kept(family: Family) -> None:
    hidden = _open(family, "coin_collector", seed=0)
    start = hidden.reset()["agent_0"].long_term_context
    assert "objective" not in start and "$$" not in start
    assert hidden.step({"agent_0": "goal"}).transitions["agent_0"].view.long_term_context == ""

    kept = _open(family, "coin_collector", seed=0, kwargs={"keep_objective": True})
    start_kept = kept.reset()["agent_0"].long_term_context
    objective, _, rest = start_kept.partition("\n\n")
    assert "coin" in objective and rest == start
    goal = kept.step({"agent_0": "goal"}).transitions["agent_0"].view.long_term_context
    assert goal == objective
    assert kept.metrics()["keep_objective"] is True
    assert "goal" in kept.instruction("agent_0") and "- goal" not in hidden.instruction("agent_0")
    hidden.close()
    kept.close()


def test_file_commands_are_not_sent_to_the_interpreter(
    family: Family, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    game = _open(family, "coin_collector", seed=0)
    game.reset()
    for command in ("save", "Script on", "look. restore", "transcript"):
        result = game.step({"agent_0": command})
        assert result.transitions["agent_0"].view.long_term_context == BLOCKED_NOTICE
        assert result.transitions["agent_0"].valid
    assert game.metrics()["steps"] == 4
    assert list(tmp_path.iterdir()) == []
    game.close()


def test_render_draws_the_text_and_agents_get_no_image(family: Family) -> None:
    game = _open(family, "coin_collector", seed=0, render_image=True)
    view = game.reset()["agent_0"]
    assert view.image is None
    frame = game.render()
    assert frame.shape == (480, 640, 3) and frame.dtype == np.uint8
    assert frame.min() < 100 < frame.max()  # dark text on a light background
    game.close()


def test_games_in_threads_play_as_when_alone(family: Family) -> None:
    # Thread mode (a server may be told to run the family in-process): loading is serialised
    # by games.PARSE_LOCK, stepping runs concurrently.
    jobs = [("coin_collector", 0), ("the_cooking_game", 0)]

    def play(task: str, seed: int) -> list[str]:
        game = _open(family, task, seed=seed, oracle=True)
        texts, _ = _play_oracle(game)
        game.close()
        return texts

    alone = {job: play(*job) for job in jobs}
    together: dict[tuple[str, int], list[str]] = {}
    threads = [threading.Thread(target=lambda j=job: together.__setitem__(j, play(*j)))
               for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert together == alone
