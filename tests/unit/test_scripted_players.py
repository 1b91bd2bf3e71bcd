"""Scripted players (agent.type=scripted) on hand-built positions.

Board positions are played on the real PettingZoo adapters, so the observation planes the bots
read are the env's own (this also checks which plane holds whose pieces); multigrid views come
from a real Soccer game whose state is set by hand."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mosaic_multigrid.core.constants import Color
from mosaic_multigrid.core.world_object import Ball

from agent_server.strategies import create_strategy
from agent_server.strategies.scripted import ScriptedStrategy, bot_class
from agent_server.turn import EpisodeContext, TurnInput
from env_server.families.multigrid.game import MultigridGame, PlayerSetup
from env_server.families.multigrid.tasks import resolve
from env_server.families.pettingzoo.board import BoardGame
from env_server.families.pettingzoo.chess_board import ChessBoard
from env_server.families.pettingzoo.connect_four_board import ConnectFourBoard
from env_server.families.pettingzoo.go_board import GoBoard, point_index
from env_server.families.pettingzoo.tictactoe_board import TicTacToeBoard, cell_index
from env_server.game import GameOptions
from moria.config import AgentConfig, ClientConfig

SOCCER = "MosaicMultiGrid-S-2v2-IndAgObs-v1"
MULTIGRID_ACTIONS = ["noop", "left", "right", "forward", "pickup", "drop", "toggle", "done"]


def _ctx(env: str, task: str, actions: list[str], seed: int = 7,
         agent: str = "player_0") -> EpisodeContext:
    return EpisodeContext(
        instruction="", action_names=actions, default_action="", agent=AgentConfig(
            type="scripted"), client=ClientConfig(), seed=seed, env_name=env, task=task,
        agent_id=agent)


def _strategy(board: BoardGame, seed: int = 7) -> ScriptedStrategy:
    names = [a.name for a in board.static_actions()]
    strategy = create_strategy(_ctx("pettingzoo", board.task, names, seed, board.current), None)
    assert isinstance(strategy, ScriptedStrategy)
    return strategy


def _turn(board: BoardGame, **info: Any) -> TurnInput:
    """What the player to move receives (tensors, mask, legal names) from the real board."""
    obs = board.observe(board.current)
    return TurnInput(step=0, long_term_context="", short_term_context="", image_png=None,
                     legal_actions=[name for _, name in board.legal_moves()],
                     info={**board.info(), **info},
                     tensors={"observation": obs["observation"],
                              "action_mask": obs["action_mask"]},
                     action_mask=[bool(v) for v in obs["action_mask"]])


async def _move(board: BoardGame, seed: int = 7) -> str:
    return (await _strategy(board, seed).act(_turn(board))).action


# -- registry ------------------------------------------------------------------------------

def test_unsupported_env_or_task_is_rejected_naming_the_supported_games() -> None:
    for env, task in (("babyai", "goto"), ("pettingzoo", "rps_v2"),
                      ("multigrid", "MosaicMultiGrid-BB-2v2-v1")):
        with pytest.raises(ValueError) as err:
            create_strategy(_ctx(env, task, ["a"]), None)
        text = str(err.value)
        assert repr(env) in text and repr(task) in text
        assert "pettingzoo/connect_four_v3" in text and "multigrid/soccer" in text


def test_multigrid_tasks_and_aliases_map_to_their_sport() -> None:
    assert bot_class("multigrid", SOCCER).__name__ == "SoccerBot"
    assert bot_class("multigrid", "MosaicMultiGrid-Soccer-1vs1-IndAgObs-v0").__name__ == \
        "SoccerBot"
    assert bot_class("multigrid", "MosaicMultiGrid-C-2v2-IndAgObs-v1").__name__ == "CollectBot"


# -- Connect Four --------------------------------------------------------------------------

def _c4(*columns: int) -> ConnectFourBoard:
    board = ConnectFourBoard()
    board.reset(0)
    for column in columns:  # 1-based column numbers, alternating from player_0
        board.play(column - 1)
    return board


async def test_connect_four_takes_the_win() -> None:
    board = _c4(1, 7, 1, 7, 1, 6)  # player_0 has three in column 1
    assert board.current == "player_0"
    assert await _move(board) == "column 1"


async def test_connect_four_blocks_the_opponents_four() -> None:
    board = _c4(4, 1, 4, 1, 4)  # player_0 threatens column 4; player_1 moves
    assert board.current == "player_1"
    assert await _move(board) == "column 4"


async def test_connect_four_win_beats_block_and_avoids_giving_a_win() -> None:
    board = _c4(1, 7, 1, 7, 1, 7)  # both threaten: player_0 to move wins rather than blocks
    assert await _move(board) == "column 1"
    # Hand-built (0 empty, 1 ours = plane 0, 2 theirs = plane 1): the opponent would win at
    # row 3 of column 2, so playing column 2 (landing on row 4) hands it the win; no one can
    # win at once and every other column is safe.
    grid = np.array([[0] * 7, [0] * 7, [0] * 7,
                     [2, 0, 2, 2, 0, 0, 0],
                     [1, 0, 1, 2, 1, 0, 0],
                     [2, 1, 2, 1, 1, 2, 0]])
    obs = np.stack([grid == 1, grid == 2], axis=2).astype(np.int8)
    names = [f"column {i + 1}" for i in range(7)]
    for seed in range(10):
        strategy = create_strategy(_ctx("pettingzoo", "connect_four_v3", names, seed), None)
        decision = await strategy.act(TurnInput(
            step=0, long_term_context="", short_term_context="", image_png=None,
            legal_actions=names, info={}, tensors={"observation": obs},
            action_mask=[True] * 7))
        assert decision.action != "column 2", decision.reasoning


# -- Tic-Tac-Toe ---------------------------------------------------------------------------

def _ttt(*cells: str) -> TicTacToeBoard:
    board = TicTacToeBoard()
    board.reset(0)
    for cell in cells:
        index = cell_index(cell)
        assert index is not None
        board.play(index)
    return board


async def test_tictactoe_wins_then_blocks_then_takes_the_centre() -> None:
    assert await _move(_ttt("A1", "B1", "A2", "B2")) == "A3"  # X wins (O also threatens B3)
    blocking = _ttt("A1", "B2", "A2")  # O must block A3
    assert blocking.current == "player_2"
    assert await _move(blocking) == "A3"
    assert await _move(_ttt("A1")) == "B2"
    assert await _move(_ttt("B2")) in {"A1", "A3", "C1", "C3"}


# -- Chess ---------------------------------------------------------------------------------

def _chess(fen: str) -> ChessBoard:
    board = ChessBoard()
    board.reset(0)
    board.env.board.set_fen(fen)
    board._cache.clear()
    return board


async def test_chess_mates_in_one_before_capturing() -> None:
    board = _chess("6k1/5ppp/8/8/8/8/8/Rn4K1 w - - 0 1")
    assert "a1b1" in dict(board.legal_moves()).values()  # a capture is on offer
    assert await _move(board) == "a1a8"


async def test_chess_picks_the_best_capture() -> None:
    # the rook (5 - 9/10) beats the knight taken by the pawn (3 - 1/10) or the queen
    assert await _move(_chess("6k1/5ppp/8/3n4/r3P3/8/8/3Q2K1 w - - 0 1")) == "d1a4"
    # same victim: the cheaper attacker takes it
    assert await _move(_chess("6k1/5ppp/8/3n4/4P3/8/8/3Q2K1 w - - 0 1")) == "e4d5"


async def test_chess_answers_for_black_with_a_legal_uci_move() -> None:
    board = ChessBoard()
    board.reset(0)
    board.play(next(i for i, m in board.legal_moves() if m == "e2e4"))
    move = await _move(board)
    assert move in {m for _, m in board.legal_moves()}


# -- Go ------------------------------------------------------------------------------------

def _go(*points: str, size: int = 5) -> GoBoard:
    board = GoBoard(size)
    board.reset(0)
    for point in points:
        index = point_index(point, size)
        assert index is not None
        board.play(index)
    return board


async def test_go_captures_a_stone_in_atari_for_either_colour() -> None:
    # White C3 has Black on B3, C4, D3: Black captures at C2
    board = _go("B3", "C3", "C4", "A1", "D3", "E5")
    assert board.current == "black_0"
    assert await _move(board) == "C2"
    # the same shape with colours swapped: White captures
    board = _go("A5", "B3", "C3", "C4", "A1", "D3", "E1")
    assert board.current == "white_0"
    assert await _move(board) == "C2"


async def test_go_prefers_the_bigger_capture() -> None:
    # White: the chain A4-A5 (last liberty B4) and a lone stone E1 (last liberty E2)
    board = _go("B5", "A5", "A3", "A4", "D1", "E1", "C4", "C3")  # black to move
    move = await _move(board)
    assert move == "B4"  # takes A4+A5 (2) rather than E2 (1)


def _go_turn(own: list[str], theirs: list[str], legal: list[str], size: int = 5) -> TurnInput:
    """A hand-built Go observation on the observer's turn (plane 0 opponent, plane 1 own)."""
    obs = np.zeros((size, size, 17), dtype=bool)
    for plane, points in ((1, own), (0, theirs)):
        for point in points:
            index = point_index(point, size)
            assert index is not None
            obs[index // size, index % size, plane] = True
    mask = [False] * (size * size + 1)
    for point in legal:
        index = point_index(point, size)
        assert index is not None
        mask[index] = True
    return TurnInput(step=0, long_term_context="", short_term_context="", image_png=None,
                     legal_actions=legal, info={}, tensors={"observation": obs},
                     action_mask=mask)


async def test_go_keeps_its_eyes_avoids_self_atari_and_passes_when_nothing_is_left() -> None:
    names = [a.name for a in GoBoard(5).static_actions()]
    strategy = create_strategy(_ctx("pettingzoo", "go_v5", names, agent="black_0"), None)
    columns = "ABCDE"
    everything = [f"{c}{r}" for c in columns for r in range(1, 6)]
    eyes = ["A1", "C3"]
    own = [p for p in everything if p not in eyes]
    turn = _go_turn(own, [], [*eyes, "pass"])
    assert (await strategy.act(turn)).action == "pass"
    # A5 would leave the chain A4-A5 with B5 as its only liberty (self-atari): D2 is chosen
    # whatever the seed
    own = ["A4"]
    theirs = ["B4", "A3"]
    legal = ["A5", "D2", "pass"]
    for seed in range(8):
        strategy = create_strategy(_ctx("pettingzoo", "go_v5", names, seed), None)
        assert (await strategy.act(_go_turn(own, theirs, legal))).action == "D2"


# -- multigrid: the env's view data and the bots -------------------------------------------

def _soccer_state(carrying: bool = False) -> MultigridGame:
    """A real 2v2 Soccer game set by hand: agent_0 (green, scores east) at (5, 5) facing east
    with a ball right in front and agent_2 (blue, carrying a ball) at (7, 6); agent_1 at
    (13, 4) facing east, the blue goal cell (14, 4) in front and the east wall beyond."""
    game = MultigridGame(resolve(SOCCER), GameOptions(seed=0),  # type: ignore[arg-type]
                         {f"agent_{i}": PlayerSetup() for i in range(4)})
    game.reset()
    env = game._env
    for y in range(env.height):
        for x in range(env.width):
            obj = env.grid.get(x, y)
            if obj is not None and obj.type.value == "ball":
                env.grid.set(x, y, None)
    for index, (pos, direction) in {0: ((5, 5), 0), 1: ((13, 4), 0), 2: ((7, 6), 2),
                                    3: ((3, 8), 3)}.items():
        env.agents[index].state.pos = pos
        env.agents[index].state.dir = direction
    env.grid.set(6, 5, Ball(color=Color.red, index=0))
    env.agents[2].state.carrying = Ball(color=Color.red, index=0)
    if carrying:
        env.agents[1].state.carrying = Ball(color=Color.red, index=0)
    return game


def _views(game: MultigridGame) -> dict[str, dict[str, Any]]:
    result = game.step({a: "noop" for a in game.agents})  # noop: the state stays as built
    return {a: t.view.info for a, t in result.transitions.items()}


def test_multigrid_info_holds_the_agents_own_view_as_data() -> None:
    info = _views(_soccer_state())
    assert info["agent_0"]["target_goal_side"] == "east"
    assert info["agent_2"]["target_goal_side"] == "west"
    assert info["agent_0"]["view"] == {
        "facing": "EAST", "carrying": "", "wall_ahead": False, "walls": [],
        "objects": [
            {"kind": "ball", "colour": "red", "team": "", "dx": 1, "dy": 0, "ahead": 1,
             "right": 0, "carrying_ball": False},
            {"kind": "agent", "colour": "blue", "team": "opponent", "dx": 2, "dy": 1,
             "ahead": 2, "right": 1, "carrying_ball": True},
        ]}
    view = info["agent_1"]["view"]
    assert view["facing"] == "EAST" and not view["wall_ahead"]
    assert view["walls"] == [[2, -1], [2, 0], [2, 1]]  # the east wall, two cells ahead
    assert [(o["kind"], o["team"], o["ahead"], o["right"]) for o in view["objects"]] == [
        ("goal", "opponent", 1, 0), ("goal", "opponent", 1, 1)]
    # agent_3 at (3, 8) facing north sees nothing of the others (no privileged positions)
    assert all(o["kind"] != "agent" for o in info["agent_3"]["view"]["objects"])


def _bot(task: str = SOCCER, seed: int = 3) -> ScriptedStrategy:
    strategy = create_strategy(_ctx("multigrid", task, MULTIGRID_ACTIONS, seed, "agent_0"), None)
    assert isinstance(strategy, ScriptedStrategy)
    return strategy


def _mg_turn(info: dict[str, Any]) -> TurnInput:
    return TurnInput(step=0, long_term_context="", short_term_context="", image_png=None,
                     legal_actions=[], info=info)


def _info(objects: list[dict[str, Any]], *, facing: str = "EAST", carrying: str = "",
          walls: list[list[int]] | None = None, side: str = "east") -> dict[str, Any]:
    """A hand-built view as it arrives over the wire (numbers as floats)."""
    full = [{"kind": "ball", "colour": "red", "team": "", "carrying_ball": False, **o}
            for o in objects]
    for o in full:
        o.update(ahead=float(o["ahead"]), right=float(o["right"]), dx=0.0, dy=0.0)
    return {"team": "green", "target_goal_side": side, "view": {
        "facing": facing, "carrying": carrying, "wall_ahead": [1, 0] in (walls or []),
        "objects": full, "walls": [[float(a), float(r)] for a, r in walls or []]}}


async def test_soccer_bot_picks_up_the_ball_in_front_and_scores_by_walking_in() -> None:
    views = _views(_soccer_state(carrying=True))
    assert (await _bot().act(_mg_turn(views["agent_0"]))).action == "pickup"
    # agent_1 carries the ball with the blue goal directly ahead: scoring is walk-in
    assert views["agent_1"]["view"]["carrying"] == "ball"
    assert (await _bot().act(_mg_turn(views["agent_1"]))).action == "forward"


async def test_soccer_bot_turns_toward_a_ball_beside_it_and_steals() -> None:
    assert (await _bot().act(_mg_turn(_info([{"ahead": 0, "right": -1}])))).action == "left"
    assert (await _bot().act(_mg_turn(_info([{"ahead": 0, "right": 1}])))).action == "right"
    assert (await _bot().act(_mg_turn(_info([{"ahead": 2, "right": 1}])))).action == "forward"
    carrier = {"kind": "agent", "colour": "blue", "team": "opponent", "ahead": 1, "right": 0,
               "carrying_ball": True}
    assert (await _bot().act(_mg_turn(_info([carrier])))).action == "pickup"
    mate = {**carrier, "colour": "green", "team": "own"}
    assert (await _bot().act(_mg_turn(_info([mate])))).action != "pickup"


async def test_soccer_bot_carries_the_ball_to_the_target_end_and_along_its_wall() -> None:
    # facing west with the ball, target east: turn round
    turn = _mg_turn(_info([], facing="WEST", carrying="ball"))
    assert (await _bot().act(turn)).action in {"left", "right"}
    # facing east, free ahead: run east
    assert (await _bot().act(_mg_turn(_info([], carrying="ball")))).action == "forward"
    # facing north at the east end (wall on the right, free ahead): walk along the wall
    turn = _mg_turn(_info([], facing="NORTH", carrying="ball", walls=[[0, 1], [1, 1], [2, 1]]))
    assert (await _bot().act(turn)).action == "forward"
    # facing north in mid-field: turn right, toward the east
    turn = _mg_turn(_info([], facing="NORTH", carrying="ball"))
    assert (await _bot().act(turn)).action == "right"
    # west target, facing south: turn right (south -> west)
    turn = _mg_turn(_info([], facing="SOUTH", carrying="ball", side="west"))
    assert (await _bot().act(turn)).action == "right"


async def test_collect_bot_picks_up_and_explores_deterministically() -> None:
    collect = "MosaicMultiGrid-C-2v2-IndAgObs-v1"
    bot = _bot(collect)
    assert (await bot.act(_mg_turn(_info([{"ahead": 1, "right": 0}])))).action == "pickup"
    empty = _mg_turn(_info([], walls=[[1, 0], [2, 0]]))
    assert (await bot.act(empty)).action in {"left", "right"}  # wall ahead: turn
    moves = [[(await b.act(_mg_turn(_info([])))).action for _ in range(30)]
             for b in (_bot(collect, 5), _bot(collect, 5))]
    assert moves[0] == moves[1] and "forward" in moves[0]


async def test_missing_tensors_or_view_fail_with_a_clear_message() -> None:
    board = _c4()
    turn = _turn(board)
    turn.tensors = {}
    with pytest.raises(ValueError, match="observation"):
        await _strategy(board).act(turn)
    with pytest.raises(ValueError, match="view"):
        await _bot().act(_mg_turn({}))
