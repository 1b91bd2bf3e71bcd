"""The nim family in-process: tasks, notation, illegal answers, whole games, the step limit,
options and determinism (docs/families/nim.md)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from env_server.families.nim import NimFamily
from env_server.game import GameOptionError, GameOptions, PlayerSpec, StepResult, TaskNotFoundError

FAMILY = NimFamily()


def _open(task: str = "nim_3-4-5", seed: int = 7, **kwargs: Any) -> Any:
    options = GameOptions(seed=seed, kwargs=dict(kwargs.pop("kwargs", {})), **kwargs)
    return FAMILY.open(task, options)


def _play(game: Any, answers: list[str]) -> StepResult:
    """Each answer from the player to move, in turn; the last step's result."""
    result = None
    acting = game.first_agents()
    for answer in answers:
        (mover,) = acting
        result = game.step({mover: answer})
        acting = result.next_agents
    assert result is not None
    return result


def test_tasks_are_listed_with_two_seats_and_no_default_action() -> None:
    tasks = FAMILY.list_tasks()
    assert [t.task for t in tasks] == ["nim_3-4-5", "nim_1-3-5-7"]
    assert all(t.num_agents == 2 and t.default_action == "" and t.max_steps == 40
               and not t.unavailable for t in tasks)
    with pytest.raises(TaskNotFoundError):
        FAMILY.open("nim_9", GameOptions(seed=0))


def test_moves_are_listed_heap_by_heap_and_read_leniently() -> None:
    game = _open()
    views = game.reset(7)
    names = [a.name for a in game.actions("player_0")]
    assert len(names) == 3 + 4 + 5
    assert names[:4] == ["take 1 from heap 1", "take 2 from heap 1", "take 3 from heap 1",
                         "take 1 from heap 2"]
    assert views["player_0"].legal_actions == names
    assert views["player_1"].legal_actions == []
    assert game.first_agents() == ["player_0"]
    result = game.step({"player_0": "  `Take 2  from HEAP 3.`"})
    assert result.transitions["player_0"].valid
    assert result.next_agents == ["player_1"]
    assert result.transitions["player_1"].view.info["heaps"] == [3, 4, 3]
    assert "Heaps (objects left): 1: ||| (3)  2: |||| (4)  3: ||| (3)" in (
        result.transitions["player_1"].view.long_term_context)


def test_an_illegal_answer_plays_a_seeded_random_legal_move() -> None:
    def replaced(seed: int) -> str:
        game = _open(seed=seed)
        game.reset(seed)
        game.step({"player_0": "take 3 from heap 1"})
        result = game.step({"player_1": "take 1 from heap 1"})  # heap 1 is empty now
        transition = result.transitions["player_1"]
        assert not transition.valid
        assert "random legal move" in transition.feedback
        assert transition.feedback not in transition.view.long_term_context
        assert transition.feedback not in transition.view.short_term_context
        assert game.metrics()["illegal_moves"] == {"player_0": 0, "player_1": 1}
        return str(transition.applied_action)

    assert replaced(7) == replaced(7)
    assert not replaced(7).startswith("take 1 from heap 1")


def test_whoever_takes_the_last_object_wins() -> None:
    game = _open()
    game.reset(7)
    result = _play(game, ["take 3 from heap 1", "take 4 from heap 2", "take 5 from heap 3"])
    assert result.done and result.next_agents == []
    assert result.transitions["player_0"].reward == 1.0
    assert result.transitions["player_1"].reward == -1.0
    metrics = game.metrics()
    assert metrics["outcome"] == {"player_0": "win", "player_1": "loss"}
    assert metrics["winner"] == "player_0" and metrics["progression"] == 1.0
    assert metrics["truncated"] is False
    assert "You won." in result.transitions["player_0"].view.short_term_context


def test_the_step_limit_leaves_the_game_unfinished() -> None:
    game = _open(max_steps=2)
    game.reset(7)
    result = _play(game, ["take 1 from heap 1", "take 1 from heap 1"])
    assert result.done
    metrics = game.metrics()
    assert metrics["truncated"] is True and metrics["winner"] == ""
    assert metrics["outcome"] == {"player_0": "unfinished", "player_1": "unfinished"}
    assert metrics["progression"] == 0.0


def test_progression_agent_and_unknown_options() -> None:
    game = _open(kwargs={"progression_agent": "player_1"})
    game.reset(7)
    _play(game, ["take 3 from heap 1", "take 4 from heap 2", "take 5 from heap 3"])
    assert game.metrics()["progression"] == 0.0  # player_1 lost
    with pytest.raises(GameOptionError, match="progression_agent"):
        _open(kwargs={"colour": "red"})
    with pytest.raises(GameOptionError):
        _open(kwargs={"progression_agent": "player_2"})
    with pytest.raises(GameOptionError, match="oracle"):
        _open(oracle=True)
    with pytest.raises(GameOptionError, match="unknown agent id"):
        _open(players=[PlayerSpec("black")])


def test_same_seed_same_episode_and_tensors_and_frames() -> None:
    def episode(seed: int) -> list[Any]:
        game = _open(seed=seed, render_image=True)
        views = game.reset(seed)
        out: list[Any] = [views["player_0"].tensors["heaps"].tolist()]
        acting = game.first_agents()
        for answer in ["junk", "take 1 from heap 2", "junk", "junk"]:
            result = game.step({acting[0]: answer})
            out.append((result.transitions[acting[0]].applied_action,
                        game.metrics()["heaps"]))
            acting = result.next_agents
        frame = game.render()
        assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[2] == 3
        return out

    assert episode(3) == episode(3)
