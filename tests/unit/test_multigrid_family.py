"""MultigridFamily / MultigridGame: text decoding against hand-built states (the package's own
encoding constants), Theory-of-Mind lines from the real team assignment, instructions per
coordination level and role, tasks and aliases, options, invalid actions, determinism, render.

The first reset in a process compiles mosaic-multigrid's numba kernels (about 11 s with a cold
cache); the module-scoped ``warm`` fixture pays that once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mosaic_multigrid.core.constants import Color, Direction, Type
from mosaic_multigrid.core.world_object import Ball, Wall
from mosaic_multigrid.utils.obs import CARRYING_BALL_OFFSET

from env_server.families.multigrid import MultigridFamily
from env_server.families.multigrid.game import MultigridGame
from env_server.families.multigrid.text import describe_view
from env_server.game import (
    GameOptionError,
    GameOptions,
    PlayerSpec,
    TaskNotFoundError,
)

S2 = "MosaicMultiGrid-S-2v2-IndAgObs-v1"
S31 = "MosaicMultiGrid-S-3v1-IndAgObs-v1"
C3 = "MosaicMultiGrid-C-IndAgObs-v1"
C22 = "MosaicMultiGrid-C-2v2-IndAgObs-v1"
FAMILY = MultigridFamily()
EMPTY = (Type.empty.to_index(), 0, 0)


@pytest.fixture(scope="module", autouse=True)
def warm() -> None:
    """One reset per module: compiles (or loads) the package's numba kernels."""
    FAMILY.open(S2, GameOptions(seed=0)).reset()


def _view(cells: dict[tuple[int, int], tuple[int, int, int]], carried: tuple[int, int, int]
          = EMPTY) -> np.ndarray:
    """A (3, 3, 3) observation: every cell empty except ``cells`` ((i, j) -> encoding); the
    agent's own cell (1, 2) holds what it carries."""
    image = np.zeros((3, 3, 3), dtype=np.int64)
    image[:, :] = EMPTY
    for (i, j), code in cells.items():
        image[i, j] = code
    image[1, 2] = carried
    return image


RED_BALL = (Type.ball.to_index(), Color.red.to_index(), 0)
WALL = tuple(int(v) for v in Wall().encode())


def _agent_code(colour: Color, facing: Direction, carrying: bool) -> tuple[int, int, int]:
    state = int(facing) + (CARRYING_BALL_OFFSET if carrying else 0)
    return Type.agent.to_index(), colour.to_index(), state


# -- text decoding against hand-built arrays ------------------------------------------------


def test_ball_two_steps_north_east_whatever_the_facing() -> None:
    # facing north: one ahead (j=1) and one to the right (i=2) is north-east
    north = describe_view(_view({(2, 1): RED_BALL}), int(Direction.up), "green")
    assert north.lines[0] == "You are facing: NORTH"
    assert "- a red ball: 2 steps to your north-east (1 north, 1 east)" in north.lines
    # facing east: the same map cell is one ahead and one to the LEFT (i=0)
    east = describe_view(_view({(0, 1): RED_BALL}), int(Direction.right), "green")
    assert east.lines[0] == "You are facing: EAST"
    assert "- a red ball: 2 steps to your north-east (1 north, 1 east)" in east.lines
    # and a ball two cells straight ahead while facing west lies 2 steps west
    west = describe_view(_view({(1, 0): RED_BALL}), int(Direction.left), "green")
    assert "- a red ball: 2 steps to your west (straight ahead)" in west.lines


def test_teammate_carrying_the_ball_and_an_opponent() -> None:
    image = _view({(1, 1): _agent_code(Color.green, Direction.left, True),
                   (0, 2): _agent_code(Color.blue, Direction.down, False)})
    text = describe_view(image, int(Direction.up), "green").lines
    assert ("- a green agent (your teammate): 1 step to your north (directly in front of you);"
            " facing WEST; carrying the ball") in text
    assert "- a blue agent (opponent): 1 step to your west; facing SOUTH; carrying nothing" \
        in text
    named = describe_view(image, int(Direction.up), "green", {(0, -1): "agent_1"})
    assert any(line.startswith("- agent_1 (green team, your teammate): 1 step to your north")
               for line in named.lines)
    assert sorted((a.name, a.carrying_ball) for a in named.agents) == [
        ("", False), ("agent_1", True)]


