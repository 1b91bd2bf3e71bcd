"""The pettingzoo family in-process: notation, text boards, illegal moves, full games, options."""

from __future__ import annotations

import random
from typing import Any

import chess
import numpy as np
import pytest

from env_server.families.pettingzoo import PettingZooFamily
from env_server.families.pettingzoo.chess_board import ChessBoard
from env_server.families.pettingzoo.go_board import point_index, point_name
from env_server.families.pettingzoo.tictactoe_board import cell_index, cell_name
from env_server.game import (
    AgentView,
    GameOptionError,
    GameOptions,
    PlayerSpec,
    StepResult,
    TaskNotFoundError,
)

FAMILY = PettingZooFamily()
TASKS = ["chess_v6", "connect_four_v3", "go_v5", "tictactoe_v3"]


def _open(task: str, seed: int = 0, **kwargs: Any) -> Any:
    options = GameOptions(seed=seed, kwargs=dict(kwargs.pop("kwargs", {})), **kwargs)
    return FAMILY.open(task, options)


def _mover(views: dict[str, AgentView]) -> str:
    movers = [a for a, v in views.items() if v.legal_actions]
    assert len(movers) == 1, movers
    return movers[0]


def _play(game: Any, actions: list[str]) -> StepResult:
    """Play ``actions`` in turn order (each by the player to move); the last StepResult."""
    result = None
    mover = game.first_agents()[0]
    for action in actions:
        result = game.step({mover: action})
        if result.next_agents:
            mover = result.next_agents[0]
    assert result is not None
    return result


# -- family -------------------------------------------------------------------------------


def test_tasks_agents_and_first_views() -> None:
    infos = {t.task: t for t in FAMILY.list_tasks()}
    assert sorted(infos) == TASKS
    assert all(t.num_agents == 2 and t.family == "pettingzoo" for t in infos.values())
    seats = {"chess_v6": ["player_0", "player_1"], "connect_four_v3": ["player_0", "player_1"],
             "go_v5": ["black_0", "white_0"], "tictactoe_v3": ["player_1", "player_2"]}
    masks = {"chess_v6": 4672, "connect_four_v3": 7, "go_v5": 82, "tictactoe_v3": 9}
    for task in TASKS:
        game = _open(task)
        assert game.agents == seats[task]
        assert game.first_agents() == [seats[task][0]]
        views = game.reset()
        first, second = seats[task]
        assert _mover(views) == first
        assert views[second].legal_actions == [] and not any(views[second].action_mask)
        mask = views[first].tensors["action_mask"]
        assert mask.dtype == np.uint8 and mask.shape == (masks[task],)
        assert int(mask.sum()) == len(views[first].legal_actions)
        assert views[first].action_mask == [bool(v) for v in mask]
        assert "random legal move" in game.instruction(first)
        assert "it is your turn" in views[first].short_term_context
        assert f"it is {first}'s turn" in views[second].short_term_context
        assert game.metrics()["progression"] == 0.0


def test_bad_tasks_and_options_are_refused() -> None:
    with pytest.raises(TaskNotFoundError):
        _open("hanabi_v5")
    bad: list[tuple[str, dict[str, Any], str]] = [
        ("go_v5", {"board_size": 8}, "board_size"),
        ("go_v5", {"board_size": 21}, "board_size"),
        ("go_v5", {"komi": 7}, "komi"),
        ("go_v5", {"colour": "black"}, "colour"),
        ("chess_v6", {"board_size": 9}, "board_size"),
        ("tictactoe_v3", {"progression_agent": "player_0"}, "progression_agent"),
    ]
    for task, kwargs, word in bad:
        with pytest.raises(GameOptionError, match=word):
            _open(task, kwargs=kwargs)
    with pytest.raises(GameOptionError, match="players"):
        FAMILY.open("go_v5", GameOptions(seed=0, players=[PlayerSpec("player_0")]))
    with pytest.raises(GameOptionError, match="oracle"):
        FAMILY.open("chess_v6", GameOptions(seed=0, oracle=True))
    with pytest.raises(GameOptionError, match="max_steps"):
        FAMILY.open("chess_v6", GameOptions(seed=0, max_steps=0))
    ok = FAMILY.open("go_v5", GameOptions(seed=0, players=[PlayerSpec("white_0"),
                                                            PlayerSpec("black_0")]))
    assert ok.agents == ["black_0", "white_0"]


