"""BabyAIFamily / BabyAIGame behaviour through the Family/Game interface."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from env_server.families.babyai import BabyAIFamily
from env_server.game import GameOptionError, GameOptions, PlayerSpec, TaskNotFoundError

MIXED = "BabyAI-MixedTrainLocal-v0"
BALROG_TASKS = [f"{MIXED}/{k}" for k in ("goto", "pickup", "open", "putnext", "pick_up_seq_go_to")]
ACTION_NAMES = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]
A = "agent_0"


@pytest.fixture(scope="module")
def family() -> BabyAIFamily:
    return BabyAIFamily()


def _open(family, task=f"{MIXED}/goto", **kw):
    return family.open(task, GameOptions(**{"seed": 1, **kw}))


# -- tasks ------------------------------------------------------------------------------------


def test_list_tasks_order_and_facts(family) -> None:
    tasks = family.list_tasks()
    names = [t.task for t in tasks]
    assert names[:5] == BALROG_TASKS
    assert names[5] == MIXED
    assert [t.max_steps for t in tasks[:5]] == [64, 64, 128, 128, 128]
    assert all(t.family == "babyai" and t.default_action == "go forward" for t in tasks)
    assert "BabyAI-GoToLocal-v0" in names and "MiniGrid-Empty-5x5-v0" in names
    registered = {k for k in gymnasium.registry if k.startswith(("MiniGrid-", "BabyAI-"))}
    assert set(names[6:]) <= registered
    assert len(names) == len(set(names))


def test_unknown_task_lists_valid_names(family) -> None:
    for bad in ("BabyAI-Nope-v0", f"{MIXED}/dance", "goto"):
        with pytest.raises(TaskNotFoundError) as info:
            family.open(bad, GameOptions(seed=0))
        assert info.value.valid[:6] == [*BALROG_TASKS, MIXED]
        assert "BabyAI-GoToLocal-v0" in info.value.valid


@pytest.mark.parametrize(
    "options",
    [
        GameOptions(seed=0, kwargs={"num_dists": -1}),
        GameOptions(seed=0, kwargs={"num_dists": 2.5}),
        GameOptions(seed=0, kwargs={"num_dists": "3"}),
        GameOptions(seed=0, kwargs={"colour": "red"}),
        GameOptions(seed=0, kwargs={"tile_size": 0}),
        GameOptions(seed=0, max_steps=0),
        GameOptions(seed=0, players=[PlayerSpec("agent_0"), PlayerSpec("agent_1")]),
        GameOptions(seed=0, players=[PlayerSpec("bob")]),
    ],
)
def test_bad_options(family, options) -> None:
    with pytest.raises(GameOptionError):
        family.open(f"{MIXED}/goto", options)


def test_oracle_needs_a_babyai_level(family) -> None:
    with pytest.raises(GameOptionError):
        family.open("MiniGrid-Empty-5x5-v0", GameOptions(seed=0, oracle=True))


# -- episode basics ---------------------------------------------------------------------------


def test_actions_instruction_and_first_view(family) -> None:
    game = _open(family)
    assert game.agents == [A]
    assert [a.name for a in game.actions(A)] == ACTION_NAMES
    assert all(a.description for a in game.actions(A))
    assert game.default_action(A) == "go forward"
    view = game.reset()[A]
    mission = game.metrics()["mission"]
    text = game.instruction(A)
    assert f"goal: {mission}." in text
    positions = [text.index(f"- {name}:") for name in ACTION_NAMES]
    assert positions == sorted(positions)
    assert "in front of you" in text and "destroys" in text and "done" not in text
    assert view.long_term_context and "You see" not in view.long_term_context
    assert view.short_term_context == ""
    assert view.info == {"mission": mission} and view.image is None
    assert game.max_steps == 64


def test_instruction_before_reset_equals_after(family) -> None:
    a, b = _open(family, seed=77), _open(family, seed=77)
    first = a.instruction(A)
    b.reset()
    assert first == b.instruction(A)


def test_same_seed_same_episode_different_seeds_vary(family) -> None:
    for task in [*BALROG_TASKS, MIXED]:
        a, b = _open(family, task), _open(family, task)
        b.reset(seed=12345)
        texts = set()
        for seed in (0, 5, 2**64 - 1, 2**40 + 17):
            va, vb = a.reset(seed=seed)[A], b.reset(seed=seed)[A]
            assert va.long_term_context == vb.long_term_context
            assert a.metrics()["mission"] == b.metrics()["mission"]
            for action in ("turn left", "go forward", "go forward"):
                ra, rb = a.step({A: action}), b.step({A: action})
                view_a, view_b = ra.transitions[A].view, rb.transitions[A].view
                assert view_a.long_term_context == view_b.long_term_context
                assert view_a.short_term_context == view_b.short_term_context
                assert view_a.info == view_b.info
                assert np.array_equal(view_a.tensors["grid"], view_b.tensors["grid"])
                if ra.done:
                    break
        for seed in range(20):
            texts.add((a.reset(seed=seed)[A].long_term_context, a.metrics()["mission"]))
        assert len(texts) >= 8, task


def test_bare_task_draws_kind_from_seed(family) -> None:
    game = _open(family, MIXED)
    kinds = {}
    for seed in range(40):
        game.reset(seed=seed)
        kinds[seed] = game.metrics()["task_kind"]
        assert game.max_steps == (64 if kinds[seed] in ("goto", "pickup") else 128)
    assert set(kinds.values()) == {"goto", "pickup", "open", "putnext", "pick_up_seq_go_to"}
    other = _open(family, MIXED)
    for seed in (3, 9, 21):
        other.reset(seed=seed)
        assert other.metrics()["task_kind"] == kinds[seed]


def test_truncation_step_after_end_and_next_agents(family) -> None:
    game = _open(family)
    game.reset()
    for i in range(64):
        result = game.step({A: "turn left"})  # never reaches the object
        t = result.transitions[A]
        assert t.valid and t.applied_action == "turn left" and t.reward == 0.0
        if i < 63:
            assert not result.done and result.next_agents == [A] and not t.truncated
    assert result.done and t.truncated and not t.terminated and result.next_agents == []
    assert result.metrics["progression"] == 0.0 and result.metrics["steps"] == 64
    with pytest.raises(RuntimeError):
        game.step({A: "turn left"})


def test_step_before_reset_raises(family) -> None:
    with pytest.raises(RuntimeError):
        _open(family).step({A: "go forward"})


def test_step_needs_exactly_agent_0(family) -> None:
    game = _open(family)
    game.reset()
    with pytest.raises(ValueError):
        game.step({"agent_1": "go forward"})


def test_max_steps_override(family) -> None:
    game = _open(family, f"{MIXED}/open", max_steps=5)
    game.reset()
    assert game.max_steps == 5
    for _ in range(5):
        result = game.step({A: "turn right"})
    assert result.done and result.transitions[A].truncated


# -- invalid actions ----------------------------------------------------------------------------


def test_invalid_action_applies_default_with_feedback(family) -> None:
    game = _open(family)
    game.reset()
    t = game.step({A: "Go Forward"}).transitions[A]
    assert not t.valid and t.applied_action == "go forward"
    assert "'go forward'" in t.feedback
    assert t.view.short_term_context == ""  # the feedback travels only in the transition
    t = game.step({A: " turn left "}).transitions[A]  # BALROG's exact rule: spaces count
    assert not t.valid and t.applied_action == "go forward"
    t = game.step({A: "turn left"}).transitions[A]
    assert t.valid and t.feedback == "" and t.view.short_term_context == ""
    t = game.step({A: 1}).transitions[A]
    assert t.valid and t.applied_action == "turn right"
    t = game.step({A: 6}).transitions[A]  # "done" is not exposed
    assert not t.valid and t.applied_action == "go forward"


def test_invalid_action_same_state_as_default(family) -> None:
    a, b = _open(family), _open(family)
    a.reset()
    b.reset()
    va = a.step({A: "fly"}).transitions[A].view
    vb = b.step({A: "go forward"}).transitions[A].view
    assert va.long_term_context == vb.long_term_context


# -- oracle, metrics, reward ------------------------------------------------------------------


def test_oracle_hint_and_reward_formula(family) -> None:
    game = _open(family, f"{MIXED}/putnext", oracle=True, seed=4)
    view = game.reset()[A]
    assert game.metrics()["progression"] == 0.0
    while True:
        assert view.info["expert_action"] in ACTION_NAMES
        result = game.step({A: view.info["expert_action"]})
        view = result.transitions[A].view
        if result.done:
            break
    t, m = result.transitions[A], result.metrics
    assert t.terminated and t.reward > 0
    assert t.reward == pytest.approx(1 - 0.9 * m["steps"] / 128)
    assert m["progression"] == 1.0 and m["success"] is True
    assert m["episode_return"] == pytest.approx(t.reward)
    assert m["task_kind"] == "putnext" and m["mission"].startswith("put ")
    game.reset()
    assert game.metrics()["progression"] == 0.0 and game.metrics()["steps"] == 0


def test_oracle_follows_deviations(family) -> None:
    game = _open(family, f"{MIXED}/pickup", oracle=True, seed=11)
    view = game.reset()[A]
    for action in ("turn left", "turn left", "bogus", "turn right"):
        result = game.step({A: action})
        view = result.transitions[A].view
        assert view.info["expert_action"] in ACTION_NAMES
    for _ in range(60):
        result = game.step({A: view.info["expert_action"]})
        view = result.transitions[A].view
        if result.done:
            break
    assert result.metrics["progression"] == 1.0


def test_no_privileged_info_without_oracle(family) -> None:
    # only the mission, which the instruction states anyway (BALROG's instruction needs it)
    game = _open(family, f"{MIXED}/open")
    mission = game.reset()[A].info["mission"]
    assert game.reset()[A].info == {"mission": mission}
    assert game.step({A: "turn left"}).transitions[A].view.info == {"mission": mission}


# -- images -----------------------------------------------------------------------------------


def test_images(family) -> None:
    game = _open(family, f"{MIXED}/open", render_image=True)
    view = game.reset()[A]
    assert view.image.shape == (224, 224, 3) and view.image.dtype == np.uint8
    step_view = game.step({A: "turn left"}).transitions[A].view
    assert step_view.image.shape == (224, 224, 3)
    frame = game.render()
    assert frame.shape == (8 * 32, 15 * 32, 3) and frame.dtype == np.uint8
    small = _open(family, f"{MIXED}/goto", render_image=True, kwargs={"tile_size": 8})
    assert small.reset()[A].image.shape == (56, 56, 3)
    assert small.render().shape == (64, 64, 3)


# -- registered ids ---------------------------------------------------------------------------


def test_registered_minigrid_env(family) -> None:
    game = family.open("MiniGrid-Empty-5x5-v0", GameOptions(seed=3, kwargs={"num_dists": 0}))
    view = game.reset()[A]
    assert game.max_steps == 4 * 5 * 5
    assert "green goal" in game.instruction(A)
    assert "wall" in view.long_term_context
    assert game.metrics()["task_kind"] == "MiniGrid-Empty-5x5-v0"


def test_registered_babyai_env_with_oracle(family) -> None:
    game = family.open("BabyAI-GoToRedBallNoDists-v0", GameOptions(seed=3, oracle=True))
    view = game.reset()[A]
    assert game.metrics()["mission"] == "go to the red ball"
    for _ in range(64):
        result = game.step({A: view.info["expert_action"]})
        view = result.transitions[A].view
        if result.done:
            break
    assert result.metrics["progression"] == 1.0


def test_registered_kwargs_reach_the_constructor(family) -> None:
    narrow = family.open(
        "MiniGrid-Empty-8x8-v0",
        GameOptions(seed=0, render_image=True, kwargs={"agent_view_size": 3}),
    )
    view = narrow.reset()[A]
    assert view.image.shape == (3 * 32, 3 * 32, 3)
    # A 3x3 view sees at most 2 cells ahead and 1 to each side.
    for line in view.long_term_context.split("\n"):
        assert line.startswith("a wall") or line.startswith("a green goal"), line
        assert "3 steps" not in line
    with pytest.raises(GameOptionError, match="unknown key 'bogus'"):
        family.open("MiniGrid-Empty-5x5-v0", GameOptions(seed=0, kwargs={"bogus": 1}))
    # what no client may give: a render mode (the server's choice), a grid size (some levels'
    # generation never ends on a small one), a constructor's step limit
    for key, value in (("render_mode", "human"), ("size", 1500), ("max_steps", 1e15)):
        with pytest.raises(GameOptionError, match=f"unknown key '{key}'.*allowed: num_dists"):
            family.open("MiniGrid-Empty-5x5-v0", GameOptions(seed=0, kwargs={key: value}))
    # a value the constructor refuses is the client's error, never an internal one
    with pytest.raises(GameOptionError, match="agent_view_size not accepted by "
                                              "MiniGrid-Empty-5x5-v0: AssertionError"):
        family.open("MiniGrid-Empty-5x5-v0", GameOptions(seed=0, kwargs={"agent_view_size": 4}))
    with pytest.raises(GameOptionError, match="only for registered ids"):
        family.open("BabyAI-MixedTrainLocal-v0/goto",
                    GameOptions(seed=0, kwargs={"agent_view_size": 5}))


# -- stdout -----------------------------------------------------------------------------------


def test_generation_keeps_stdout_clean(family, capfd) -> None:
    stock = gymnasium.make("BabyAI-PutNextLocal-v0").unwrapped
    for seed in range(30):
        stock.reset(seed=seed)
    assert "Sampling rejected" in capfd.readouterr().out  # the stock level does print

    game = family.open("BabyAI-PutNextLocal-v0", GameOptions(seed=0))
    for seed in range(30):
        game.reset(seed=seed)
        stock.reset(seed=seed)
        assert game.metrics()["mission"] == stock.mission  # same layouts, only quieter
    capfd.readouterr()
    for task in [*BALROG_TASKS, MIXED]:
        game = family.open(task, GameOptions(seed=0, kwargs={"num_dists": 6}))
        for seed in range(30):
            game.reset(seed=seed)
    game = family.open("BabyAI-PutNextLocal-v0", GameOptions(seed=0))
    for seed in range(30):
        game.reset(seed=seed)
    assert capfd.readouterr().out == ""


def test_close_twice(family) -> None:
    game = _open(family)
    game.reset()
    game.close()
    game.close()
    with pytest.raises(RuntimeError):
        game.reset()