def test_wall_directly_ahead_only_when_ahead() -> None:
    ahead = describe_view(_view({(1, 1): WALL, (0, 1): WALL}), int(Direction.down), "blue")
    assert ahead.lines[-1] == "There is a wall directly in front of you."
    assert "You see: nothing but floor and walls." in ahead.lines
    beside = describe_view(_view({(0, 1): WALL, (0, 2): WALL}), int(Direction.down), "blue")
    assert "There is a wall directly in front of you." not in beside.lines


def test_carrying_and_goal_cells() -> None:
    goal_green = (Type.objgoal.to_index(), Color.green.to_index(), 0)
    goal_blue = (Type.objgoal.to_index(), Color.blue.to_index(), 0)
    image = _view({(0, 0): goal_green, (2, 0): goal_blue}, carried=RED_BALL)
    text = describe_view(image, int(Direction.up), "green").lines
    assert "You are carrying: a red ball" in text
    assert ("- a goal cell of the green team (your own team's goal: defend it): 3 steps to your "
            "north-west (2 north, 1 west)") in text
    assert ("- a goal cell of the blue team (the goal you score in): 3 steps to your north-east"
            " (2 north, 1 east)") in text
    assert describe_view(_view({}), 0, "green").lines[1] == "You are carrying: nothing"


def test_unseen_cells_are_not_told() -> None:
    unseen = (Type.unseen.to_index(), 0, 0)
    text = describe_view(_view({(2, 0): unseen, (0, 0): unseen}), 3, "green").lines
    assert text[-1] == "You see: nothing but floor and walls."


def test_bad_view_shape_raises() -> None:
    with pytest.raises(ValueError):
        describe_view(np.zeros((4, 4, 3), dtype=np.int64), 0, "green")


# -- the same facts through the package's real observation code ------------------------------


def _clear_balls(env: Any) -> None:
    for x in range(env.width):
        for y in range(env.height):
            obj = env.grid.get(x, y)
            if obj is not None and obj.type == Type.ball:
                env.grid.set(x, y, None)


def _place(env: Any, index: int, pos: tuple[int, int], facing: Direction) -> None:
    env.agents[index].state.pos = pos
    env.agents[index].state.dir = int(facing)


def _noop_step(game: MultigridGame) -> dict[str, str]:
    result = game.step({a: "noop" for a in game.agents})
    return {a: t.view.long_term_context for a, t in result.transitions.items()}


def _game(task: str, seed: int = 1, **player_options: dict[str, Any]) -> MultigridGame:
    players = [PlayerSpec(a, options=o) for a, o in player_options.items()]
    game = FAMILY.open(task, GameOptions(seed=seed, players=players))
    assert isinstance(game, MultigridGame)
    game.reset()
    return game


def test_real_env_observation_decodes_ball_teammate_and_wall() -> None:
    game = _game(S2, agent_0={"observation_mode": "visible_teammates"})
    env = game._env
    _clear_balls(env)
    # agent_0 at (7, 5) facing north; a ball 1 north + 1 east; teammate agent_1 2 north with
    # the ball; the opponents far away.
    _place(env, 0, (7, 5), Direction.up)
    env.put_obj(Ball(color=Color.red), 8, 4)
    _place(env, 1, (7, 3), Direction.right)
    env.agents[1].state.carrying = Ball(color=Color.red)
    _place(env, 2, (12, 9), Direction.up)
    _place(env, 3, (12, 1), Direction.up)
    # agent_3 in the top row, facing the wall
    text = _noop_step(game)
    mine = text["agent_0"]
    assert "You are facing: NORTH" in mine
    assert "- a red ball: 2 steps to your north-east (1 north, 1 east)" in mine
    assert ("- agent_1 (green team, your teammate): 2 steps to your north (straight ahead); "
            "facing EAST; carrying the ball") in mine
    assert ("- agent_1 (green): facing EAST; carrying a red ball; position: 2 steps to your "
            "north") in mine
    assert "There is a wall directly in front of you." in text["agent_3"]
    assert "There is a wall directly in front of you." not in mine