# -- chess --------------------------------------------------------------------------------


def _chess_legal(fen: str) -> set[str]:
    return {move.uci() for move in chess.Board(fen).legal_moves}


def test_chess_legal_uci_equals_python_chess_along_random_games() -> None:
    for seed in range(3):
        game = _open("chess_v6", seed=seed, max_steps=120)
        views = game.reset()
        rng = random.Random(seed)
        reference = chess.Board()
        checked = 0
        while True:
            mover = _mover(views)
            fen = views[mover].info["fen"]
            assert fen == reference.fen()
            assert set(views[mover].legal_actions) == _chess_legal(fen)
            assert len(views[mover].legal_actions) == len(set(views[mover].legal_actions))
            checked += 1
            move = rng.choice(views[mover].legal_actions)
            result = game.step({mover: move})
            assert result.transitions[mover].valid
            assert result.transitions[mover].applied_action == move
            reference.push_uci(move)  # the env played exactly this move
            views = {a: t.view for a, t in result.transitions.items()}
            assert views[mover].info["fen"] == reference.fen()
            if result.done:
                break
        assert checked >= 20


@pytest.mark.parametrize(("fen", "must"), [
    # White: promotions and under-promotions, with and without capture; castling
    ("r3k2r/1P6/8/8/8/8/6p1/R3K2R w KQkq - 0 1",
     {"b7b8q", "b7b8n", "b7b8r", "b7b8b", "b7a8q", "b7a8n", "e1c1"}),
    # the same for Black (PettingZoo mirrors the action encoding for Black)
    ("r3k2r/1P6/8/8/8/8/6p1/R3K2R b KQkq - 0 1",
     {"g2g1q", "g2g1n", "g2g1r", "g2g1b", "g2h1q", "g2h1b", "e8g8"}),
    # en passant for White, then for Black
    ("4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2", {"e5d6", "e5e6"}),
    ("4k3/4r3/8/8/3Pp3/8/4B3/4K3 b - d3 0 2", {"e4d3", "e7a7"}),
])
def test_chess_special_moves_match_python_chess(fen: str, must: set[str]) -> None:
    board = ChessBoard()
    board.reset(0)
    board.env.board = chess.Board(fen)
    board.env.agent_selection = "player_0" if " w " in fen else "player_1"
    board._cache.clear()
    names = [name for _, name in board.legal_moves()]
    assert set(names) == _chess_legal(fen)
    assert must <= set(names)


def test_chess_san_and_index_answers_and_labels() -> None:
    game = _open("chess_v6")
    views = game.reset()
    assert "g1f3 (Nf3)" in views["player_0"].short_term_context
    assert "\n 8  r n b q k b n r  8\n" in views["player_0"].long_term_context
    assert game.actions("player_0") == []
    result = game.step({"player_0": "Nf3"})
    assert result.transitions["player_0"].valid
    assert result.transitions["player_0"].applied_action == "g1f3"
    assert "Last move: player_0 played g1f3 (Nf3)." in \
        result.transitions["player_1"].view.short_term_context
    mask = result.transitions["player_1"].view.tensors["action_mask"]
    index = int(np.flatnonzero(mask)[0])
    result = game.step({"player_1": index})  # an integer answer is the env's action index
    assert result.transitions["player_1"].valid
    assert result.transitions["player_1"].applied_action in _chess_legal(
        chess.Board().fen()) | _chess_legal(
        "rnbqkbnr/pppppppp/8/8/8/5N2/PPPPPPPP/RNBQKB1R b KQkq - 1 1")


