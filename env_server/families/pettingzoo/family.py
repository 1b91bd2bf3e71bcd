"""The ``pettingzoo`` family: four PettingZoo classic two-player board games.

Tasks (agent ids in seat order; the first moves first):

- ``chess_v6``: player_0 (White), player_1 (Black); moves in UCI; limit 1000 plies;
- ``connect_four_v3``: player_0 (X), player_1 (O); ``column 1``..``column 7``; limit 42;
- ``go_v5``: black_0, white_0; GTP points (``D4``) and ``pass``; 9x9 by default; limit 4*N*N;
- ``tictactoe_v3``: player_1 (X), player_2 (O); cells ``A1``..``C3``; limit 9.

Family options (``GameOptions.kwargs``):

- ``board_size`` (go_v5 only): one of ``go_board.BOARD_SIZES`` (5..19, odd), default 9;
- ``komi`` (go_v5 only): points for White, a number ending in .5 in [0.5, 50.5] (PettingZoo
  scores a tie as a White win, so whole-number komi is refused), default 7.5;
- ``progression_agent``: the agent whose result ``metrics["progression"]`` reports (1 win,
  0.5 draw, 0 loss), default the first seat.

``GameOptions.max_steps`` overrides the ply limit; reaching it ends the game as a draw. Players
(``GameOptions.players``), when given, must use the task's agent ids. There is no oracle.
"""

from __future__ import annotations

from typing import Any

from env_server.game import (
    Family,
    Game,
    GameOptionError,
    GameOptions,
    TaskInfo,
    TaskNotFoundError,
    check_player_ids,
)
from env_server.options import step_limit
from moria.quoting import quote

#: task -> (agent ids, default ply limit, description); Go's limit is for the default 9x9
TASKS: dict[str, tuple[tuple[str, ...], int, str]] = {
    "chess_v6": (("player_0", "player_1"), 1000,
                 "chess, White (player_0) against Black (player_1); moves in UCI, e.g. e2e4"),
    "connect_four_v3": (("player_0", "player_1"), 42,
                        "Connect Four on 6x7; moves 'column 1'..'column 7'"),
    "go_v5": (("black_0", "white_0"), 4 * 9 * 9,
              "Go, 9x9 by default (option board_size); moves like D4 or pass"),
    "tictactoe_v3": (("player_1", "player_2"), 9,
                     "Tic-Tac-Toe; moves name cells A1..C3 (columns A-C, rows 1-3 from the top)"),
}


class PettingZooFamily(Family):
    """Lists and opens the four PettingZoo classic games."""

    name = "pettingzoo"
    packages = ("pettingzoo", "chess", "pygame-ce")
    #: these envs are pure Python/numpy; Go's module globals are guarded by a lock
    isolation = "thread"
    preload = ("env_server.families.pettingzoo.chess_board",
               "env_server.families.pettingzoo.connect_four_board",
               "env_server.families.pettingzoo.go_board",
               "env_server.families.pettingzoo.tictactoe_board",
               "env_server.families.pettingzoo.game")

    def list_tasks(self) -> list[TaskInfo]:
        """The four games, two agents each, default action "" (illegal -> random legal)."""
        return [TaskInfo(family=self.name, task=task, description=description,
                         max_steps=limit, default_action="", num_agents=len(agents))
                for task, (agents, limit, description) in TASKS.items()]

    def open(self, task: str, options: GameOptions) -> Game:
        """Create a game (not reset yet).

        Raises:
            TaskNotFoundError: a task not in ``TASKS``.
            GameOptionError: ``oracle``; a player id that is not one of the task's agents (or
                given twice); a bad ``max_steps``; a bad or unknown ``kwargs`` key.
        """
        if task not in TASKS:
            raise TaskNotFoundError(task, list(TASKS))
        agents = TASKS[task][0]
        if options.oracle:
            raise GameOptionError("oracle: the PettingZoo games have no expert player; "
                                  "open the game with oracle=false")
        options = self.check_options(task, options)
        check_player_ids(options.players, agents)
        kwargs = options.kwargs
        progression_agent = kwargs.get("progression_agent", agents[0])
        if progression_agent not in agents:
            raise GameOptionError(f"progression_agent: must be one of {', '.join(agents)}; "
                                  f"got {quote(progression_agent, 64)}")

        from env_server.families.pettingzoo.game import PettingZooGame

        board = _make_board(task, kwargs)
        limit = step_limit(options, board.default_max_steps)
        return PettingZooGame(board, options, max_steps=limit,
                              progression_agent=str(progression_agent))


def _make_board(task: str, kwargs: dict[str, Any]) -> Any:
    """The task's ``BoardGame`` (imports PettingZoo), from its options (checked against the
    manifest's schema: ``board_size`` and ``komi`` only reach Go); raises GameOptionError for
    what the schema cannot say (an even board size, a komi not ending in .5)."""
    if task == "go_v5":
        from env_server.families.pettingzoo.go_board import (
            BOARD_SIZES,
            DEFAULT_KOMI,
            DEFAULT_SIZE,
            GoBoard,
        )

        size = kwargs.get("board_size", DEFAULT_SIZE)
        if size not in BOARD_SIZES:
            raise GameOptionError(f"board_size: must be one of "
                                  f"{', '.join(map(str, BOARD_SIZES))}; got {size}")
        komi = kwargs.get("komi", DEFAULT_KOMI)
        if komi % 1 != 0.5:
            raise GameOptionError(f"komi: must be a number ending in .5 in [0.5, 50.5] "
                                  f"(e.g. 7.5), got {komi:g}")
        return GoBoard(size, float(komi))
    if task == "chess_v6":
        from env_server.families.pettingzoo.chess_board import ChessBoard

        return ChessBoard()
    if task == "connect_four_v3":
        from env_server.families.pettingzoo.connect_four_board import ConnectFourBoard

        return ConnectFourBoard()
    from env_server.families.pettingzoo.tictactoe_board import TicTacToeBoard

    return TicTacToeBoard()
