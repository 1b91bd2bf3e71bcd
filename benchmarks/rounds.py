"""Alternated rounds of a side-by-side measurement, and their medians.

On these machines one path can run 1.5x slower than a minute before (docs/performance.md, "How
noisy these machines are"), so a ratio taken from one measurement of each side moves with the
moment it was taken. A figure measured in ``rounds`` alternated rounds (each round measures
every side once, in the same order) is reported as the median of the per-round values, with
each round's value beside it, so a reader sees the spread.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def alternate(measure: Callable[[], Mapping[str, Any]], rounds: int) -> list[Mapping[str, Any]]:
    """``measure()`` called ``rounds`` times in a row (each call measures every side once);
    the rounds' figures in order. Raises ValueError when ``rounds`` < 1."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    return [measure() for _ in range(rounds)]


def median(rows: Sequence[Mapping[str, Any]], key: str, digits: int = 3) -> float:
    """The median of ``row[key]`` over ``rows``, rounded to ``digits``."""
    return round(float(statistics.median(float(row[key]) for row in rows)), digits)


def spread(rows: Sequence[Mapping[str, Any]], key: str, digits: int = 3) -> list[float]:
    """Each round's ``row[key]``, in order, rounded to ``digits``."""
    return [round(float(row[key]), digits) for row in rows]


def median_by_role(rows: Sequence[Mapping[str, Mapping[str, float]]], key: str,
                   ) -> dict[str, float]:
    """For figures that are a ``{role: value}`` dict under ``key`` with the same roles in every
    round: the median of each role over the rounds, rounded to 0.1."""
    return {role: round(float(statistics.median(row[key][role] for row in rows)), 1)
            for role in rows[0][key]}
