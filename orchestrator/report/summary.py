"""A run's figures from its episode files: per-env and run summaries, ``report.json``.

Files written (beside the episode files of ``orchestrator.store.episodes``)::

    <out>/<env>/<env>_summary.json
    <out>/summary.json
    <out>/report.json                                 the MOSAIC domain-harness report

**Scoring.** Only episodes whose ``end_reason`` is ``terminated`` or ``truncated`` are scored.
``agent_error``, ``env_error``, ``cancelled`` and ``budget_exhausted`` episodes are counted
separately (``end_reasons``, ``agent_error_episodes``), EXCLUDED from progression averages and
``episodes_played``, and re-run on resume (BALROG has no such faults: it skips any episode
whose JSON exists). Token totals include every episode, because those tokens were spent.
"""

from __future__ import annotations

import json
import logging
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from moria.files import atomic_write_text
from moria.records import (
    DEFAULT_PROTOCOL,
    END_REASONS,
    SCORED_END_REASONS,
    EpisodeRecord,
)
from orchestrator.report.accounting import PriceTable, load_prices, merge_usage, priced
from orchestrator.report.match_report import match_summary
from orchestrator.report.outcome import verdict
from orchestrator.store.episodes import (
    load_episodes,
    planned_from_run_file,
    safe_name,
)
from orchestrator.store.telemetry import dumps, scrub

logger = logging.getLogger(__name__)


TOKEN_FIELDS: Final[tuple[str, ...]] = (
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "reasoning_tokens",
)


REPORT_ENV_KEYS: Final[tuple[str, ...]] = (
    "progression_percentage",
    "standard_error",
    "episodes_played",
)


_PROTECTED_SUMMARY_KEYS: Final[frozenset[str]] = frozenset(
    {"average_progress", "standard_error", "environments", "outcome"}
)


# -- summaries ---------------------------------------------------------------------------------
def progression_stats(progressions: Iterable[float]) -> tuple[float | None, float | None]:
    """``(percentage, standard_error)`` of per-episode progressions in [0, 1], both x 100.

    The SE is BALROG's: population standard deviation divided by sqrt(n). E.g. ``[1, 0, 1, 1]``
    -> ``(75.0, 21.65...)``. An empty input gives ``(None, None)``.
    """
    values = [float(v) for v in progressions]
    if not values:
        return None, None
    mean = statistics.fmean(values)
    se = statistics.pstdev(values, mu=mean) / math.sqrt(len(values))
    return 100.0 * mean, 100.0 * se


def _token_totals(episodes: Iterable[EpisodeRecord]) -> dict[str, int]:
    totals = dict.fromkeys(TOKEN_FIELDS, 0)
    for e in episodes:
        for name in TOKEN_FIELDS:
            totals[name] += getattr(e, name)
    return totals


def _reason_counts(episodes: Iterable[EpisodeRecord]) -> dict[str, int]:
    counts: Counter[str] = Counter(e.end_reason for e in episodes)
    return {reason: counts.get(reason, 0) for reason in END_REASONS}


def invalid_action_counts(episodes: Iterable[EpisodeRecord]) -> dict[str, Any]:
    """``{"actions", "invalid_actions", "invalid_action_rate"}`` over every recorded agent
    turn of ``episodes``: turns, turns whose answer held no valid action (the env's default
    action was applied instead; ``StepRecord.valid`` False), and their ratio in [0, 1] (None
    when no turn was recorded)."""
    actions = invalid = 0
    for episode in episodes:
        actions += len(episode.steps)
        invalid += sum(1 for step in episode.steps if not step.valid)
    return {"actions": actions, "invalid_actions": invalid,
            "invalid_action_rate": invalid / actions if actions else None}