def test_visible_teammates_position_only_when_in_view() -> None:
    game = _game(S2, agent_2={"observation_mode": "visible_teammates"})
    env = game._env
    _place(env, 2, (3, 5), Direction.right)
    _place(env, 3, (12, 5), Direction.down)
    text = _noop_step(game)
    assert ("- agent_3 (blue): facing SOUTH; carrying nothing; position: unknown (not in your "
            "view)") in text["agent_2"]
    assert "Teammates:" not in text["agent_3"]  # egocentric by default
    _place(env, 3, (4, 6), Direction.down)
    text = _noop_step(game)
    assert ("- agent_3 (blue): facing SOUTH; carrying nothing; position: 2 steps to your "
            "south-east (1 south, 1 east)") in text["agent_2"]


def test_teams_come_from_the_env_not_from_the_seat_index() -> None:
    game = _game(S31, agent_2={"observation_mode": "visible_teammates"})
    # 3v1: agents 0, 1, 2 are green, agent 3 is blue (index // 2 would pair 2 with 3)
    assert game.teammates("agent_2") == ["agent_0", "agent_1"]
    assert game.teammates("agent_3") == []
    text = _noop_step(game)["agent_2"]
    assert "- agent_0 (green):" in text and "- agent_1 (green):" in text
    assert "agent_3 (blue):" not in text.split("Teammates:")[1]
    collect = _game(C3, agent_0={"observation_mode": "visible_teammates"})
    assert "Teammates: none." in _noop_step(collect)["agent_0"]


# -- instructions ----------------------------------------------------------------------------


def test_instruction_levels_and_roles() -> None:
    game = _game(S2, agent_0={"coordination_level": 1}, agent_1={"coordination_level": 2},
                 agent_2={"coordination_level": 3, "role": "defender"},
                 agent_3={"coordination_level": 3})
    one, two = game.instruction("agent_0"), game.instruction("agent_1")
    assert "You are agent_0. You play for the green team with agent_1." in one
    assert "the blue team (agent_2, agent_3)" in one
    assert "walking into a cell of the opponents' goal" in one
    assert "- pickup: take the ball" in one and "- noop: do nothing this step" in one
    assert "Tips for playing together" not in one and "Your role" not in one
    assert "Do not all chase the ball at once." in two and "Your role" not in two
    three_d, three_f = game.instruction("agent_2"), game.instruction("agent_3")
    assert "Your role: defender." in three_d and "agent_3 is your teammate and plays forward." \
        in three_d
    assert "Your role: forward." in three_f and "agent_2 is your teammate and plays defender." \
        in three_f
    assert "Do not all chase the ball at once." in three_d
    assert "at the west end" in one and "at the east end" in three_d  # green defends west
    used = {a: p["coordination_level_used"] for a, p in game.metrics()["players"].items()}
    assert used == {"agent_0": 1, "agent_1": 2, "agent_2": 3, "agent_3": 3}


def test_role_from_player_spec_and_fallback_without_roles() -> None:
    game = FAMILY.open(S2, GameOptions(seed=1, players=[
        PlayerSpec("agent_0", role="defender", options={"coordination_level": 3}),
        PlayerSpec("agent_1", options={"coordination_level": 3})]))
    assert "Your role: defender." in game.instruction("agent_0")
    assert "agent_0 is your teammate and plays defender." in game.instruction("agent_1")
    # Collect and 1v1 Soccer have no roles: level 3 is level 2
    collect = FAMILY.open(C22, GameOptions(seed=1, kwargs={"coordination_level": 3}))
    text = collect.instruction("agent_0")
    assert "Your role" not in text and "Go for the nearest ball first" in text
    assert "Anticipate opponents" in text
    assert collect.metrics()["players"]["agent_0"]["coordination_level_used"] == 2
    solo = FAMILY.open("MosaicMultiGrid-S-1v1-IndAgObs-v1", GameOptions(
        seed=1, kwargs={"coordination_level": 3}))
    assert "Your role" not in solo.instruction("agent_0")


