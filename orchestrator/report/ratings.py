"""Tournament statistics as pure functions: win rates with Wilson intervals, and ratings.

- ``win_rate`` scores a win 1, a draw 1/2 and a loss 0, over the games played.
- ``wilson_interval`` is the Wilson score interval of such a rate. The score may be fractional
  (half points for draws), which the formula accepts as it stands.
- ``rate_games`` feeds two-player results, in the order given, to an openskill
  ``PlackettLuce`` model with its default prior (mu 25, sigma 25/3). It returns mu, sigma and
  the conservative ordinal mu - 3 sigma per player. The model is fresh on every call, so the
  same games in the same order always give the same ratings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from openskill.models import PlackettLuce

#: The two-sided 95% normal quantile.
Z_95: Final[float] = 1.959963984540054

#: The game score of each outcome, for the player it belongs to.
OUTCOME_SCORE: Final[dict[str, float]] = {"win": 1.0, "draw": 0.5, "loss": 0.0}
#: The outcome a two-player game's env gives every seat when the step cap stopped the game
#: before it ended (``env_server.turn_based.UNFINISHED``): no result, so no score.
UNFINISHED: Final = "unfinished"

#: How many sigmas the conservative ordinal subtracts from mu.
ORDINAL_Z: Final[float] = 3.0


def win_rate(wins: int, draws: int, losses: int) -> float | None:
    """``(wins + draws / 2) / games`` in [0, 1]; None when no game was played.

    Raises ValueError for a negative count.
    """
    if min(wins, draws, losses) < 0:
        raise ValueError(f"counts must be >= 0 (got {wins}, {draws}, {losses})")
    games = wins + draws + losses
    return None if games == 0 else (wins + 0.5 * draws) / games


def wilson_interval(score: float, games: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval ``(low, high)`` of a rate ``score / games``, both in [0, 1].

    ``score`` is the number of points (wins plus half the draws), ``games`` the number of
    games, ``z`` the normal quantile (default: 95% two-sided). No games gives ``(0.0, 1.0)``.
    8 points out of 10 give about (0.490, 0.943).

    Raises ValueError when ``games < 0``, ``score`` is outside [0, games] or ``z <= 0``.
    """
    if games < 0:
        raise ValueError(f"games must be >= 0 (got {games})")
    if not 0.0 <= score <= games:
        raise ValueError(f"score must lie in [0, {games}] (got {score})")
    if z <= 0:
        raise ValueError(f"z must be > 0 (got {z})")
    if games == 0:
        return (0.0, 1.0)
    p = score / games
    z2 = z * z
    denominator = 1.0 + z2 / games
    centre = (p + z2 / (2 * games)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / games + z2 / (4 * games * games)) / denominator
    # at 0 or ``games`` points the exact bound is 0 or 1; rounding must not lift it off
    low = 0.0 if score == 0 else max(0.0, centre - half)
    high = 1.0 if score == games else min(1.0, centre + half)
    return (low, high)


@dataclass(frozen=True)
class Rating:
    """One player's openskill rating: ``mu`` (mean skill), ``sigma`` (its uncertainty) and
    ``ordinal`` = mu - 3 sigma (a conservative estimate; ranks players)."""

    mu: float
    sigma: float
    ordinal: float


def rate_games(players: Sequence[str], games: Iterable[tuple[str, str, float]],
               ) -> dict[str, Rating]:
    """Ratings after feeding ``games`` in order to a fresh ``PlackettLuce`` model.

    ``players``: every player name (one who played no game keeps the prior). ``games``:
    ``(a, b, score_of_a)`` with score 1 (a won), 0.5 (draw) or 0 (b won). Returns a rating per
    name of ``players``.

    Raises ValueError for a game naming an unknown player, a player against itself, or a
    score other than 0, 0.5 and 1.
    """
    model = PlackettLuce()
    current = {name: model.rating(name=name) for name in players}
    for a, b, score in games:
        if a not in current or b not in current:
            raise ValueError(f"game between unknown players {a!r} and {b!r}")
        if a == b:
            raise ValueError(f"player {a!r} cannot play itself")
        if score not in (0.0, 0.5, 1.0):
            raise ValueError(f"score must be 0, 0.5 or 1 (got {score!r})")
        ranks = [1.0, 1.0] if score == 0.5 else ([1.0, 2.0] if score == 1.0 else [2.0, 1.0])
        [[new_a], [new_b]] = model.rate([[current[a]], [current[b]]], ranks=ranks)
        current[a], current[b] = new_a, new_b
    return {name: Rating(mu=r.mu, sigma=r.sigma, ordinal=r.ordinal(z=ORDINAL_Z))
            for name, r in current.items()}