def seat_players(episodes: Iterable[EpisodeRecord]) -> list[str]:
    """Who played the seats of the multi-agent episodes among ``episodes``, each once, sorted
    (``EpisodeRecord.players[agent_id]["player"]``: ``"rl"``, ``"naive local/qwen"``); empty
    for single-agent episodes."""
    return sorted({str(seat["player"]) for episode in episodes
                   for seat in episode.players.values() if seat.get("player")})


def _group_figures(episodes: list[EpisodeRecord], prices: PriceTable) -> dict[str, Any]:
    scored = [e for e in episodes if e.scored]
    pct, se = progression_stats(e.progression for e in scored)
    reasons = _reason_counts(episodes)
    costs = priced(merge_usage(e.usage_by_model for e in episodes), prices)
    return {
        "progression_percentage": pct,
        "standard_error": se,
        "episodes_played": len(scored),
        "average_steps": statistics.fmean(e.num_steps for e in scored) if scored else None,
        **_token_totals(episodes),
        "end_reasons": reasons,
        "agent_error_episodes": reasons["agent_error"],
        "episodes_total": len(episodes),
        **invalid_action_counts(episodes),
        **model_call_counts(episodes),
        "cost_usd": costs["cost_usd"],
        "models": costs["models"],
        "seat_players": seat_players(episodes),
    }


def model_call_counts(episodes: Iterable[EpisodeRecord]) -> dict[str, int]:
    """``{"model_calls", "model_retries"}`` over the steps of ``episodes``: turns answered
    by a model call (``StepRecord.attempts`` >= 1; non-model players record 0) and the retries
    those calls needed (the sum of ``attempts - 1``), so requests sent = calls + retries."""
    calls = retries = 0
    for episode in episodes:
        for step in episode.steps:
            if step.attempts >= 1:
                calls += 1
                retries += step.attempts - 1
    return {"model_calls": calls, "model_retries": retries}


def env_summary(
    env: str, episodes: list[EpisodeRecord], prices: PriceTable | None = None
) -> dict[str, Any]:
    """The ``<env>_summary.json`` content for ``env`` from its episodes (others are ignored).

    Keys: ``env``, ``progression_percentage`` and ``standard_error`` (percent; None when no
    scored episode), ``episodes_played`` (scored episodes), ``average_steps``, the four token
    totals, ``end_reasons`` (count per reason), ``agent_error_episodes``, ``episodes_total``,
    ``model_calls`` and ``model_retries`` (see ``model_call_counts``), ``cost_usd`` (None
    when no model is priced) and ``models`` ({model: calls, tokens, latency_s, cost_usd}), and
    ``tasks``: {task: the same figures per task}. As in BALROG, the env figures pool all
    episodes of the env (the SE is over episodes, not over task means).
    ``prices`` defaults to the shipped price table.
    """
    prices = prices or load_prices()
    mine = [e for e in episodes if e.env == env]
    tasks = sorted({e.task for e in mine})
    return {
        "env": env,
        **_group_figures(mine, prices),
        "tasks": {t: _group_figures([e for e in mine if e.task == t], prices) for t in tasks},
    }


def _distinct(values: Iterable[Any]) -> list[Any]:
    distinct: list[Any] = []
    for value in values:
        if value not in distinct:
            distinct.append(value)
    return distinct


def _distinct_configs(configs: Iterable[dict[str, Any]]) -> dict[str, Any] | list[dict[str, Any]]:
    distinct: list[dict[str, Any]] = _distinct(configs)
    if len(distinct) <= 1:
        return distinct[0] if distinct else {}
    return distinct


def _one_or_list(values: list[Any]) -> Any:
    """None for no value, the value for one, the list for several."""
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def _instruction_hashes(episodes: list[EpisodeRecord]) -> dict[str, list[str]]:
    hashes: dict[str, set[str]] = {}
    for e in episodes:
        digest = e.protocol.get("instruction_sha256")
        if digest:
            hashes.setdefault(e.env, set()).add(str(digest))
    return {env: sorted(found) for env, found in sorted(hashes.items())}


