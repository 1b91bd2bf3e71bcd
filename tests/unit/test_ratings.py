"""Tournament statistics: win rates (draw = half), Wilson intervals and openskill ratings."""

from __future__ import annotations

import pytest

from orchestrator.report.ratings import ORDINAL_Z, rate_games, wilson_interval, win_rate


def test_wilson_interval_matches_known_values() -> None:
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=5e-4)
    assert high == pytest.approx(0.9433, abs=5e-4)
    # all or nothing: the interval touches 0 or 1 and its other end is z^2 / (n + z^2) away
    assert wilson_interval(0, 10) == pytest.approx((0.0, 0.2775), abs=5e-4)
    assert wilson_interval(10, 10) == pytest.approx((0.7225, 1.0), abs=5e-4)
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=5e-4)


def test_wilson_interval_is_symmetric_and_contains_the_rate() -> None:
    for games in (1, 3, 8, 40):
        for half_points in range(2 * games + 1):
            score = half_points / 2
            low, high = wilson_interval(score, games)
            assert 0.0 <= low <= score / games <= high <= 1.0
            mirror_low, mirror_high = wilson_interval(games - score, games)
            assert low == pytest.approx(1 - mirror_high)
            assert high == pytest.approx(1 - mirror_low)


def test_wilson_interval_without_games_and_bad_input() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="score"):
        wilson_interval(11, 10)
    with pytest.raises(ValueError, match="games"):
        wilson_interval(0, -1)
    with pytest.raises(ValueError, match="z"):
        wilson_interval(1, 2, z=0)


def test_draws_count_half() -> None:
    assert win_rate(2, 2, 0) == 0.75
    assert win_rate(0, 4, 0) == 0.5
    assert win_rate(1, 1, 2) == pytest.approx(0.375)
    assert win_rate(0, 0, 0) is None
    with pytest.raises(ValueError):
        win_rate(-1, 0, 0)


def test_the_player_who_always_wins_ends_with_the_highest_mu() -> None:
    games = []
    for _ in range(6):  # a beats b and c; b and c draw
        games += [("a", "b", 1.0), ("c", "a", 0.0), ("b", "c", 0.5)]
    ratings = rate_games(["a", "b", "c"], games)
    assert ratings["a"].mu > max(ratings["b"].mu, ratings["c"].mu)
    assert ratings["a"].ordinal > max(ratings["b"].ordinal, ratings["c"].ordinal)
    assert ratings["a"].mu > 25.0 > ratings["b"].mu
    for rating in ratings.values():
        assert rating.ordinal == pytest.approx(rating.mu - ORDINAL_Z * rating.sigma)
        assert rating.sigma < 25.0 / 3.0  # every player learned something


def test_a_draw_between_equals_keeps_mu_and_shrinks_sigma() -> None:
    ratings = rate_games(["a", "b"], [("a", "b", 0.5)])
    assert ratings["a"].mu == pytest.approx(25.0)
    assert ratings["b"].mu == pytest.approx(25.0)
    assert ratings["a"].sigma < 25.0 / 3.0


def test_a_player_without_games_keeps_the_prior() -> None:
    ratings = rate_games(["a", "b", "idle"], [("a", "b", 1.0)])
    assert ratings["idle"].mu == 25.0
    assert ratings["idle"].sigma == pytest.approx(25.0 / 3.0)
    assert ratings["idle"].ordinal == pytest.approx(0.0)


def test_the_same_order_gives_identical_ratings_and_order_matters() -> None:
    games = [("a", "b", 1.0), ("b", "c", 0.5), ("c", "a", 1.0), ("a", "b", 0.0),
             ("a", "c", 1.0), ("b", "c", 1.0)]
    first = rate_games(["a", "b", "c"], games)
    assert rate_games(["a", "b", "c"], list(games)) == first  # exact, not approximate
    # online updates depend on the order, which is why the tournament fixes it
    assert rate_games(["a", "b", "c"], games[::-1]) != first
    win_then_loss = rate_games(["a", "b"], [("a", "b", 1.0), ("a", "b", 0.0)])
    loss_then_win = rate_games(["a", "b"], [("a", "b", 0.0), ("a", "b", 1.0)])
    assert win_then_loss["a"].mu != pytest.approx(win_then_loss["b"].mu)
    assert win_then_loss["a"].mu == pytest.approx(loss_then_win["b"].mu)


def test_rate_games_rejects_bad_games() -> None:
    with pytest.raises(ValueError, match="unknown"):
        rate_games(["a", "b"], [("a", "z", 1.0)])
    with pytest.raises(ValueError, match="itself"):
        rate_games(["a", "b"], [("a", "a", 1.0)])
    with pytest.raises(ValueError, match="score"):
        rate_games(["a", "b"], [("a", "b", 2.0)])
