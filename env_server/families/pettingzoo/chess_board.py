"""chess_v6: PettingZoo's chess (python-chess rules), moves named in UCI.

``player_0`` plays White and moves first; ``player_1`` plays Black. A move's name is its UCI
string (``e2e4``, ``g1f3``, ``e1g1`` for White's short castle, ``e7e8q`` for a promotion); the
legal-move list shows SAN beside each (``e2e4 (e4)``) and a SAN answer (``Nf3``, ``O-O``) is
accepted as well. The env's action index (8x8x73 = 4672, the AlphaZero-style encoding, mirrored
for Black) is mapped to and from UCI through PettingZoo's own ``chess_utils``.

The game ends, as PettingZoo ends it, on checkmate, stalemate, insufficient material, or when a
draw can be claimed (threefold repetition, fifty-move rule).
"""

from __future__ import annotations

from typing import Any

import chess
from pettingzoo.classic.chess import chess_utils
from pettingzoo.classic.chess.chess import raw_env as chess_env

from env_server.families.pettingzoo.board import BoardGame
from env_server.game import ActionInfo

FILES = "abcdefgh"
LEGEND = ("uppercase = White, lowercase = Black, '.' = empty square; "
          "K/k king, Q/q queen, R/r rook, B/b bishop, N/n knight, P/p pawn")


def ascii_board(board: chess.Board) -> str:
    """The position as 8 text rows, rank 8 first, files a..h left to right (White's view)."""
    rows = ["    " + " ".join(FILES)]
    for rank in range(7, -1, -1):
        cells = []
        for file in range(8):
            piece = board.piece_at(chess.square(file, rank))
            cells.append(piece.symbol() if piece else ".")
        rows.append(f" {rank + 1}  " + " ".join(cells) + f"  {rank + 1}")
    rows.append("    " + " ".join(FILES))
    return "\n".join(rows)


class ChessBoard(BoardGame):
    """Chess on PettingZoo's chess ``raw_env`` (screen 400x400 for images)."""

    task = "chess_v6"
    title = "Chess"
    agents = ("player_0", "player_1")
    default_max_steps = 1000

    def __init__(self) -> None:
        super().__init__(chess_env(render_mode="rgb_array", screen_height=400))

    @property
    def board(self) -> chess.Board:
        """The env's python-chess board (the live game state)."""
        board: chess.Board = self.env.board
        return board

    def static_actions(self) -> list[ActionInfo]:
        """Empty: chess move names depend on the position (see the legal-move list)."""
        return []

    def moves(self) -> list[tuple[int, chess.Move]]:
        """``(env index, python-chess move)`` for every legal move, ascending index."""
        if "moves" not in self._cache:
            player = self.agents.index(self.current)
            self._cache["moves"] = [(i, chess_utils.action_to_move(self.board, i, player))
                                    for i in self.legal_indices()]
        return list(self._cache["moves"])

    def legal_moves(self) -> list[tuple[int, str]]:
        """``(env index, UCI)`` of each legal move."""
        return [(i, move.uci()) for i, move in self.moves()]

    def resolve(self, text: str) -> int | None:
        """UCI (any case) or SAN of a legal move -> its env index; else None."""
        answer = text.strip().strip("`'\".").strip()
        moves = self.moves()
        by_uci = {move.uci(): i for i, move in moves}
        if answer.lower() in by_uci:
            return by_uci[answer.lower()]
        try:
            move = self.board.parse_san(answer)
        except ValueError:
            return None
        return by_uci.get(move.uci())

    def move_label(self, index: int) -> str:
        """``"e2e4 (e4)"``: UCI, then SAN in brackets (for a legal ``index``)."""
        for i, move in self.moves():
            if i == index:
                return f"{move.uci()} ({self.board.san(move)})"
        return str(index)

    def legal_labels(self) -> list[str]:
        """Every legal move as ``"uci (SAN)"``, ascending env index."""
        return [f"{move.uci()} ({self.board.san(move)})" for _, move in self.moves()]

    def side(self, agent: str) -> str:
        """``"White"`` for player_0, ``"Black"`` for player_1."""
        return "White" if agent == self.agents[0] else "Black"

    def board_text(self, agent: str) -> str:
        """FEN, side to move, check, and the ASCII board with its legend."""
        board = self.board
        lines = [f"FEN: {board.fen()}",
                 f"Side to move: {'White' if board.turn == chess.WHITE else 'Black'}"
                 f" (move {board.fullmove_number})"]
        if board.is_check():
            lines.append("The side to move is in check.")
        lines += ["Board (White at the bottom, rank 8 at the top, files a-h left to right):",
                  ascii_board(board), f"Legend: {LEGEND}."]
        return "\n".join(lines)

    def rules(self) -> str:
        """Chess rules in brief and the UCI notation."""
        return (
            "Standard chess. Checkmate the opponent's king to win. The game is a draw on "
            "stalemate, insufficient material, threefold repetition or the fifty-move rule "
            "(a draw is applied as soon as it can be claimed).\n"
            "Moves are written in UCI: the from-square then the to-square, e.g. e2e4 or g1f3; "
            "castling is the king's move (e1g1, e1c1, e8g8, e8c8); a promotion adds the piece "
            "letter, e.g. e7e8q (q, r, b or n). Each turn the legal moves are listed as "
            "'uci (SAN)', e.g. 'g1f3 (Nf3)'; answer with the UCI string (SAN is accepted too)."
        )

    def end_detail(self) -> str:
        """E.g. ``"checkmate (1-0)"`` or ``"threefold repetition (1/2-1/2)"``."""
        outcome = self.board.outcome(claim_draw=True)
        if outcome is None:
            return ""
        reason = outcome.termination.name.lower().replace("_", " ")
        return f"{reason} ({outcome.result()})"

    def info(self) -> dict[str, Any]:
        """``{"fen": ...}``."""
        return {"fen": self.board.fen()}
