"""tictactoe_v3: PettingZoo's Tic-Tac-Toe, moves named by cell.

``player_1`` plays ``X`` and moves first; ``player_2`` plays ``O``. A cell is a column letter
A..C (left to right) and a row number 1..3 (top to bottom): ``A1`` is the top-left cell, ``C3``
the bottom-right. PettingZoo numbers the cells column by column (0 3 6 / 1 4 7 / 2 5 8), so the
env's action index of column c (A=0) and row r (1=0) is ``3 * c + r``.
"""

from __future__ import annotations

from pettingzoo.classic.tictactoe.tictactoe import raw_env as tictactoe_env

from env_server.families.pettingzoo.board import BoardGame
from env_server.game import ActionInfo

COLUMNS = "ABC"
SYMBOLS = {0: ".", 1: "X", 2: "O"}


def cell_name(index: int) -> str:
    """Env index 0..8 -> ``"A1"``..``"C3"`` (column-major, as PettingZoo numbers cells)."""
    column, row = divmod(index, 3)
    return f"{COLUMNS[column]}{row + 1}"


def cell_index(name: str) -> int | None:
    """``"A1"``..``"C3"`` (any case, surrounding space ignored) -> env index; else None."""
    text = name.strip().upper()
    if len(text) != 2 or text[0] not in COLUMNS or text[1] not in "123":
        return None
    return 3 * COLUMNS.index(text[0]) + int(text[1]) - 1


class TicTacToeBoard(BoardGame):
    """Tic-Tac-Toe on PettingZoo's ``raw_env`` (images 300x300)."""

    task = "tictactoe_v3"
    title = "Tic-Tac-Toe"
    agents = ("player_1", "player_2")
    default_max_steps = 9

    def __init__(self) -> None:
        super().__init__(tictactoe_env(render_mode="rgb_array", screen_height=300))

    def static_actions(self) -> list[ActionInfo]:
        """The nine cells in env index order (A1, A2, A3, B1, ...)."""
        return [ActionInfo(cell_name(i), f"mark column {cell_name(i)[0]}, row {cell_name(i)[1]}"
                           " (A-C left to right, 1-3 top to bottom)") for i in range(9)]

    def legal_moves(self) -> list[tuple[int, str]]:
        """The empty cells."""
        return [(i, cell_name(i)) for i in self.legal_indices()]

    def resolve(self, text: str) -> int | None:
        """An empty cell's name (any case) -> its env index; else None."""
        index = cell_index(text.strip().strip("`'\"."))
        return index if index is not None and index in self.legal_indices() else None

    def side(self, agent: str) -> str:
        """``"X"`` for player_1, ``"O"`` for player_2."""
        return "X" if agent == self.agents[0] else "O"

    def board_text(self, agent: str) -> str:
        """The 3x3 grid with column letters and row numbers."""
        squares = list(self.env.board.squares)
        rows = [f"{r + 1}  " + " ".join(SYMBOLS[squares[3 * c + r]] for c in range(3))
                for r in range(3)]
        return "\n".join([
            f"Tic-Tac-Toe board (you are {self.side(agent)}; X = player_1, O = player_2, "
            "'.' = empty; columns A-C left to right, rows 1-3 top to bottom):",
            "   A B C", *rows])

    def rules(self) -> str:
        """Tic-Tac-Toe rules and the cell notation."""
        return (
            "Tic-Tac-Toe on a 3x3 grid. Players take turns marking an empty cell; the first to "
            "get three marks in a row, column or diagonal wins; a full grid without a line is a "
            "draw.\n"
            "A move names a cell: a column letter A, B or C (left to right) and a row number 1, "
            "2 or 3 (top to bottom), e.g. A1 is the top-left cell, B2 the centre, C3 the "
            "bottom-right. Only empty cells are legal."
        )

    def end_detail(self) -> str:
        """``"three in a row"`` or ``"board full"``."""
        return "three in a row" if any(self.total_rewards().values()) else "board full"