def test_actions_and_default() -> None:
    game = FAMILY.open(S2, GameOptions(seed=3))
    names = [a.name for a in game.actions("agent_1")]
    assert names == ["noop", "left", "right", "forward", "pickup", "drop", "toggle", "done"]
    assert all(a.description for a in game.actions("agent_1"))
    assert game.default_action("agent_3") == "noop"
    with pytest.raises(KeyError):
        game.actions("agent_9")


# -- tasks and options -----------------------------------------------------------------------


def test_tasks_from_the_registry_and_aliases() -> None:
    tasks = {t.task: t for t in FAMILY.list_tasks()}
    for fmt, n in (("1v1", 2), ("2v2", 4), ("3v3", 6), ("4v4", 8)):
        info = tasks[f"MosaicMultiGrid-S-{fmt}-IndAgObs-v1"]
        assert info.num_agents == n and info.max_steps == 256
        assert info.default_action == "noop"
    assert tasks[C3].num_agents == 3 and tasks[C3].max_steps == 300
    assert tasks[C22].num_agents == 4 and tasks[C22].max_steps == 400
    assert "MosaicMultiGrid-C-1v1-IndAgObs-v1" in tasks
    assert not any("-BB-" in t or "-AF-" in t for t in tasks)
    for alias, canonical in (("MosaicMultiGrid-Soccer-1vs1-IndAgObs-v0",
                              "MosaicMultiGrid-S-1v1-IndAgObs-v1"),
                             ("MosaicMultiGrid-Soccer-2v2-IndAgObs-v1", S2),
                             ("MosaicMultiGrid-Collect-IndAgObs-v0", C3),
                             ("MosaicMultiGrid-Collect-2vs2-IndAgObs-v0", C22)):
        game = FAMILY.open(alias, GameOptions(seed=0))
        assert game.metrics()["game"] in ("soccer", "collect")
        assert len(game.agents) == tasks[canonical].num_agents
    with pytest.raises(TaskNotFoundError) as err:
        FAMILY.open("MosaicMultiGrid-BB-2v2-IndAgObs-v1", GameOptions(seed=0))
    assert S2 in err.value.valid


@pytest.mark.parametrize("options, match", [
    (GameOptions(seed=0, oracle=True), "oracle"),
    (GameOptions(seed=0, players=[PlayerSpec("agent_7")]), "agent_7"),
    (GameOptions(seed=0, players=[PlayerSpec("agent_0"), PlayerSpec("agent_0")]), "twice"),
    (GameOptions(seed=0, players=[PlayerSpec("agent_0", options={"coordination_level": 4})]),
     "coordination_level"),
    (GameOptions(seed=0, players=[PlayerSpec("agent_0", options={"observation_mode": "god"})]),
     "observation_mode"),
    (GameOptions(seed=0, players=[PlayerSpec("agent_0", options={"role": "keeper"})]), "role"),
    (GameOptions(seed=0, players=[PlayerSpec("agent_0", role="keeper")]), "role"),
    (GameOptions(seed=0, players=[PlayerSpec("agent_0", options={"colour": "red"})]), "colour"),
    (GameOptions(seed=0, kwargs={"tile_size": 8}), "tile_size"),
    (GameOptions(seed=0, max_steps=0), "max_steps"),
])
def test_bad_options(options: GameOptions, match: str) -> None:
    with pytest.raises(GameOptionError, match=match):
        FAMILY.open(S2, options)


# -- stepping --------------------------------------------------------------------------------


def test_invalid_action_becomes_noop_with_feedback() -> None:
    game = _game(S2)
    result = game.step({"agent_0": "fly", "agent_1": 3, "agent_2": "left", "agent_3": 99})
    bad = result.transitions["agent_0"]
    assert not bad.valid and bad.applied_action == "noop" and "noop" in bad.feedback
    assert bad.view.short_term_context == ""  # the feedback travels only in the transition
    assert result.transitions["agent_1"].applied_action == "forward"
    assert result.transitions["agent_2"].valid
    assert not result.transitions["agent_3"].valid
    assert result.next_agents == game.agents
    with pytest.raises(ValueError):
        game.step({"agent_0": "noop"})


