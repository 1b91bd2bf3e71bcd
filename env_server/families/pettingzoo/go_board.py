"""go_v5: PettingZoo's Go (minigo rules: area scoring, simple ko, suicide illegal).

``black_0`` plays Black (``X``) and moves first; ``white_0`` plays White (``O``) and receives the
komi. Points are named as Go programs name them (GTP): a column letter from ``A`` with the letter
``I`` skipped (9x9: A B C D E F G H J) and a row number from 1 at the bottom to N at the top, e.g.
``D4``; ``pass`` passes. The env's action index of the point in row r from the top (0-based) and
column c is ``r * N + c``; ``pass`` is ``N * N``. The game ends after two passes in a row and is
scored by area (stones plus surrounded empty points, minus komi for Black).

PettingZoo keeps the board size in module globals of ``go_base`` (set when an env is built), so
games of different sizes in one process would clash. Every call into a Go env here holds one
process-wide lock and first restores that env's size (cheap: a few dicts of N*N entries).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
from pettingzoo.classic.go import go_base
from pettingzoo.classic.go.go import raw_env as go_env

from env_server.families.pettingzoo.board import BoardGame
from env_server.game import ActionInfo

#: board sizes a game may be opened with (``board_size`` option)
BOARD_SIZES = (5, 7, 9, 11, 13, 15, 17, 19)
DEFAULT_SIZE = 9
DEFAULT_KOMI = 7.5
LETTERS = "ABCDEFGHJKLMNOPQRST"  # GTP columns: no I
PASS = "pass"
SYMBOLS = {go_base.BLACK: "X", go_base.WHITE: "O", go_base.EMPTY: "."}

_GO_LOCK = threading.RLock()


def point_name(index: int, size: int) -> str:
    """Env index -> GTP name (``"A9"`` is index 0 on 9x9; ``size * size`` -> ``"pass"``)."""
    if index == size * size:
        return PASS
    row, column = divmod(index, size)
    return f"{LETTERS[column]}{size - row}"


def point_index(name: str, size: int) -> int | None:
    """GTP name (any case; ``pass``) -> env index; None if it is not a point of the board."""
    text = name.strip().upper()
    if text == PASS.upper():
        return size * size
    if len(text) < 2 or text[0] not in LETTERS[:size] or not text[1:].isdigit():
        return None
    number = int(text[1:])
    if not 1 <= number <= size:
        return None
    return (size - number) * size + LETTERS.index(text[0])


class GoBoard(BoardGame):
    """Go on PettingZoo's ``raw_env`` (``size`` x ``size``, komi ``komi``; images 400x400).

    Raises ValueError for a size outside ``BOARD_SIZES`` (the family validates first)."""

    task = "go_v5"
    title = "Go"
    agents = ("black_0", "white_0")

    def __init__(self, size: int = DEFAULT_SIZE, komi: float = DEFAULT_KOMI) -> None:
        if size not in BOARD_SIZES:
            raise ValueError(f"board_size must be one of {BOARD_SIZES}, got {size}")
        self.size = size
        self.komi = komi
        self.default_max_steps = 4 * size * size
        with _GO_LOCK:
            super().__init__(go_env(board_size=size, komi=komi,
                                           render_mode="rgb_array", screen_height=400))

    def _sync(self) -> None:
        """Point PettingZoo's go globals at this game's size (call with the lock held)."""
        if self.size != go_base.N:
            self.env._overwrite_go_global_variables(board_size=self.size)

    # every env call holds the lock with this game's size in the globals

    def reset(self, seed: int) -> None:
        """New empty board; Black to move."""
        with _GO_LOCK:
            self._sync()
            super().reset(seed)

    def play(self, index: int) -> None:
        """Play a point or pass for the player to move."""
        with _GO_LOCK:
            self._sync()
            super().play(index)

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        """The env's planes (N, N, 17) and its mask (N*N + 1; the last entry is pass)."""
        with _GO_LOCK:
            self._sync()
            return super().observe(agent)

    def render(self) -> np.ndarray:
        """The env's drawing, transposed so that rows run top to bottom like the text board
        (PettingZoo draws minigo row i at x = i)."""
        with _GO_LOCK:
            self._sync()
            frame = super().render()
        return np.ascontiguousarray(frame.transpose(1, 0, 2))

    @property
    def position(self) -> Any:
        """The env's minigo ``Position``."""
        return self.env._go

    def static_actions(self) -> list[ActionInfo]:
        """Every point in env index order (A9, B9, ... on 9x9), then ``pass``."""
        n = self.size
        points = [ActionInfo(point_name(i, n), f"place a stone on {point_name(i, n)}")
                  for i in range(n * n)]
        return [*points, ActionInfo(PASS, "pass (two passes in a row end the game)")]

    def legal_moves(self) -> list[tuple[int, str]]:
        """Legal points (empty, not suicide, not a ko recapture) and ``pass``."""
        return [(i, point_name(i, self.size)) for i in self.legal_indices()]

    def resolve(self, text: str) -> int | None:
        """A legal point's GTP name or ``pass`` (any case) -> env index; else None."""
        index = point_index(text.strip().strip("`'\"."), self.size)
        return index if index is not None and index in self.legal_indices() else None

    def side(self, agent: str) -> str:
        """``"Black (X)"`` or ``"White (O)"``."""
        return "Black (X)" if agent == self.agents[0] else "White (O)"

    def board_text(self, agent: str) -> str:
        """The board with GTP coordinates, captures, komi and the last moves."""
        n = self.size
        pos = self.position
        header = "    " + " ".join(LETTERS[:n])
        rows = [f"{n - r:>2}  " + " ".join(SYMBOLS.get(int(v), "?") for v in pos.board[r])
                + f"  {n - r}" for r in range(n)]
        black_caps, white_caps = pos.caps
        lines = [f"Go board {n}x{n} (you are {self.side(agent)}; X = Black, O = White, "
                 "'.' = empty; columns A-" f"{LETTERS[n - 1]} without I, row 1 at the bottom):",
                 header, *rows, header,
                 f"Captured stones: Black has captured {black_caps}, White {white_caps}. "
                 f"Komi: {self.komi:g} points for White."]
        recent = list(pos.recent)
        if recent and recent[-1].move is None:
            passer = "Black" if recent[-1].color == go_base.BLACK else "White"
            lines.append(f"{passer} passed on the last move; another pass ends the game.")
        return "\n".join(lines)

    def rules(self) -> str:
        """Go rules in brief and the coordinate notation."""
        n = self.size
        return (
            f"Go on a {n}x{n} board. Players alternately place a stone on an empty point; a "
            "group with no liberties (empty neighbouring points) is captured. Suicide and "
            "immediate ko recapture are illegal. Two passes in a row end the game, which is "
            f"scored by area (stones plus surrounded territory); White gets a komi of "
            f"{self.komi:g} points. The higher score wins.\n"
            f"A move names a point: a column letter (A-{LETTERS[n - 1]}, skipping I) and a row "
            f"number (1 at the bottom, {n} at the top), e.g. {LETTERS[min(3, n - 1)]}"
            f"{min(4, n)}; 'pass' passes."
        )

    def end_detail(self) -> str:
        """E.g. ``"two passes; area score B+3.5"``."""
        with _GO_LOCK:
            self._sync()
            return f"two passes; area score {self.position.result_string()}"

    def score(self) -> float:
        """Area score from Black's side, komi included (positive: Black leads)."""
        with _GO_LOCK:
            self._sync()
            return float(self.position.score())

    def info(self) -> dict[str, Any]:
        """``{"board_size": N, "komi": k}``."""
        return {"board_size": self.size, "komi": self.komi}