def protocol_summary(episodes: list[EpisodeRecord]) -> dict[str, Any]:
    """The ``protocol`` section of ``summary.json``: under which prompting protocol ``episodes``
    were made (from each ``EpisodeRecord.protocol``; an empty one is Moria's own).

    Keys: ``name``: ``"moria"`` or ``"balrog"`` when every episode shares it (``"moria"`` for no
    episode), else ``"mixed"``, which must never be compared with BALROG's leaderboard;
    ``balrog_commit``: the commit, a list of the distinct commits when several, None when no
    episode names one; ``instruction_sha256``: {env: sorted distinct instruction hashes} (envs
    without any are left out); ``generation``: the generation settings shared by the episodes,
    a list of the distinct ones, or None; ``protocol_check``: the first non-empty
    ``protocol_check`` of the episodes ({} when none). Never raises.
    """
    names = _distinct(e.protocol_name for e in episodes) or [DEFAULT_PROTOCOL]
    checks = [e.protocol["protocol_check"] for e in episodes if e.protocol.get("protocol_check")]
    return {
        "name": names[0] if len(names) == 1 else "mixed",
        "balrog_commit": _one_or_list(_distinct(
            e.protocol["balrog_commit"] for e in episodes if e.protocol.get("balrog_commit"))),
        "instruction_sha256": _instruction_hashes(episodes),
        "generation": _one_or_list(_distinct(
            e.protocol["generation"] for e in episodes if "generation" in e.protocol)),
        "protocol_check": checks[0] if checks else {},
    }


def compute_summary(
    episodes: list[EpisodeRecord],
    envs: list[str] | None = None,
    prices: PriceTable | None = None,
    planned: Iterable[tuple[str, str, int]] | None = None,
) -> dict[str, Any]:
    """The ``summary.json`` content (without ``extra``), computed from ``episodes``.

    ``envs`` picks and orders the environments (default: every env seen, sorted); a listed env
    without scored episodes gets None figures and is left out of the averages (and named in
    ``environments_without_scores``). ``average_progress`` is the plain mean of the per-env
    percentages; ``standard_error`` is sqrt(sum of per-env SE^2) / number of envs, as in BALROG.
    ``agent``/``client`` hold the config shared by the episodes, or a list of the distinct ones.
    ``models`` totals usage and cost per model over the whole run; ``cost_usd`` is their sum
    (None when no model is priced; ``unpriced_models`` lists the ones left out) and ``prices``
    names the price table and the date of its prices (default: the shipped table).
    ``matches`` holds the per-team/per-seat rows of multi-agent games
    (``orchestrator.report.match_report.match_summary``). ``outcome`` is the run's verdict
    (``orchestrator.report.outcome.verdict`` over ``planned``, the run's planned episode keys; None:
    the episodes found are the plan). ``protocol``: the prompting protocol of the episodes
    (``protocol_summary``); BALROG's leaderboard is only comparable when its ``name`` is
    ``"balrog"``. Each env's ``episodes_total`` counts its episode records, scored or not.
    """
    prices = prices or load_prices()
    names = list(envs) if envs is not None else sorted({e.env for e in episodes})
    chosen = [e for e in episodes if e.env in set(names)]
    per_env = {env: env_summary(env, chosen, prices) for env in names}
    costs = priced(merge_usage(e.usage_by_model for e in chosen), prices)
    scored_envs = [s for s in per_env.values() if s["progression_percentage"] is not None]
    if scored_envs:
        average: float | None = statistics.fmean(s["progression_percentage"] for s in scored_envs)
        se_sq = sum(s["standard_error"] ** 2 for s in scored_envs)
        standard_error: float | None = math.sqrt(se_sq) / len(scored_envs)
    else:
        average = standard_error = None
    totals = _token_totals(chosen)
    scored = [e for e in chosen if e.scored]
    return {
        "average_progress": average,
        "standard_error": standard_error,
        "environments": per_env,
        "environments_without_scores": [
            env for env, s in per_env.items() if s["progression_percentage"] is None
        ],
        "episodes_played": sum(s["episodes_played"] for s in per_env.values()),
        "episodes_total": len(chosen),
        "average_steps": statistics.fmean(e.num_steps for e in scored) if scored else None,
        "end_reasons": _reason_counts(chosen),
        **model_call_counts(chosen),
        **totals,
        "total_tokens": totals["input_tokens"] + totals["output_tokens"],
        "models": costs["models"],
        "cost_usd": costs["cost_usd"],
        "unpriced_models": costs["unpriced_models"],
        "prices": prices.describe(),
        "agent": _distinct_configs(e.agent_config for e in chosen),
        "seat_players": seat_players(chosen),
        "client": _distinct_configs(e.client_config for e in chosen),
        "task_dir_layout": "flat: '/' in task names replaced by '__'",
        "scored_end_reasons": sorted(SCORED_END_REASONS),
        "matches": match_summary(chosen),
        **invalid_action_counts(chosen),
        "outcome": verdict(chosen, planned).as_json(),
        "protocol": protocol_summary(chosen),
    }


