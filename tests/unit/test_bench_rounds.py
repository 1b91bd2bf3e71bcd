"""The alternated rounds of the side-by-side benchmark figures (benchmarks/rounds.py): every
round measures once, in order; the median and each round's value are what gets reported."""

from __future__ import annotations

import itertools

import pytest

from benchmarks import rounds


def test_alternate_measures_once_per_round_in_order() -> None:
    counter = itertools.count()
    rows = rounds.alternate(lambda: {"n": next(counter)}, 3)
    assert [row["n"] for row in rows] == [0, 1, 2]


def test_alternate_refuses_fewer_than_one_round() -> None:
    with pytest.raises(ValueError, match="rounds must be >= 1, got 0"):
        rounds.alternate(lambda: {}, 0)


def test_median_and_spread_of_a_ratio() -> None:
    rows = [{"ratio": 0.2}, {"ratio": 0.45}, {"ratio": 0.31}]
    assert rounds.median(rows, "ratio") == 0.31
    assert rounds.spread(rows, "ratio") == [0.2, 0.45, 0.31]
    assert rounds.median([{"ratio": 1.0}, {"ratio": 2.0}], "ratio") == 1.5


def test_median_by_role_takes_each_role_apart() -> None:
    rows = [{"cpu": {"client": 300.0, "server": 700.0, "game_workers": 800.0}},
            {"cpu": {"client": 250.0, "server": 500.0, "game_workers": 900.0}},
            {"cpu": {"client": 350.0, "server": 600.0, "game_workers": 1100.0}}]
    assert rounds.median_by_role(rows, "cpu") == {
        "client": 300.0, "server": 600.0, "game_workers": 900.0}