def test_same_seed_same_game_and_tensors() -> None:
    def play(seed: int) -> list[str]:
        game = _game(C22, seed=seed)
        rng = np.random.default_rng(7)
        texts = []
        for _ in range(30):
            result = game.step({a: int(rng.integers(8)) for a in game.agents})
            texts.append(result.transitions["agent_3"].view.long_term_context)
        view = result.transitions["agent_3"].view
        assert view.tensors["image"].shape == (3, 3, 3)
        assert int(view.tensors["direction"]) in range(4)
        return texts

    assert play(11) == play(11)
    assert play(11) != play(12)


def test_render_and_images_when_asked() -> None:
    game = FAMILY.open(S2, GameOptions(seed=2, render_image=True))
    views = game.reset()
    frame = views["agent_0"].image
    assert frame is not None and frame.shape == (352, 512, 3) and frame.dtype == np.uint8
    assert game.render().shape == (352, 512, 3)
    assert _game(S2).reset()["agent_0"].image is None


def test_goal_steal_and_pass_are_counted() -> None:
    game = _game(S2)
    env = game._env
    _clear_balls(env)
    _place(env, 0, (13, 5), Direction.right)  # green attacks the east goal at x=14
    env.agents[0].state.carrying = Ball(color=Color.red)
    _place(env, 1, (3, 2), Direction.up)
    _place(env, 2, (6, 8), Direction.up)
    _place(env, 3, (8, 2), Direction.up)
    result = game.step({"agent_0": "forward", "agent_1": "noop", "agent_2": "noop",
                        "agent_3": "noop"})
    green = result.metrics["teams"]["green"]
    assert green["goals_for"] == 1 and result.metrics["teams"]["blue"]["goals_against"] == 1
    assert result.metrics["agent_goals"]["agent_0"] == 1
    assert result.transitions["agent_0"].reward > 1.0 > result.transitions["agent_2"].reward
    assert "Score: green 1, blue 0" in result.transitions["agent_3"].view.long_term_context
    assert not result.done and green["outcome"] == "" and result.metrics["progression"] == 0.0

    _clear_balls(env)
    _place(env, 0, (5, 8), Direction.right)  # facing agent_2, who carries the ball
    env.agents[2].state.carrying = Ball(color=Color.red)
    result = game.step({"agent_0": "pickup", "agent_1": "noop", "agent_2": "noop",
                        "agent_3": "noop"})
    assert result.metrics["teams"]["green"]["steals"] == 1
    assert "You are carrying: a red ball" in result.transitions["agent_0"].view.long_term_context
    result = game.step({"agent_0": "drop", "agent_1": "noop", "agent_2": "noop",
                        "agent_3": "noop"})
    teams = result.metrics["teams"]
    assert teams["green"]["passes"] == 1 and teams["blue"]["passes"] == 0
    assert env.agents[1].state.carrying is not None  # the pass reached the only teammate
    assert teams["green"]["possession_steps"] == 2 and teams["green"]["possession_share"] == 1.0


def test_step_limit_and_outcome_on_a_short_game() -> None:
    game = FAMILY.open(C22, GameOptions(seed=4, max_steps=5))
    game.reset()
    assert game.max_steps == 5
    for _ in range(5):
        result = game.step({a: "noop" for a in game.agents})
    assert result.done and result.next_agents == []
    metrics = result.metrics
    assert metrics["end_reason"] == "step_limit"
    assert all(t.truncated and not t.terminated for t in result.transitions.values())
    assert {t["outcome"] for t in metrics["teams"].values()} == {"draw"}
    assert metrics["progression"] == 0.5 and metrics["winner"] == ""
    with pytest.raises(RuntimeError):
        game.step({a: "noop" for a in game.agents})
