"""Scripted Go player: one-ply greedy from the observation planes.

PettingZoo's ``go_v5`` observation is (N, N, 17): planes 0..15 are the last 8 positions, each
as a pair (stones of the player who made that move, stones of the other player), and plane 16
is the observer's colour (0 Black, 1 White). On the observer's turn the last move was the
opponent's, so plane 0 holds the **opponent's** stones and plane 1 the **observer's** (checked
against the package; the planes are not "current player first"). Row 0 is the top row; the
env's action index of (row, column) is ``row * N + column`` and ``N * N`` is ``pass``, which is
also the order of ``ctx.action_names``.
"""

from __future__ import annotations

import numpy as np

from agent_server.strategies.scripted.base import Bot, legal_indices, pick_best, tensor
from agent_server.turn import TurnInput

EMPTY, MINE, THEIRS = 0, 1, -1

Point = tuple[int, int]


def board_from_planes(obs: np.ndarray) -> np.ndarray:
    """(N, N, 17) planes on the observer's turn -> (N, N) int grid: 1 own, -1 opponent."""
    grid = np.zeros(obs.shape[:2], dtype=np.int8)
    grid[obs[:, :, 1] != 0] = MINE
    grid[obs[:, :, 0] != 0] = THEIRS
    return grid


def neighbours(point: Point, size: int) -> list[Point]:
    """The on-board orthogonal neighbours of ``point``."""
    r, c = point
    return [(r + dr, c + dc) for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1))
            if 0 <= r + dr < size and 0 <= c + dc < size]


def group_and_liberties(grid: np.ndarray, start: Point) -> tuple[set[Point], set[Point]]:
    """The chain of stones containing ``start`` and its liberties (empty neighbours)."""
    colour = grid[start]
    size = grid.shape[0]
    group, liberties, stack = {start}, set(), [start]
    while stack:
        point = stack.pop()
        for n in neighbours(point, size):
            if grid[n] == EMPTY:
                liberties.add(n)
            elif grid[n] == colour and n not in group:
                group.add(n)
                stack.append(n)
    return group, liberties


def play(grid: np.ndarray, point: Point, colour: int) -> tuple[np.ndarray, int]:
    """The grid after ``colour`` plays ``point`` (captured chains removed) and the number of
    stones captured."""
    out = grid.copy()
    out[point] = colour
    captured = 0
    for n in neighbours(point, grid.shape[0]):
        if out[n] == -colour:
            group, liberties = group_and_liberties(out, n)
            if not liberties:
                captured += len(group)
                for stone in group:
                    out[stone] = EMPTY
    return out, captured


def is_own_eye(grid: np.ndarray, point: Point) -> bool:
    """An empty point whose every orthogonal neighbour is an own stone."""
    return grid[point] == EMPTY and all(grid[n] == MINE
                                        for n in neighbours(point, grid.shape[0]))


class GoBot(Bot):
    """Capture the most stones; else a random move that is neither self-atari nor inside an
    own single-point eye (seeded rng); pass when no such move is left (the game can end)."""

    def choose(self, turn: TurnInput) -> tuple[str, str]:
        """The point to play (GTP name) or ``pass``."""
        obs = tensor(turn, "observation", 3)
        grid = board_from_planes(obs)
        size = grid.shape[0]
        names = self.ctx.action_names
        pass_index = size * size
        points = [i for i in legal_indices(self.ctx, turn) if i < pass_index]
        captures: list[tuple[float, int]] = []
        sensible: list[int] = []
        for index in points:
            point = divmod(index, size)
            if grid[point] != EMPTY:
                continue
            after, captured = play(grid, point, MINE)
            if captured:
                captures.append((captured, index))
                continue
            if is_own_eye(grid, point):
                continue
            _, liberties = group_and_liberties(after, point)
            if len(liberties) <= 1:
                continue  # self-atari (or suicide)
            sensible.append(index)
        if captures:
            index = pick_best(self.rng, captures)
            count = int(max(score for score, _ in captures))
            return names[index], f"{names[index]} captures {count} stone(s)"
        if sensible:
            index = self.rng.choice(sensible)
            return names[index], f"{names[index]}: a random safe move"
        return names[pass_index], "no safe move left: pass"
