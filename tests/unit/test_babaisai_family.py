"""BabaIsAIFamily / BabaIsAIGame through the Family/Game interface (docs/families/babaisai.md)."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest

from env_server.families import load_family
from env_server.families.babaisai import BabaIsAIFamily
from env_server.families.babaisai.puzzles import generate
from env_server.families.babaisai.text import NO_YOU_NOTICE
from env_server.families.babaisai.things import INFO, KIND_OBJECT
from env_server.game import GameOptionError, GameOptions, PlayerSpec, TaskNotFoundError

A = "agent_0"
# BALROG's 40 tasks, in BALROG's order
BALROG_TASKS = [f"env/{n}" for n in (
    "goto_win", "goto_win-distr_obj", "goto_win-distr_rule", "goto_win-distr_obj_rule",
    "goto_win-distr_obj-irrelevant_rule", "make_win", "make_win-distr_obj",
    "make_win-distr_rule", "make_win-distr_obj_rule", "make_win-distr_obj-irrelevant_rule",
    "two_room-goto_win", "two_room-goto_win-distr_obj", "two_room-goto_win-distr_rule",
    "two_room-goto_win-distr_obj_rule", "two_room-goto_win-distr_obj-irrelevant_rule",
    "two_room-goto_win-distr_win_rule", "two_room-break_stop-goto_win",
    "two_room-break_stop-goto_win-distr_obj", "two_room-break_stop-goto_win-distr_rule",
    "two_room-break_stop-goto_win-distr_obj_rule",
    "two_room-break_stop-goto_win-distr_obj-irrelevant_rule",
    "two_room-maybe_break_stop-goto_win", "two_room-maybe_break_stop-goto_win-distr_obj",
    "two_room-maybe_break_stop-goto_win-distr_rule",
    "two_room-maybe_break_stop-goto_win-distr_obj_rule",
    "two_room-maybe_break_stop-goto_win-distr_obj-irrelevant_rule", "two_room-make_win",
    "two_room-make_win-distr_obj", "two_room-make_win-distr_rule",
    "two_room-make_win-distr_obj_rule", "two_room-make_win-distr_obj-irrelevant_rule",
    "two_room-make_win-distr_win_rule", "two_room-break_stop-make_win",
    "two_room-break_stop-make_win-distr_obj", "two_room-break_stop-make_win-distr_rule",
    "two_room-break_stop-make_win-distr_obj_rule",
    "two_room-break_stop-make_win-distr_obj-irrelevant_rule", "two_room-make_you",
    "two_room-make_you-make_win", "two_room-make_wall_win",
)]
ACTION_NAMES = ["idle", "up", "right", "down", "left"]


@pytest.fixture(scope="module")
def family() -> BabaIsAIFamily:
    return BabaIsAIFamily()


def _open(family, task="env/goto_win", **kw):
    return family.open(task, GameOptions(**{"seed": 1, **kw}))


def _walk(game, actions) -> object:
    result = None
    for action in actions:
        result = game.step({A: action})
    return result


# -- tasks --------------------------------------------------------------------------------------


def test_registry_and_task_list(family) -> None:
    assert isinstance(load_family("babaisai"), BabaIsAIFamily)
    tasks = family.list_tasks()
    assert [t.task for t in tasks] == BALROG_TASKS
    assert all(t.family == "babaisai" and t.max_steps == 100 and t.default_action == "idle"
               for t in tasks)
    assert all(t.description for t in tasks)


def test_bare_name_is_an_alias(family) -> None:
    a = family.open("make_win", GameOptions(seed=5)).reset()[A]
    b = family.open("env/make_win", GameOptions(seed=5)).reset()[A]
    assert a.long_term_context == b.long_term_context


def test_unknown_task_lists_the_valid_names(family) -> None:
    for bad in ("env/nope", "goto", "babaisai:env/goto_win", "env/"):
        with pytest.raises(TaskNotFoundError) as info:
            family.open(bad, GameOptions(seed=0))
        assert info.value.valid == BALROG_TASKS


@pytest.mark.parametrize(
    "options",
    [
        GameOptions(seed=0, kwargs={"tile_size": 0}),
        GameOptions(seed=0, kwargs={"tile_size": 500}),
        GameOptions(seed=0, kwargs={"tile_size": "32"}),
        GameOptions(seed=0, kwargs={"text_fixes": "yes"}),
        GameOptions(seed=0, kwargs={"colour": "red"}),
        GameOptions(seed=0, max_steps=0),
        GameOptions(seed=0, max_steps=2.5),
        GameOptions(seed=-1),
        GameOptions(seed=0, players=[PlayerSpec(A), PlayerSpec("agent_1")]),
        GameOptions(seed=0, players=[PlayerSpec("bob")]),
    ],
)
def test_bad_options_name_the_option(family, options) -> None:
    with pytest.raises(GameOptionError) as info:
        family.open("env/goto_win", options)
    first_word = str(info.value).split(":")[0]
    assert first_word in {"options.tile_size", "options.text_fixes", "options", "max_steps",
                          "seed", "players"}


# -- every puzzle -------------------------------------------------------------------------------


@pytest.mark.parametrize("task", BALROG_TASKS)
def test_every_task_opens_renders_and_starts_with_its_rules(family, task) -> None:
    for seed in (0, 1, 2):
        game = family.open(task, GameOptions(seed=seed, render_image=True,
                                             kwargs={"tile_size": 8}))
        view = game.reset()[A]
        text = view.long_term_context
        assert text.startswith("Active rules:\n") and "\n\nObjects on the map:\n" in text
        rules = game.metrics()["rules"]
        assert "baba is you" in rules
        assert ("wall is stop" in rules) == (
            "break_stop" in task or "make_you" in task or "make_wall_win" in task)
        assert game.metrics()["target_plan"].endswith("]")
        width = 8 if "two_room" not in task else 13
        height = 8 if "two_room" not in task else 9
        assert view.image.shape == (height * 8, width * 8, 3) and view.image.dtype == np.uint8
        assert game.render().shape == view.image.shape
        board = generate(task.split("/")[1], seed).board
        nouns = [INFO[c].noun for _, _, c in board.tops() if INFO[c].kind == KIND_OBJECT]
        assert nouns.count("baba") == 1


def test_layouts_follow_the_seed(family) -> None:
    texts = {seed: _open(family, "env/two_room-make_win-distr_obj_rule", seed=seed)
             .reset()[A].long_term_context for seed in range(6)}
    again = _open(family, "env/two_room-make_win-distr_obj_rule", seed=3).reset()[A]
    assert again.long_term_context == texts[3]
    assert len(set(texts.values())) > 3


def test_same_seed_same_episode(family) -> None:
    runs = []
    for _ in range(2):
        game = _open(family, "env/two_room-break_stop-make_win", seed=11)
        views = [game.reset()[A].long_term_context]
        for action in ["up", "left", "left", "down", "right", "idle", "up"] * 3:
            views.append(game.step({A: action}).transitions[A].view.long_term_context)
        runs.append((views, game.metrics()))
    assert runs[0] == runs[1]


# -- episode mechanics --------------------------------------------------------------------------


def test_actions_instruction_and_defaults(family) -> None:
    game = _open(family)
    assert game.agents == [A]
    assert [a.name for a in game.actions(A)] == ACTION_NAMES
    assert game.default_action(A) == "idle"
    assert game.max_steps == 100
    text = game.instruction(A)
    for word in ("Baba Is You", "BABA IS YOU", "WIN", "STOP", "idle", "left", "100 steps"):
        assert word in text
    with pytest.raises(KeyError):
        game.instruction("agent_1")


def test_idle_uses_a_step_and_invalid_actions_become_idle_with_feedback(family) -> None:
    game = _open(family)
    start = game.reset()[A].long_term_context
    result = game.step({A: "jump"})
    tr = result.transitions[A]
    assert not tr.valid and tr.applied_action == "idle"
    assert "idle" in tr.feedback
    assert tr.view.short_term_context == ""  # the feedback travels only in the transition
    assert tr.view.long_term_context == start
    assert result.metrics["steps"] == 1 and not result.done
    assert game.step({A: 0}).transitions[A].view.short_term_context == ""  # index = idle


def test_step_limit_truncates_with_zero_progression(family) -> None:
    game = _open(family, max_steps=3)
    game.reset()
    assert game.max_steps == 3
    result = _walk(game, ["idle"] * 3)
    tr = result.transitions[A]
    assert result.done and tr.truncated and not tr.terminated and tr.reward == 0.0
    assert result.metrics["progression"] == 0.0 and result.metrics["end_reason"] == "step_limit"
    with pytest.raises(RuntimeError):
        game.step({A: "idle"})


def test_a_win_pays_one_minus_point_nine_times_steps_over_100(family) -> None:
    game = _open(family, "env/goto_win", seed=0, oracle=True)
    view = game.reset()[A]
    steps = 0
    while True:
        result = game.step({A: view.info["expert_action"]})
        steps += 1
        view = result.transitions[A].view
        if result.done:
            break
    tr = result.transitions[A]
    assert tr.terminated and not tr.truncated
    assert tr.reward == pytest.approx(1 - 0.9 * steps / 100)
    m = result.metrics
    assert m["progression"] == 1.0 and m["won"] and not m["lost"] and m["end_reason"] == "win"
    assert m["episode_return"] == pytest.approx(tr.reward) and m["steps"] == steps
    assert m["text_fixes"] is False and m["target_plan"].startswith("goto[")
    assert "expert_action" not in view.info  # no advice once the episode is over


def _path_to(board, start, goal):
    """Moves through empty cells from ``start`` to ``goal`` (breadth-first)."""
    moves = {"up": (0, -1), "right": (1, 0), "down": (0, 1), "left": (-1, 0)}
    seen = {start: []}
    todo = deque([start])
    while todo:
        pos = todo.popleft()
        if pos == goal:
            return seen[pos]
        for name, (dx, dy) in moves.items():
            nxt = (pos[0] + dx, pos[1] + dy)
            if nxt not in seen and board.is_empty(*nxt):
                seen[nxt] = [*seen[pos], name]
                todo.append(nxt)
    raise AssertionError("no path")


def test_breaking_the_only_you_rule_ends_the_episode_as_lost(family) -> None:
    # two_room-make_you: BABA IS YOU at (1,6)-(3,6) can be broken by pushing BABA down
    board = generate("two_room-make_you", 0).board
    baba = next((x, y) for x, y, c in board.tops() if INFO[c].noun == "baba"
                and INFO[c].kind == KIND_OBJECT)
    route = _path_to(board, baba, (1, 5))
    game = _open(family, "env/two_room-make_you", seed=0)
    game.reset()
    _walk(game, route)
    result = game.step({A: "down"})
    tr = result.transitions[A]
    assert result.done and tr.terminated and tr.reward == -1.0
    assert result.metrics["lost"] and not result.metrics["won"]
    assert result.metrics["end_reason"] == "no_you" and result.metrics["progression"] == 0.0
    assert "baba is you" not in result.metrics["rules"]
    assert tr.view.long_term_context.startswith(NO_YOU_NOTICE)


def test_text_fixes_option_changes_the_text_and_is_recorded(family) -> None:
    plain = _open(family, "env/two_room-goto_win", seed=2)
    fixed = _open(family, "env/two_room-goto_win", seed=2, kwargs={"text_fixes": True})
    a, b = plain.reset()[A].long_term_context, fixed.reset()[A].long_term_context
    assert a != b and "steps up" in b and "steps up" not in a
    assert fixed.metrics()["text_fixes"] is True and plain.metrics()["text_fixes"] is False


def test_image_only_when_asked_and_tile_size(family) -> None:
    assert _open(family).reset()[A].image is None
    game = _open(family, render_image=True, kwargs={"tile_size": 16})
    image = game.reset()[A].image
    assert image.shape == (128, 128, 3) and image.std() > 0
    assert game.render().shape == (128, 128, 3)
    assert _open(family).render().shape == (256, 256, 3)  # default 32 px, before any reset


def test_wrong_agent_and_step_before_reset(family) -> None:
    game = _open(family)
    with pytest.raises(RuntimeError):
        game.step({A: "up"})
    game.reset()
    with pytest.raises(ValueError):
        game.step({"agent_1": "up"})