def report_document(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The MOSAIC ``report.json``: exactly ``average_progress``, ``standard_error`` and
    ``environments`` -> {env: {progression_percentage, standard_error, episodes_played}}.
    """
    return {
        "average_progress": summary["average_progress"],
        "standard_error": summary["standard_error"],
        "environments": {
            env: {key: figures[key] for key in REPORT_ENV_KEYS}
            for env, figures in summary["environments"].items()
        },
    }


def previous_extra(out_dir: str | Path) -> dict[str, Any]:
    """The run facts (run id, versions, seed, env options) an existing ``summary.json`` holds
    beyond the computed figures, so recomputing the summary keeps them; {} when unreadable."""
    try:
        previous = json.loads((Path(out_dir) / "summary.json").read_text())
    except (OSError, ValueError):
        return {}
    computed = set(compute_summary([]))
    return {k: v for k, v in previous.items() if k not in computed}


def summarize(
    out_dir: str | Path,
    *,
    envs: list[str] | None = None,
    extra: dict[str, Any] | None = None,
    prices: PriceTable | None = None,
    planned: Iterable[tuple[str, str, int]] | None = None,
) -> dict[str, Any]:
    """Recompute and atomically write all summaries from the episode files; return summary.json.

    ``planned``: the run's planned episode keys, for the ``outcome`` verdict (None: the
    ``spec`` in ``<out>/run.json`` when there is one, else the episodes found).

    Writes ``<out>/<env>/<env>_summary.json`` per env, ``<out>/summary.json`` (``compute_summary``
    plus ``extra`` merged in, e.g. versions and the run seed) and ``<out>/report.json``
    (``report_document``). Scoring follows the module docstring: agent_error (and env_error,
    cancelled) episodes are counted separately and EXCLUDED from progression averages.
    Everything written is scrubbed of secrets.

    Raises ``FileNotFoundError`` if ``out_dir`` does not exist, ``ValueError`` if ``extra`` tries
    to override ``average_progress``, ``standard_error`` or ``environments``.
    """
    root = Path(out_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"results directory {root} does not exist")
    extra = dict(extra or {})
    clash = _PROTECTED_SUMMARY_KEYS.intersection(extra)
    if clash:
        raise ValueError(f"extra may not override computed summary keys: {sorted(clash)}")
    summary: dict[str, Any] = scrub(
        {**compute_summary(load_episodes(root), envs, prices,
                           planned if planned is not None else planned_from_run_file(root)),
         **extra}
    )
    for env, figures in summary["environments"].items():
        atomic_write_text(
            root / safe_name(env) / f"{safe_name(env)}_summary.json", dumps(figures, indent=2)
        )
    atomic_write_text(root / "summary.json", dumps(summary, indent=2))
    atomic_write_text(root / "report.json", dumps(report_document(summary), indent=2))
    return summary
