"""Paired comparison of two runs on the episodes they share (``moria compare``).

Moria derives every episode's seed from the run seed, env, task and index, so two runs with
the same ``eval.seed`` play the same games: an episode of run A and one of run B with the same
(env, task, seed) differ only by who played. Pairing them removes the game-to-game variance
that dominates progression, so a paired test sees differences an unpaired one misses.

For each env, over its pairs (both episodes scored; failed episodes are never results):

- ``mean_difference``: the mean of B's progression minus A's, in percentage points;
- ``ci95``: a 95% bootstrap interval of that mean (``scipy.stats.bootstrap``, percentile
  method, ``N_RESAMPLES`` resamples of the pairs, seeded with ``BOOTSTRAP_SEED``, so the same
  runs give the same interval);
- ``p_value``: the two-sided Wilcoxon signed-rank test of the differences
  (``scipy.stats.wilcoxon``; pairs with equal progression are dropped, as in Wilcoxon's
  original test; None when every pair is equal, which no test can reject);
- ``b_better``, ``ties``, ``a_better``: the pairs each way.

Overall, as BALROG averages its envs: the mean of the per-env mean differences, its interval
from a bootstrap that resamples each env's pairs apart (stratified), and the signed-rank test
of every pair pooled.

The runs must measure the same thing: ``setting_differences`` names what differs between their
specs (protocol, step cap, env options, run seed) and the episodes' protocols; ``moria
compare`` refuses such runs unless told ``--allow-different``.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from moria.records import EpisodeRecord
from moria.results import Run

#: Resamples of each bootstrap.
N_RESAMPLES: Final = 10_000
#: Seed of the bootstrap's generator (fixed: a comparison is reproducible).
BOOTSTRAP_SEED: Final = 0
#: Confidence level of the intervals.
CONFIDENCE: Final = 0.95

Pair = tuple[EpisodeRecord, EpisodeRecord]


@dataclass
class PairedFigures:
    """The paired statistics of one env (or ``overall``); progressions in percent."""

    name: str
    n: int
    mean_a: float | None
    mean_b: float | None
    mean_difference: float | None
    ci95: tuple[float, float] | None
    p_value: float | None
    b_better: int = 0
    ties: int = 0
    a_better: int = 0

    def as_json(self) -> dict[str, Any]:
        """A JSON-able dict of the figures."""
        return {"name": self.name, "n": self.n, "mean_a": self.mean_a, "mean_b": self.mean_b,
                "mean_difference": self.mean_difference,
                "ci95": list(self.ci95) if self.ci95 else None, "p_value": self.p_value,
                "b_better": self.b_better, "ties": self.ties, "a_better": self.a_better}


@dataclass
class Comparison:
    """``compare_runs``'s answer: per env and overall figures, the differences in setting
    found, and the episodes of each run that have no partner."""

    envs: list[PairedFigures]
    overall: PairedFigures
    differences: list[str] = field(default_factory=list)
    unpaired_a: int = 0
    unpaired_b: int = 0


def pairs_by_env(a: list[EpisodeRecord], b: list[EpisodeRecord]) -> dict[str, list[Pair]]:
    """{env: [(A's episode, B's episode)]} of the scored episodes both runs hold for the same
    (env, task, seed), sorted by task and seed."""
    by_key = {(e.env, e.task, e.seed): e for e in b if e.scored}
    out: dict[str, list[Pair]] = {}
    for first in sorted((e for e in a if e.scored), key=lambda e: (e.env, e.task, e.seed)):
        second = by_key.get((first.env, first.task, first.seed))
        if second is not None:
            out.setdefault(first.env, []).append((first, second))
    return out


def differences_of(pairs: list[Pair]) -> list[float]:
    """B's progression minus A's, per pair, in percentage points."""
    return [100.0 * (second.progression - first.progression) for first, second in pairs]


def _counts(diffs: list[float]) -> dict[str, int]:
    return {"b_better": sum(d > 0 for d in diffs), "ties": sum(d == 0 for d in diffs),
            "a_better": sum(d < 0 for d in diffs)}


def signed_rank_p(diffs: list[float]) -> float | None:
    """The two-sided Wilcoxon signed-rank p-value of ``diffs`` (zeros dropped); None when
    every difference is 0."""
    from scipy import stats

    if not any(diffs):
        return None
    return float(stats.wilcoxon(diffs, zero_method="wilcox", alternative="two-sided").pvalue)


def _mean_of_means(*samples: Any, axis: int = -1) -> Any:
    """The mean over samples of each sample's mean (vectorised over ``axis`` for scipy)."""
    import numpy as np

    return np.mean([np.mean(sample, axis=axis) for sample in samples], axis=0)