def test_fools_mate_ends_with_a_black_win() -> None:
    game = _open("chess_v6")
    game.reset()
    result = _play(game, ["f2f3", "e7e5", "g2g4", "d8h4"])
    assert result.done and result.next_agents == []
    assert {a: t.reward for a, t in result.transitions.items()} == {
        "player_0": -1.0, "player_1": 1.0}
    metrics = result.metrics
    assert metrics["winner"] == "player_1" and metrics["end"] == "checkmate (0-1)"
    assert metrics["outcome"] == {"player_0": "loss", "player_1": "win"}
    assert metrics["progression"] == 0.0  # progression_agent defaults to player_0
    assert "You won." in result.transitions["player_1"].view.short_term_context
    with pytest.raises(RuntimeError):
        game.step({"player_0": "e2e4"})

    black = _open("chess_v6", kwargs={"progression_agent": "player_1"})
    black.reset()
    assert _play(black, ["f2f3", "e7e5", "g2g4", "d8h4"]).metrics["progression"] == 1.0


# -- connect four -------------------------------------------------------------------------


def test_connect_four_columns_and_a_full_column() -> None:
    game = _open("connect_four_v3", seed=5)
    views = game.reset()
    assert [a.name for a in game.actions("player_0")] == [f"column {i}" for i in range(1, 8)]
    result = game.step({"player_0": "column 1"})
    planes = result.transitions["player_0"].view.tensors["observation"]
    assert planes.shape == (6, 7, 2) and planes[5, 0, 0] == 1 and planes.sum() == 1
    text = result.transitions["player_0"].view.long_term_context
    assert text.splitlines()[-2] == "| X . . . . . . |"
    assert "  1 2 3 4 5 6 7" in text
    # fill column 4 (X O X O X): plain and bare-number answers are both accepted
    result = _play_from(game, "player_1", ["COLUMN 4", "4", " column 4", "col 4", "column 4",
                                           "column 4"])
    view = result.transitions["player_1"].view
    assert all(t.valid for t in result.transitions.values())
    assert "column 4" not in view.legal_actions and len(view.legal_actions) == 6
    assert view.action_mask is not None and view.action_mask[3] is False
    assert view.long_term_context.splitlines()[2] == "| . . . X . . . |"
    result = game.step({"player_1": "column 4"})
    step = result.transitions["player_1"]
    assert not step.valid and step.applied_action != "column 4"
    assert step.applied_action in view.legal_actions
    assert f"'{step.applied_action}' was played for you instead" in step.feedback
    assert step.feedback not in step.view.short_term_context  # only in the transition
    assert result.metrics["illegal_moves"] == {"player_0": 0, "player_1": 1}
    del views


def _play_from(game: Any, mover: str, actions: list[str]) -> StepResult:
    result = None
    for action in actions:
        result = game.step({mover: action})
        mover = result.next_agents[0]
    assert result is not None
    return result


def test_connect_four_cut_by_the_step_cap_is_unfinished_not_a_draw() -> None:
    game = _open("connect_four_v3", max_steps=4)
    game.reset()
    result = _play(game, ["column 1", "column 2", "column 1", "column 2"])
    assert result.done and all(t.truncated and not t.terminated
                               for t in result.transitions.values())
    assert result.metrics["outcome"] == {"player_0": "unfinished", "player_1": "unfinished"}
    assert result.metrics["winner"] == ""
    assert result.metrics["end"] == "step limit of 4 moves reached before the game ended"
    assert result.metrics["progression"] == 0.0 and result.metrics["truncated"] is True
    last = result.transitions["player_0"].view.short_term_context
    assert last.endswith("Nobody won: the game did not finish."), last
    assert result.metrics["returns"] == {"player_0": 0.0, "player_1": 0.0}


# -- tic-tac-toe and go coordinates -------------------------------------------------------


