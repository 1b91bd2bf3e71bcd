"""NLEFamily / NLEGame on real nle 1.3.0 through the Family/Game interface."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from env_server.families.nethack import NLEFamily
from env_server.families.nethack.actions import NLE_COMMANDS
from env_server.game import GameOptionError, GameOptions, PlayerSpec, TaskNotFoundError

TASK = "NetHackChallenge-v0"
A = "agent_0"

# The 86 named commands in the reference order.
_SPEC_TEXT = (
    "north, east, south, west, northeast, southeast, southwest, northwest, far north, far east, "
    "far south, far west, far northeast, far southeast, far southwest, far northwest, up, down, "
    "wait, more, adjust, apply, attributes, call, cast, chat, close, dip, drop, droptype, eat, "
    "esc, engrave, enhance, fire, fight, force, inventory, inventtype, invoke, jump, kick, look, "
    "loot, monster, move, movefar, offer, open, pay, pickup, pray, puton, quaff, quiver, read, "
    "remove, ride, rub, rush, rush2, search, seeamulet, seearmor, seegold, seerings, seespells, "
    "seetools, seetrap, seeweapon, shell, sit, swap, takeoff, takeoffall, throw, tip, turnundead, "
    "twoweapon, untrap, versionshort, wear, wield, wipe, zap, space"
)
SPEC_COMMANDS = [name.strip() for name in _SPEC_TEXT.split(",")]
LETTERS = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
DIGITS = list("0123456789")


@pytest.fixture(scope="module")
def family() -> NLEFamily:
    return NLEFamily()


def _open(family, **kw):
    return family.open(TASK, GameOptions(**{"seed": 1, **kw}))


def _act(game, action):
    return game.step({A: action})


# -- tasks and options ------------------------------------------------------------------------


def test_list_tasks(family) -> None:
    (task,) = family.list_tasks()
    assert (task.family, task.task, task.max_steps, task.default_action) == (
        "nle",
        TASK,
        100_000,
        "esc",
    )
    assert family.name == "nle" and family.packages == ("nle",)


def test_unknown_task(family) -> None:
    with pytest.raises(TaskNotFoundError) as info:
        family.open("NetHackScore-v0", GameOptions(seed=0))
    assert info.value.valid == [TASK]


@pytest.mark.parametrize(
    "options",
    [
        GameOptions(seed=0, max_steps=0),
        GameOptions(seed=0, max_steps=2.5),
        GameOptions(seed=0, kwargs={"text_mode": "ascii"}),
        GameOptions(seed=0, kwargs={"no_progress_timeout": 0}),
        GameOptions(seed=0, kwargs={"fixed_levels": "yes"}),
        GameOptions(seed=0, kwargs={"image_scale": 9}),
        GameOptions(seed=0, kwargs={"character": "val"}),
        GameOptions(seed=0, players=[PlayerSpec("agent_0"), PlayerSpec("agent_1")]),
        GameOptions(seed=0, players=[PlayerSpec("bob")]),
    ],
)
def test_bad_options(family, options) -> None:
    with pytest.raises(GameOptionError):
        family.open(TASK, options)


def test_oracle_is_refused_and_names_the_tasks_with_an_expert(family) -> None:
    with pytest.raises(GameOptionError) as info:
        family.open(TASK, GameOptions(seed=0, oracle=True))
    assert "oracle" in str(info.value) and "MiniHack-MazeWalk-9x9-v0" in str(info.value)


# -- actions and instruction --------------------------------------------------------------------


def test_action_list(family) -> None:
    game = _open(family)
    names = [a.name for a in game.actions(A)]
    assert names == SPEC_COMMANDS + LETTERS + DIGITS
    assert len(names) == 148 == len(set(names))
    assert "00" not in names and "99" not in names  # defect fix: never offered
    assert all(a.description for a in game.actions(A))
    assert game.default_action(A) == "esc"
    assert game.agents == [A]
    with pytest.raises(KeyError):
        game.actions("agent_1")


def test_instruction_describes_exactly_the_offered_commands(family) -> None:
    text = _open(family).instruction(A)
    listed = [line[2:].split(":", 1)[0] for line in text.splitlines() if line.startswith("- ")]
    commands = [name for name in listed if name in SPEC_COMMANDS]
    assert commands == SPEC_COMMANDS
    for absent in ("annotate", "overview", "teleport", "travel", "minus", "apos"):
        assert absent not in listed
    assert "a to z and A to Z" in text and "0 to 9" in text
    assert "In what direction?" in text and "--More--" in text
    assert len(NLE_COMMANDS) == 86


# -- episodes -------------------------------------------------------------------------------


def test_first_view_hybrid_text_and_tensors(family) -> None:
    game = _open(family)
    view = game.reset()[A]
    text = view.long_term_context
    assert text.startswith("message:\n")
    for label in ("\n\nlanguage observation:\n", "\n\ncursor:\n", "\n\nmap:\n"):
        assert label in text
    assert "Dlvl:1" in text  # the status lines are part of the map
    assert view.short_term_context.startswith("inventory:\n")
    assert view.image is None
    assert view.tensors["glyphs"].shape == (21, 79) and view.tensors["blstats"].shape == (27,)
    assert view.info == {}
    assert pickle.loads(pickle.dumps(view)).long_term_context == text
    metrics = game.metrics()
    assert metrics["progression"] == 0.0 and metrics["steps"] == 0
    assert metrics["depth"] == 1 and metrics["experience_level"] == 1
    assert metrics["keys_seen"] == ["Xp:1", "Dlvl:1"]
    assert (metrics["dlvl_list"], metrics["xplvl_list"]) == (["Dlvl:1"], ["Xp:1"])


def test_seed_determines_the_episode(family) -> None:
    first = {}
    for seed in (7, 7, 8, 9):
        game = _open(family, seed=seed)
        texts = [game.reset()[A].long_term_context]
        for action in ("north", "west", "search", "far east", "south"):
            texts.append(_act(game, action).transitions[A].view.long_term_context)
        game.close()
        if seed in first:
            assert texts == first[seed]
        first.setdefault(seed, texts)
    assert first[7][0] != first[8][0] != first[9][0]
    # reset(seed) on a used game replays the same start
    game = _open(family, seed=8)
    game.reset()
    _act(game, "east")
    assert game.reset(7)[A].long_term_context == first[7][0]


def test_invalid_action_becomes_esc_with_feedback(family) -> None:
    game = _open(family)
    game.reset()
    result = _act(game, "North")
    tr = result.transitions[A]
    assert (tr.valid, tr.applied_action) == (False, "esc")
    assert "not a valid action" in tr.feedback and "'esc'" in tr.feedback
    # the feedback travels only in the transition, never in the observation text
    assert tr.view.short_term_context.startswith("inventory:")
    assert "valid action" not in tr.view.long_term_context
    assert not _act(game, " north ").transitions[A].valid  # BALROG's exact rule
    assert _act(game, "north").transitions[A].valid
    tr = _act(game, 2).transitions[A]  # an index into the action list
    assert (tr.valid, tr.applied_action) == (True, "south")


def test_more_prompts_are_continued_and_joined(family) -> None:
    game = _open(family, seed=0)
    game.reset()
    calls = []
    step = game._env_step
    game._env_step = lambda index: calls.append(index) or step(index)
    question = _act(game, "pray").transitions[A].view.long_term_context
    assert "Are you sure you want to pray?" in question
    view = _act(game, "y").transitions[A].view
    message = view.long_term_context.split("\n\nlanguage observation:")[0]
    assert len(calls) > 2  # the answer, then the MORE presses
    assert "You begin praying" in message and "--More--" not in message
    assert "\n" in message.removeprefix("message:\n").strip()


def test_step_limit_truncates(family) -> None:
    game = _open(family, max_steps=3)
    game.reset()
    assert game.max_steps == 3
    results = [_act(game, "search") for _ in range(3)]
    assert [r.done for r in results] == [False, False, True]
    last = results[-1]
    assert last.transitions[A].truncated and not last.transitions[A].terminated
    assert last.next_agents == [] and last.metrics["end_reason"] == "ABORTED: step limit"
    with pytest.raises(RuntimeError):
        _act(game, "search")


def test_no_progress_abort_counts_env_steps_without_turns(family) -> None:
    game = _open(family, kwargs={"no_progress_timeout": 10})
    game.reset()
    results = []
    while not results or not results[-1].done:
        results.append(_act(game, "esc"))  # takes no game time
    assert len(results) == 10
    assert results[-1].transitions[A].truncated
    assert results[-1].metrics["end_reason"] == "ABORTED: no progress for 10 steps"
    # a turn-taking action resets the counter
    game.reset()
    for _ in range(9):
        _act(game, "esc")
    assert not _act(game, "search").done
    assert not _act(game, "esc").done


def test_death_keeps_the_last_live_stats_and_reads_the_end_reason(family) -> None:
    game = _open(family, seed=1)
    game.reset()
    rng = np.random.default_rng(1)
    moves = [
        "north",
        "south",
        "east",
        "west",
        "northeast",
        "northwest",
        "southeast",
        "southwest",
        "far east",
        "far west",
        "search",
        "more",
        "y",
        "esc",
    ]
    result = None
    for _ in range(3000):
        result = _act(game, moves[int(rng.integers(len(moves)))])
        if result.done:
            break
    assert result is not None and result.done and result.transitions[A].terminated
    metrics = result.metrics
    assert metrics["end_reason"].startswith("DEATH: ")
    # NetHack zeroes blstats on the death screen; the metrics keep the live values
    assert result.transitions[A].view.tensors["blstats"][12] == 0
    assert metrics["depth"] >= 1 and metrics["turns"] > 0 and metrics["score"] > 0
    assert metrics["episode_return"] == pytest.approx(metrics["score"])


def test_images_and_language_mode(family) -> None:
    game = _open(family, render_image=True)
    view = game.reset()[A]
    assert view.image is not None and view.image.shape == (528, 960, 3)
    assert view.image.dtype == np.uint8 and view.image.any()
    assert np.array_equal(game.render(), view.image)
    # with images BALROG switches to language mode: statistics instead of the map
    assert "\n\nmap:\n" not in view.long_term_context
    assert "statistics:" in view.short_term_context
    assert game.metrics()["text_mode"] == "language"
    hybrid = _open(family, render_image=True, kwargs={"text_mode": "hybrid", "image_scale": 1})
    view = hybrid.reset()[A]
    assert "\n\nmap:\n" in view.long_term_context and view.image.shape == (264, 480, 3)


def test_render_before_reset_and_close_twice(family) -> None:
    game = _open(family)
    frame = game.render()
    assert frame.shape == (528, 960, 3)
    game.close()
    game.close()
    with pytest.raises(RuntimeError):
        game.reset()


def test_fixed_levels_seeds_the_level_generator_too(family) -> None:
    def first(**kwargs):
        return _open(family, seed=5, kwargs=kwargs).reset()[A].long_term_context

    assert first(fixed_levels=True) == first(fixed_levels=True)
    assert first(fixed_levels=True) != first()
