"""connect_four_v3: PettingZoo's Connect Four (6 rows x 7 columns), moves named by column.

``player_0`` drops ``X`` and moves first; ``player_1`` drops ``O``. The action ``column N``
(N = 1..7, left to right) is the env's action index N - 1; a column is legal while its top cell
is empty. A bare number ``N`` is accepted as ``column N``.
"""

from __future__ import annotations

import re

from pettingzoo.classic.connect_four.connect_four import raw_env as connect_four_env

from env_server.families.pettingzoo.board import BoardGame
from env_server.game import ActionInfo

ROWS, COLUMNS = 6, 7
SYMBOLS = {0: ".", 1: "X", 2: "O"}
_ANSWER = re.compile(r"^(?:col(?:umn)?\s*)?([1-7])$", re.IGNORECASE)


def column_name(index: int) -> str:
    """Env action index 0..6 -> ``"column 1"``..``"column 7"``."""
    return f"column {index + 1}"


class ConnectFourBoard(BoardGame):
    """Connect Four on PettingZoo's ``raw_env`` (images 396x344)."""

    task = "connect_four_v3"
    title = "Connect Four"
    agents = ("player_0", "player_1")
    default_max_steps = ROWS * COLUMNS

    def __init__(self) -> None:
        super().__init__(connect_four_env(render_mode="rgb_array", screen_scaling=4))

    def static_actions(self) -> list[ActionInfo]:
        """``column 1``..``column 7`` (env indices 0..6)."""
        return [ActionInfo(column_name(i), f"drop a piece into column {i + 1} "
                           "(columns 1..7 from left to right)") for i in range(COLUMNS)]

    def legal_moves(self) -> list[tuple[int, str]]:
        """The columns that are not full."""
        return [(i, column_name(i)) for i in self.legal_indices()]

    def resolve(self, text: str) -> int | None:
        """``column N`` / ``col N`` / ``N`` (any case) for a non-full column -> N - 1."""
        match = _ANSWER.match(" ".join(text.strip().strip("`'\".").split()))
        if match is None:
            return None
        index = int(match.group(1)) - 1
        return index if index in self.legal_indices() else None

    def grid(self) -> list[list[int]]:
        """The board as 6 rows (top first) of 7 cells: 0 empty, 1 player_0, 2 player_1."""
        cells = list(self.env.board)
        return [cells[r * COLUMNS:(r + 1) * COLUMNS] for r in range(ROWS)]

    def side(self, agent: str) -> str:
        """``"X"`` for player_0, ``"O"`` for player_1."""
        return "X" if agent == self.agents[0] else "O"

    def board_text(self, agent: str) -> str:
        """The grid, top row first, with column numbers above and below."""
        header = "  " + " ".join(str(c + 1) for c in range(COLUMNS))
        rows = ["| " + " ".join(SYMBOLS[v] for v in row) + " |" for row in self.grid()]
        return "\n".join([
            f"Connect Four board (you are {self.side(agent)}; "
            f"X = player_0, O = player_1, '.' = empty; the bottom row is the last line):",
            header, *rows, header])

    def rules(self) -> str:
        """Connect Four rules and the column notation."""
        return (
            "Connect Four on a board of 6 rows and 7 columns. Players take turns dropping a "
            "piece into a column; it falls to the lowest empty cell. The first to line up four "
            "of their pieces horizontally, vertically or diagonally wins; a full board with no "
            "line of four is a draw.\n"
            "A move is written 'column N' with N from 1 (leftmost) to 7 (rightmost); a column "
            "is legal while it is not full."
        )

    def end_detail(self) -> str:
        """``"four in a row"`` or ``"board full"``."""
        rewards = self.total_rewards()
        return "four in a row" if any(rewards.values()) else "board full"