def test_tictactoe_cells_round_trip_and_orientation() -> None:
    assert [cell_name(i) for i in range(9)] == ["A1", "A2", "A3", "B1", "B2", "B3",
                                                 "C1", "C2", "C3"]
    assert all(cell_index(cell_name(i)) == i for i in range(9))
    assert cell_index("b2") == 4 and cell_index("D1") is None and cell_index("A4") is None
    game = _open("tictactoe_v3")
    game.reset()
    result = _play(game, ["B1", "a3"])
    squares = list(game._board.env.board.squares)
    # PettingZoo's cells run column by column: index 3 is the top-middle cell, 2 bottom-left
    assert squares[3] == 1 and squares[2] == 2 and sum(squares) == 3
    rows = result.transitions["player_1"].view.long_term_context.splitlines()[-3:]
    assert rows == ["1  . X .", "2  . . .", "3  O . ."]
    assert [a.name for a in game.actions("player_1")] == [cell_name(i) for i in range(9)]


def test_go_points_round_trip_skip_i_and_board_text() -> None:
    for size in (9, 19):
        names = [point_name(i, size) for i in range(size * size + 1)]
        assert all(point_index(n, size) == i for i, n in enumerate(names))
        assert not any(n.startswith("I") for n in names) and names[-1] == "pass"
    assert point_name(0, 9) == "A9" and point_name(8, 9) == "J9" and point_name(80, 9) == "J1"
    assert point_index("I5", 9) is None and point_index("K1", 9) is None
    assert point_index("A10", 9) is None and point_index("PASS", 9) == 81
    game = _open("go_v5")
    game.reset()
    result = _play(game, ["D4", "pass"])
    text = result.transitions["white_0"].view.long_term_context
    assert " 4  . . . X . . . . .  4" in text.splitlines()
    assert "White passed on the last move" in text
    assert game._board.position.board[9 - 4][3] == 1  # minigo: row 0 is the top, BLACK = 1


def test_go_sizes_in_one_process_do_not_clash() -> None:
    small = _open("go_v5", kwargs={"board_size": 9})
    big = _open("go_v5", kwargs={"board_size": 13, "komi": 6.5})
    small_views, big_views = small.reset(), big.reset()
    assert len(small_views["black_0"].legal_actions) == 82
    assert len(big_views["black_0"].legal_actions) == 170
    assert big.max_steps == 4 * 13 * 13
    for small_move, big_move in [("E5", "G7"), ("C3", "M13"), ("G7", "A1")]:
        mover = small.metrics()["current_player"]
        assert big.metrics()["current_player"] == mover
        small_step = small.step({mover: small_move})
        big_step = big.step({mover: big_move})
        assert small_step.transitions[mover].valid and big_step.transitions[mover].valid
    assert len(small_step.next_agents) == 1
    nxt = small_step.next_agents[0]
    assert len(small_step.transitions[nxt].view.legal_actions) == 82 - 3
    assert len(big_step.transitions[nxt].view.legal_actions) == 170 - 3
    assert "Komi: 6.5" in big_step.transitions[nxt].view.long_term_context


# -- illegal moves, determinism ----------------------------------------------------------


def _replacements(task: str, seed: int, n: int) -> list[str]:
    game = _open(task, seed=seed)
    game.reset()
    mover = game.first_agents()[0]
    applied = []
    for _ in range(n):
        result = game.step({mover: "resign please"})
        step = result.transitions[mover]
        assert not step.valid and step.applied_action
        applied.append(step.applied_action)
        if result.done:
            break
        mover = result.next_agents[0]
    assert sum(game.metrics()["illegal_moves"].values()) == len(applied)
    return applied