def bootstrap_interval(samples: list[list[float]]) -> tuple[float, float] | None:
    """The 95% percentile-bootstrap interval of the mean of the samples' means (one sample:
    its mean; several: each resampled apart). None when a sample has fewer than 2 values, or
    every value is the same (no spread to resample)."""
    import numpy as np
    from scipy import stats

    if not samples or any(len(sample) < 2 for sample in samples):
        return None
    if len({value for sample in samples for value in sample}) == 1:
        value = samples[0][0]
        return (value, value)
    result = stats.bootstrap(tuple(samples), _mean_of_means, n_resamples=N_RESAMPLES,
                             confidence_level=CONFIDENCE, method="percentile",
                             vectorized=True, paired=False,
                             rng=np.random.default_rng(BOOTSTRAP_SEED))
    return (float(result.confidence_interval.low), float(result.confidence_interval.high))


def env_figures(name: str, pairs: list[Pair]) -> PairedFigures:
    """The paired figures of one env's pairs."""
    diffs = differences_of(pairs)
    return PairedFigures(
        name=name, n=len(pairs),
        mean_a=100.0 * statistics.fmean(a.progression for a, _ in pairs) if pairs else None,
        mean_b=100.0 * statistics.fmean(b.progression for _, b in pairs) if pairs else None,
        mean_difference=statistics.fmean(diffs) if diffs else None,
        ci95=bootstrap_interval([diffs]), p_value=signed_rank_p(diffs), **_counts(diffs))


def overall_figures(by_env: Mapping[str, list[Pair]], envs: list[PairedFigures]
                    ) -> PairedFigures:
    """The overall figures: the mean of the per-env means (A's, B's and the differences),
    the stratified bootstrap interval and the pooled signed-rank test."""
    samples = [differences_of(pairs) for pairs in by_env.values() if pairs]
    pooled = [d for sample in samples for d in sample]
    scored = [f for f in envs if f.n]

    def mean_of(values: list[float | None]) -> float | None:
        kept = [v for v in values if v is not None]
        return statistics.fmean(kept) if kept else None

    return PairedFigures(
        name="overall", n=len(pooled), mean_a=mean_of([f.mean_a for f in scored]),
        mean_b=mean_of([f.mean_b for f in scored]),
        mean_difference=mean_of([f.mean_difference for f in scored]),
        ci95=bootstrap_interval(samples), p_value=signed_rank_p(pooled), **_counts(pooled))


#: The spec settings two compared runs must share: (description, path in the spec).
_SETTINGS: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("protocol (agent.protocol)", ("agent", "protocol")),
    ("step cap (eval.max_steps_per_episode)", ("eval", "max_steps_per_episode")),
    ("run seed (eval.seed)", ("eval", "seed")),
    ("invalid-action feedback (eval.feedback_on_invalid_action)",
     ("eval", "feedback_on_invalid_action")),
)


def _get(spec: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = spec
    for key in path:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def setting_differences(a: Run, b: Run, envs: list[str]) -> list[str]:
    """What differs between the two runs' settings, one line each: the episodes' protocols,
    the specs' settings of ``_SETTINGS`` and each env's options (``envs.<env>_kwargs``) of
    ``envs``. Empty when they measure the same thing."""
    out = []
    if a.protocol != b.protocol:
        out.append(f"protocol of the episodes: {a.protocol} vs {b.protocol}")
    for label, path in _SETTINGS:
        first, second = _get(a.spec, path), _get(b.spec, path)
        if first != second and not (label.startswith("protocol") and a.protocol != b.protocol):
            out.append(f"{label}: {first!r} vs {second!r}")
    for env in envs:
        path = ("envs", f"{env}_kwargs")
        first, second = _get(a.spec, path) or {}, _get(b.spec, path) or {}
        if first != second:
            out.append(f"env options (envs.{env}_kwargs): {first!r} vs {second!r}")
    return out


def compare_runs(a: Run, b: Run) -> Comparison:
    """Pair the two runs' episodes and compute the figures (``Comparison``). Raises
    ImportError without scipy."""
    by_env = pairs_by_env(a.episodes, b.episodes)
    envs = [env_figures(env, pairs) for env, pairs in sorted(by_env.items())]
    paired = sum(len(p) for p in by_env.values())
    all_envs = sorted({e.env for e in a.episodes} | {e.env for e in b.episodes})
    return Comparison(
        envs=envs, overall=overall_figures(by_env, envs),
        differences=setting_differences(a, b, all_envs),
        unpaired_a=sum(e.scored for e in a.episodes) - paired,
        unpaired_b=sum(e.scored for e in b.episodes) - paired)
