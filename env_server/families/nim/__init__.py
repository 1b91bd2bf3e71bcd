"""Nim family: normal-play Nim between two players, a small turn-based game.

Rules: a task fixes some heaps of objects (``nim_3-4-5``: heaps of 3, 4 and 5). ``player_0``
and ``player_1`` move in turn, ``player_0`` first. A move removes 1 or more objects from one
non-empty heap (up to the whole heap). Whoever takes the last object wins (normal play); there
are no draws; a game ``GameOptions.max_steps`` cuts short is unfinished (nobody wins).

Moves are named ``take C from heap H`` (heaps numbered from 1). Nim is deterministic: the seed
only seeds the random legal move played in place of an illegal answer.

Importing this package is cheap (no game package is needed). Modules: ``family`` (tasks,
options, open) and ``game`` (the rules, texts, metrics and drawing).
"""

from env_server.families.nim.family import NimFamily

__all__ = ["NimFamily"]