def test_illegal_moves_are_random_legal_moves_deterministic_per_seed() -> None:
    for task in ["connect_four_v3", "go_v5", "chess_v6"]:
        first = _replacements(task, seed=11, n=6)
        assert first == _replacements(task, seed=11, n=6)
        assert first != _replacements(task, seed=12, n=6)
    game = _open("tictactoe_v3", seed=3)
    game.reset()
    result = game.step({"player_1": 42})  # an index outside the board is illegal too
    assert not result.transitions["player_1"].valid
    assert result.metrics["illegal_moves"] == {"player_1": 1, "player_2": 0}
    taken = result.transitions["player_1"].applied_action
    result = game.step({"player_2": taken})  # an occupied cell
    assert not result.transitions["player_2"].valid
    assert result.transitions["player_2"].applied_action != taken
    assert result.metrics["illegal_moves"] == {"player_1": 1, "player_2": 1}


def test_off_turn_answers_are_ignored_and_missing_mover_is_an_error() -> None:
    game = _open("tictactoe_v3")
    with pytest.raises(RuntimeError):
        game.step({"player_1": "A1"})
    game.reset()
    result = game.step({"player_1": "B2", "player_2": "A1"})
    assert result.transitions["player_1"].valid
    assert not result.transitions["player_2"].valid
    assert "not your turn" in result.transitions["player_2"].feedback
    assert list(game._board.env.board.squares) == [0, 0, 0, 0, 1, 0, 0, 0, 0]
    with pytest.raises(ValueError, match="turn"):
        game.step({"player_1": "A1"})
    with pytest.raises(ValueError, match="unknown"):
        game.step({"player_2": "A1", "player_9": "A2"})


# -- whole games --------------------------------------------------------------------------


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.slow
def test_random_games_end_with_zero_sum_returns_and_consistent_outcome(task: str) -> None:
    for seed in range(2 if task == "chess_v6" else 6):
        game = _open(task, seed=seed)
        views = game.reset()
        rng = random.Random(100 + seed)
        returns = dict.fromkeys(game.agents, 0.0)
        expected = game.first_agents()
        moves = 0
        while True:
            mover = _mover(views)
            assert [mover] == expected
            result = game.step({mover: rng.choice(views[mover].legal_actions)})
            moves += 1
            for agent, step in result.transitions.items():
                returns[agent] += step.reward
            views = {a: t.view for a, t in result.transitions.items()}
            if result.done:
                break
            assert result.next_agents != [mover]
            expected = result.next_agents
        metrics = result.metrics
        assert metrics["moves"] == moves <= game.max_steps
        assert sum(returns.values()) == 0.0
        assert returns == metrics["returns"]
        outcome = metrics["outcome"]
        for agent, value in returns.items():
            assert outcome[agent] == {1.0: "win", 0.0: "draw", -1.0: "loss"}[value]
        winners = [a for a, o in outcome.items() if o == "win"]
        assert metrics["winner"] == (winners[0] if winners else "")
        first = game.agents[0]
        assert metrics["progression"] == {"win": 1.0, "draw": 0.5, "loss": 0.0}[outcome[first]]
        assert metrics["illegal_moves"] == dict.fromkeys(game.agents, 0)
        assert metrics["end"]
        assert all(v.legal_actions == [] and not any(v.action_mask or [True])
                   for v in views.values())


def test_images_when_asked() -> None:
    shapes = {"chess_v6": (400, 400, 3), "connect_four_v3": (344, 396, 3),
              "go_v5": (400, 400, 3), "tictactoe_v3": (300, 300, 3)}
    for task, shape in shapes.items():
        game = _open(task, render_image=True)
        views = game.reset()
        image = views[game.agents[0]].image
        assert image is not None and image.shape == shape and image.dtype == np.uint8
        frame = game.render()
        assert frame.shape == shape and np.array_equal(frame, image)
        move = views[game.agents[0]].legal_actions[0]
        after = game.step({game.agents[0]: move}).transitions[game.agents[1]].view.image
        assert after is not None and not np.array_equal(after, image)
        game.close()
        game.close()
    plain = _open("connect_four_v3")
    assert plain.reset()["player_0"].image is None
    assert plain.render().shape == shapes["connect_four_v3"]
