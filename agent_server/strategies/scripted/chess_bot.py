"""Scripted chess player: one-ply greedy on the position in ``info["fen"]`` (python-chess).

Answers in UCI (``e2e4``, ``e7e8q``), the env's move notation; when ``turn.legal_actions`` is
given, only moves in it are considered.
"""

from __future__ import annotations

import chess

from agent_server.strategies.scripted.base import Bot
from agent_server.turn import TurnInput

#: material values in pawns (the king's value only matters as an attacker: it is large so that
#: capturing with the king ranks below capturing with another piece)
PIECE_VALUES = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9,
                chess.KING: 10}


def capture_score(board: chess.Board, move: chess.Move) -> float | None:
    """``victim value - attacker value / 10`` for a capture (en passant included); None for
    a move that captures nothing."""
    if not board.is_capture(move):
        return None
    if board.is_en_passant(move):
        victim = chess.PAWN
    else:
        piece = board.piece_at(move.to_square)
        assert piece is not None
        victim = piece.piece_type
    attacker = board.piece_at(move.from_square)
    assert attacker is not None
    return PIECE_VALUES[victim] - PIECE_VALUES[attacker.piece_type] / 10


class ChessBot(Bot):
    """Mate in one if there is one; else the capture with the best ``victim - attacker / 10``;
    else a checking move; else a seeded random legal move (ties broken by the seeded rng)."""

    def choose(self, turn: TurnInput) -> tuple[str, str]:
        """The move in UCI.

        Raises:
            ValueError: ``info["fen"]`` is missing or not a FEN, or no legal move is left.
        """
        fen = turn.info.get("fen")
        if not isinstance(fen, str):
            raise ValueError("the scripted chess player needs info['fen']")
        board = chess.Board(fen)
        allowed = {a.strip().lower() for a in turn.legal_actions}
        moves = sorted((m for m in board.legal_moves if not allowed or m.uci() in allowed),
                       key=lambda m: m.uci())
        if not moves:
            raise ValueError(f"no legal move in the position {fen!r}")
        mates: list[chess.Move] = []
        checks: list[chess.Move] = []
        captures: list[tuple[float, chess.Move]] = []
        for move in moves:
            score = capture_score(board, move)
            if score is not None:
                captures.append((score, move))
            if board.gives_check(move):
                board.push(move)
                mate = board.is_checkmate()
                board.pop()
                (mates if mate else checks).append(move)
        if mates:
            move = self.rng.choice(mates)
            return move.uci(), f"{move.uci()} mates in one"
        if captures:
            best = max(score for score, _ in captures)
            move = self.rng.choice([m for score, m in captures if score == best])
            return move.uci(), f"{move.uci()} is the best capture (score {best:g})"
        if checks:
            move = self.rng.choice(checks)
            return move.uci(), f"{move.uci()} gives check"
        move = self.rng.choice(moves)
        return move.uci(), f"{move.uci()}: a random legal move"
