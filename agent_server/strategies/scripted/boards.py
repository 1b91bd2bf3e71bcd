"""Scripted players for the small PettingZoo board games: Connect Four and Tic-Tac-Toe.

Both read ``tensors["observation"]``: PettingZoo stacks two planes, plane 0 the observing
player's pieces and plane 1 the opponent's (``connect_four_v3``: (6, 7, 2), row 0 the top row;
``tictactoe_v3``: (3, 3, 2), whose flattened 3x3 plane is in the env's action-index order).
Moves are answered with ``ctx.action_names[index]`` (the env's own action order).
"""

from __future__ import annotations

import numpy as np

from agent_server.strategies.scripted.base import Bot, legal_indices, pick_best, tensor
from agent_server.turn import TurnInput

EMPTY, MINE, THEIRS = 0, 1, 2


def planes_to_grid(obs: np.ndarray) -> np.ndarray:
    """(H, W, 2) planes -> (H, W) int grid: 0 empty, 1 the observer's, 2 the opponent's."""
    grid = np.zeros(obs.shape[:2], dtype=np.int8)
    grid[obs[:, :, 0] != 0] = MINE
    grid[obs[:, :, 1] != 0] = THEIRS
    return grid


# -- Connect Four --------------------------------------------------------------------------

C4_ROWS, C4_COLUMNS = 6, 7


def c4_drop(grid: np.ndarray, column: int, piece: int) -> np.ndarray | None:
    """The grid after ``piece`` falls into ``column`` (row 0 is the top); None if full."""
    empty_rows = np.flatnonzero(grid[:, column] == EMPTY)
    if empty_rows.size == 0:
        return None
    out = grid.copy()
    out[int(empty_rows[-1]), column] = piece
    return out


def c4_wins(grid: np.ndarray, piece: int) -> bool:
    """True when ``piece`` has four in a row (horizontal, vertical or diagonal)."""
    rows, cols = grid.shape
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        for r in range(rows):
            for c in range(cols):
                end_r, end_c = r + 3 * dr, c + 3 * dc
                if not (0 <= end_r < rows and 0 <= end_c < cols):
                    continue
                if all(grid[r + k * dr, c + k * dc] == piece for k in range(4)):
                    return True
    return False


def c4_winning_columns(grid: np.ndarray, piece: int) -> list[int]:
    """Columns where dropping ``piece`` wins at once."""
    out = []
    for column in range(grid.shape[1]):
        after = c4_drop(grid, column, piece)
        if after is not None and c4_wins(after, piece):
            out.append(column)
    return out


class ConnectFourBot(Bot):
    """One-ply greedy Connect Four: win now; else block the opponent's immediate win; else a
    move after which the opponent cannot win at once (if any), preferring moves that leave
    more of our own immediate wins, then the centre columns; ties broken by the seeded rng."""

    def choose(self, turn: TurnInput) -> tuple[str, str]:
        """The column to play (``column N``)."""
        grid = planes_to_grid(tensor(turn, "observation", 3))
        legal = [i for i in legal_indices(self.ctx, turn) if i < grid.shape[1]
                 and grid[0, i] == EMPTY]
        if not legal:
            raise ValueError("no legal column in the observation")
        names = self.ctx.action_names
        wins = [c for c in c4_winning_columns(grid, MINE) if c in legal]
        if wins:
            column = self.rng.choice(wins)
            return names[column], f"{names[column]} wins at once"
        blocks = [c for c in c4_winning_columns(grid, THEIRS) if c in legal]
        if blocks:
            column = self.rng.choice(blocks)
            return names[column], f"{names[column]} blocks the opponent's four"
        safe = []
        for column in legal:
            after = c4_drop(grid, column, MINE)
            assert after is not None
            if not c4_winning_columns(after, THEIRS):
                safe.append(column)
        pool = safe or legal
        centre = (grid.shape[1] - 1) / 2
        scored = []
        for column in pool:
            after = c4_drop(grid, column, MINE)
            assert after is not None
            threats = len(c4_winning_columns(after, MINE))
            scored.append((threats * 10 - abs(column - centre), column))
        column = pick_best(self.rng, scored)
        why = "a safe move" if safe else "no safe move left"
        return names[column], f"{names[column]}: {why}, toward the centre"


# -- Tic-Tac-Toe ---------------------------------------------------------------------------

#: the 8 lines of a 3x3 board in flat indices (the env's action order; the set is the same
#: whether the flat order is row- or column-major)
TTT_LINES = (
    (0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6),
)
TTT_CENTRE = 4
TTT_CORNERS = (0, 2, 6, 8)


def ttt_completing(cells: list[int], piece: int) -> list[int]:
    """Empty cells that complete a line of three for ``piece``."""
    out = set()
    for line in TTT_LINES:
        values = [cells[i] for i in line]
        if values.count(piece) == 2 and values.count(EMPTY) == 1:
            out.add(line[values.index(EMPTY)])
    return sorted(out)


class TicTacToeBot(Bot):
    """Tic-Tac-Toe: win, else block, else the centre, else a corner, else any empty cell
    (ties broken by the seeded rng)."""

    def choose(self, turn: TurnInput) -> tuple[str, str]:
        """The cell to mark (``A1``..``C3``)."""
        obs = tensor(turn, "observation", 3)
        cells = [int(v) for v in planes_to_grid(obs).reshape(-1)]
        legal = [i for i in legal_indices(self.ctx, turn) if i < 9 and cells[i] == EMPTY]
        if not legal:
            raise ValueError("no empty cell in the observation")
        names = self.ctx.action_names
        for piece, why in ((MINE, "completes three in a row"),
                           (THEIRS, "blocks the opponent's line")):
            options = [i for i in ttt_completing(cells, piece) if i in legal]
            if options:
                cell = self.rng.choice(options)
                return names[cell], f"{names[cell]} {why}"
        if TTT_CENTRE in legal:
            return names[TTT_CENTRE], "the centre"
        corners = [i for i in TTT_CORNERS if i in legal]
        if corners:
            cell = self.rng.choice(corners)
            return names[cell], f"{names[cell]}: a free corner"
        cell = self.rng.choice(legal)
        return names[cell], f"{names[cell]}: any free cell"
