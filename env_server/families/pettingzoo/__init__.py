"""PettingZoo classic family: chess, Connect Four, Go and Tic-Tac-Toe as turn-based games.

Importing this package is cheap; PettingZoo (and pygame, python-chess) are imported when a game
is opened.

Modules: ``family`` (tasks, options, open), ``game`` (the turn-based driver: turns, illegal
moves, metrics, views), ``board`` (the per-game adapter interface) and one adapter per game:
``chess_board``, ``connect_four_board``, ``go_board``, ``tictactoe_board``.
"""

from env_server.families.pettingzoo.family import PettingZooFamily

__all__ = ["PettingZooFamily"]
