r"""Result files of a run: per-episode JSON/CSV, per-env and run summaries, report, resume.

Layout (a superset of BALROG's)::

    <out>/<env>/<task_dir>/<task_dir>_run_<NN>.json   one per episode (NN: 2+ digit index)
    <out>/<env>/<task_dir>/<task_dir>_run_<NN>.csv    its trajectory
    <out>/<env>/<env>_summary.json
    <out>/summary.json
    <out>/report.json                                 the MOSAIC domain-harness report

**Task directory names.** BALROG nests a folder per "/" in a task name
(``babyai/BabyAI-MixedTrainLocal-v0/goto/goto_run_00.json``). We instead use one *flat, safe* name:
every "/" (and "\\") becomes ``"__"``, so ``BabyAI-MixedTrainLocal-v0/goto`` is stored as
``babyai/BabyAI-MixedTrainLocal-v0__goto/BabyAI-MixedTrainLocal-v0__goto_run_00.json``. The
original task name is kept in the file (``"task"``), and everything here reads names from the
files, never from paths.

**Atomicity.** Every file goes through ``moria.files.atomic_write_text`` (temp file in the same
directory, fsync, ``os.replace``), so readers see the old or the new file, never a partial one.
An episode's CSV is written before its JSON, so an episode JSON marks a complete episode.

**Scoring.** Only episodes whose ``end_reason`` is ``terminated`` or ``truncated`` are scored.
``agent_error``, ``env_error`` and ``cancelled`` episodes are counted separately (``end_reasons``,
``agent_error_episodes``), EXCLUDED from progression averages and ``episodes_played``, and re-run
on resume (BALROG has no such faults: it skips any episode whose JSON exists). Token totals
include every episode, because those tokens were spent.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from moria.files import atomic_write_text
from orchestrator.accounting import PriceTable, load_prices, merge_usage, priced
from orchestrator.match_report import match_summary, render_match_tables
from orchestrator.outcome import verdict
from orchestrator.records import (
    DEFAULT_PROTOCOL,
    END_REASONS,
    SCORED_END_REASONS,
    EpisodeRecord,
)
from orchestrator.telemetry import dumps, scrub

logger = logging.getLogger(__name__)

#: CSV trajectory columns: BALROG's six, then ours.
CSV_COLUMNS: Final[tuple[str, ...]] = (
    "Step",
    "Action",
    "Reasoning",
    "Observation",
    "Reward",
    "Done",
    "RawCompletion",
    "Valid",
)
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
_FORMAT_VERSION: Final[int] = 1
_PROTECTED_SUMMARY_KEYS: Final[frozenset[str]] = frozenset(
    {"average_progress", "standard_error", "environments", "outcome"}
)


def safe_name(name: str) -> str:
    r"""The flat directory/file name used for an env or task: "/" and "\\" become ``"__"``.

    ``"BabyAI-MixedTrainLocal-v0/goto"`` -> ``"BabyAI-MixedTrainLocal-v0__goto"``. Raises
    ``ValueError`` for an empty name or one that maps to ``"."``/``".."``.
    """
    flat = name.replace("/", "__").replace("\\", "__")
    if flat in ("", ".", ".."):
        raise ValueError(f"not usable as a file name: {name!r}")
    return flat


def episode_paths(
    out_dir: str | Path, env: str, task: str, episode_index: int
) -> tuple[Path, Path]:
    """``(json_path, csv_path)`` of one episode: ``<out>/<env>/<td>/<td>_run_<NN>.{json,csv}``."""
    task_dir = safe_name(task)
    stem = f"{task_dir}_run_{episode_index:02d}"
    base = Path(out_dir) / safe_name(env) / task_dir
    return base / f"{stem}.json", base / f"{stem}.csv"


def prompts_path(json_path: Path) -> Path:
    """Where an episode's saved prompts go: its JSON path with ``.prompts.jsonl``. Each line is
    ``{"step", "agent_id", "model", "prompt": [{"role", "content", "images": [sha256]}]}``."""
    return json_path.with_name(json_path.stem + ".prompts.jsonl")


def episode_document(record: EpisodeRecord) -> dict[str, Any]:
    """The episode JSON as a dict: BALROG's keys first, then ours, secrets scrubbed.

    BALROG keys: ``task`` (original name), ``action_frequency``, ``input_tokens``,
    ``output_tokens``, ``done``, ``episode_return``, ``num_steps``, ``failed_candidates``,
    ``progression`` (top level, as BALROG merges the env stats there) and ``stats`` (which also
    holds ``progression``), ``seed``, ``agent`` and ``client`` (configs). Ours: format_version,
    run_id, env, episode_index, task_dir, end_reason, error, cached/reasoning tokens, versions,
    ``protocol`` (the prompting protocol, ``EpisodeRecord.protocol``; {} in files written
    before it existed, which means Moria's own), timestamps, wall_time_s, ``attempts`` and
    ``retry_errors`` (re-queues after server faults) and the ``steps`` trajectory.
    """
    data = record.model_dump(mode="json")
    stats = {**data["stats"], "progression": record.progression}
    doc: dict[str, Any] = {
        "task": record.task,
        "action_frequency": data["action_frequency"],
        "input_tokens": record.input_tokens,
        "output_tokens": record.output_tokens,
        "done": record.done,
        "episode_return": record.episode_return,
        "num_steps": record.num_steps,
        "failed_candidates": data["failed_candidates"],
        "progression": record.progression,
        "stats": stats,
        "seed": record.seed,
        "agent": data["agent_config"],
        "client": data["client_config"],
        "format_version": _FORMAT_VERSION,
        "run_id": record.run_id,
        "env": record.env,
        "episode_index": record.episode_index,
        "task_dir": safe_name(record.task),
        "end_reason": record.end_reason,
        "error": record.error,
        "cached_input_tokens": record.cached_input_tokens,
        "reasoning_tokens": record.reasoning_tokens,
        "usage_by_model": data["usage_by_model"],
        "players": data["players"],
        "versions": data["versions"],
        "protocol": data["protocol"],
        "started_at": record.started_at,
        "ended_at": record.ended_at,
        "wall_time_s": record.wall_time_s,
        "attempts": record.attempts,
        "retry_errors": data["retry_errors"],
        "steps": data["steps"],
    }
    scrubbed: dict[str, Any] = scrub(doc)
    return scrubbed


def trajectory_csv(record: EpisodeRecord) -> str:
    """The CSV trajectory text: header ``CSV_COLUMNS``, one row per step (RFC 4180 quoting)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    for s in record.steps:
        writer.writerow(
            [
                s.step,
                s.action,
                s.reasoning,
                s.observation,
                s.reward,
                s.done,
                s.raw_completion,
                s.valid,
            ]
        )
    return buffer.getvalue()


def write_episode(out_dir: str | Path, record: EpisodeRecord) -> tuple[Path, Path]:
    """Write one episode's CSV then JSON atomically; return ``(json_path, csv_path)``.

    Reproduces BALROG's per-episode ``<task>_run_<NN>.json``/``.csv`` (with the flat task
    directory described in the module docstring). Agent/client config and every other field are
    passed through ``scrub``, so API keys never land on disk. Overwrites an earlier attempt of
    the same episode. With saved prompts (``eval.save_prompts``) they go first, one JSON line
    per model call, to ``<task_dir>_run_<NN>.prompts.jsonl`` (see ``prompts_path``). Raises
    ``OSError`` on I/O failure.
    """
    json_path, csv_path = episode_paths(out_dir, record.env, record.task, record.episode_index)
    if record.prompts:
        lines = (dumps(scrub(p)) for p in record.prompts)
        atomic_write_text(prompts_path(json_path), "\n".join(lines) + "\n")
    atomic_write_text(csv_path, trajectory_csv(record))
    atomic_write_text(json_path, dumps(episode_document(record), indent=2) + "\n")
    return json_path, csv_path


# -- reading / resume --------------------------------------------------------------------------
def _record_from_document(doc: Mapping[str, Any]) -> EpisodeRecord:
    fields = {k: doc[k] for k in EpisodeRecord.model_fields if k in doc}
    fields.setdefault("agent_config", doc.get("agent") or {})
    fields.setdefault("client_config", doc.get("client") or {})
    return EpisodeRecord.model_validate(fields)


def scan_episodes(out_dir: str | Path) -> tuple[list[EpisodeRecord], list[str]]:
    """Parse every ``<out>/*/*/*_run_*.json``; return ``(episodes, warnings)``.

    Episodes are sorted by ``(env, task, episode_index)``. Unreadable, partial or invalid files
    yield one warning string each and are otherwise ignored; never raises for bad files. A
    missing ``out_dir`` gives ``([], [])``.
    """
    root = Path(out_dir)
    episodes: list[EpisodeRecord] = []
    warnings: list[str] = []
    if not root.is_dir():
        return episodes, warnings
    for path in sorted(root.glob("*/*/*_run_*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(doc, dict):
                raise TypeError("top level is not a JSON object")
            episodes.append(_record_from_document(doc))
        except (OSError, TypeError, ValueError, ValidationError) as exc:  # incl. JSONDecodeError
            summary = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            warnings.append(f"ignoring unreadable episode file {path}: {summary}")
    episodes.sort(key=lambda e: e.key)
    return episodes, warnings


def load_episodes(out_dir: str | Path) -> list[EpisodeRecord]:
    """All readable episodes under ``out_dir`` (see ``scan_episodes``); bad files are logged."""
    episodes, warnings = scan_episodes(out_dir)
    for warning in warnings:
        logger.warning("%s", warning)
    return episodes


def completed_keys(out_dir: str | Path) -> set[tuple[str, str, int]]:
    """``{(env, task, episode_index)}`` of episodes that need not be re-run on resume.

    An episode is completed when its JSON exists, parses and its ``end_reason`` is
    ``terminated`` or ``truncated``; ``agent_error``/``env_error``/``cancelled`` episodes and
    corrupt files are left out so they are re-run (BALROG skips any existing JSON).
    """
    return {e.key for e in load_episodes(out_dir) if e.scored}


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
    (``orchestrator.match_report.match_summary``). ``outcome`` is the run's verdict
    (``orchestrator.outcome.verdict`` over ``planned``, the run's planned episode keys; None:
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


def planned_from_run_file(out_dir: str | Path) -> Iterator[tuple[str, str, int]] | None:
    """The planned episode keys of the run spec saved in ``<out>/run.json``; None when there
    is no readable spec (a directory not written by ``moria eval``)."""
    from orchestrator.spec import RunSpec  # spec imports this module's users; keep it lazy

    try:
        meta = json.loads((Path(out_dir) / "run.json").read_text(encoding="utf-8"))
        return RunSpec.model_validate(meta["spec"]).episodes()
    except (OSError, ValueError, KeyError, TypeError):
        return None


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


# -- console report ----------------------------------------------------------------------------
def _pct(figures: Mapping[str, Any]) -> str:
    pct, se = figures["progression_percentage"], figures["standard_error"]
    return "-" if pct is None else f"{pct:.1f} ± {se:.1f}"


def _steps(figures: Mapping[str, Any]) -> str:
    steps = figures.get("average_steps")
    return "-" if steps is None else f"{steps:.1f}"


def _errors(figures: Mapping[str, Any]) -> str:
    reasons = figures["end_reasons"]
    return str(sum(reasons[r] for r in ("agent_error", "env_error", "cancelled")))


def _invalid(figures: Mapping[str, Any]) -> str:
    rate = figures.get("invalid_action_rate")
    if rate is None:
        return "-"
    return f"{figures['invalid_actions']:,} ({100 * rate:.1f}%)"


def _row(name: str, task: str, figures: Mapping[str, Any]) -> list[str]:
    return [
        name,
        task,
        str(figures["episodes_played"]),
        _pct(figures),
        _steps(figures),
        f"{figures['input_tokens']:,}",
        f"{figures['output_tokens']:,}",
        _invalid(figures),
        _cost(figures),
        _errors(figures),
    ]


def _cost(figures: Mapping[str, Any]) -> str:
    if not figures.get("models"):
        return "-"  # no model call was made (dummy, oracle)
    cost = figures.get("cost_usd")
    return "unpriced" if cost is None else f"${cost:,.4f}"


def commit_label(commit: Any) -> str:
    """A ``balrog_commit`` value of a summary's ``protocol`` section as short text: the first
    12 characters of the commit, of each commit joined by ", " for a list, ``"unknown"`` for
    None or an empty value."""
    commits = commit if isinstance(commit, list) else [commit]
    return ", ".join(str(c)[:12] for c in commits if c) or "unknown"


def protocol_line(protocol: Mapping[str, Any] | None) -> str:
    """The one line ``moria report`` prints under its table about the run's protocol (the
    ``protocol`` section of ``summary.json``; None or {} is Moria's own protocol)::

        Protocol: balrog (BALROG commit <12 hex>; protocol-check: <status>)
        Protocol: moria (Moria's own prompts; not comparable with BALROG's leaderboard)
        Protocol: mixed - WARNING: ...

    ``<status>`` is ``protocol_check["status"]``, ``not run`` when there is none.
    """
    protocol = protocol or {}
    name = protocol.get("name") or DEFAULT_PROTOCOL
    if name == "balrog":
        status = (protocol.get("protocol_check") or {}).get("status") or "not run"
        return (f"Protocol: balrog (BALROG commit {commit_label(protocol.get('balrog_commit'))}; "
                f"protocol-check: {status})")
    if name == "moria":
        return "Protocol: moria (Moria's own prompts; not comparable with BALROG's leaderboard)"
    return (f"Protocol: {name} - WARNING: the episodes were played under different prompting "
            "protocols; these numbers are comparable with neither BALROG's leaderboard nor a "
            "single-protocol run")


def render_report(out_dir: str | Path, prices: PriceTable | None = None) -> Table:
    """A rich ``Table`` of a results directory: per env, per task and overall.

    Columns: environment, task, scored episodes, progression % ± SE, average steps, input and
    output tokens, invalid actions (count and share of turns), estimated cost (``prices``;
    default the shipped table), and failed (agent/env error or cancelled) episodes. Figures
    are recomputed from the episode files. Raises ``FileNotFoundError`` (with a hint) when
    ``out_dir`` is missing or holds no readable episode files.
    """
    root = Path(out_dir)
    if not root.is_dir():
        raise FileNotFoundError(
            f"no results directory at {root}; pass the --output dir of a run (moria eval)"
        )
    episodes = load_episodes(root)
    if not episodes:
        raise FileNotFoundError(
            f"no episode files under {root} (expected <env>/<task>/<task>_run_<NN>.json)"
        )
    summary = compute_summary(episodes, prices=prices)
    table = Table(title=f"Moria results: {root}")
    table.add_column("Environment", no_wrap=True)
    table.add_column("Task", overflow="fold")
    table.add_column("Episodes", justify="right")
    table.add_column("Progression %", justify="right", no_wrap=True)
    for column in ("Avg steps", "Input tokens", "Output tokens", "Invalid", "Cost", "Failed"):
        table.add_column(column, justify="right")
    for env, figures in summary["environments"].items():
        table.add_row(*_row(env, "(all)", figures), style="bold")
        for task, task_figures in figures["tasks"].items():
            table.add_row(*_row("", task, task_figures))
        table.add_section()
    overall = {
        "progression_percentage": summary["average_progress"],
        "standard_error": summary["standard_error"],
        "episodes_played": summary["episodes_played"],
        "average_steps": summary["average_steps"],
        "input_tokens": summary["input_tokens"],
        "output_tokens": summary["output_tokens"],
        "cost_usd": summary["cost_usd"],
        "models": summary["models"],
        "end_reasons": summary["end_reasons"],
        "invalid_actions": summary["invalid_actions"],
        "invalid_action_rate": summary["invalid_action_rate"],
    }
    table.add_row(*_row("Overall", "(mean of envs)", overall), style="bold")
    return table


def print_report(
    out_dir: str | Path, console: Console | None = None, prices: PriceTable | None = None
) -> None:
    """Print ``render_report(out_dir, prices)`` to ``console`` (default: a new stdout Console),
    the run's ``protocol_line`` under it, then the per-team/per-seat tables of multi-agent
    games (``orchestrator.match_report``). Raises as ``render_report`` does."""
    console = console or Console()
    console.print(render_report(out_dir, prices))
    episodes = load_episodes(out_dir)
    console.print(protocol_line(protocol_summary(episodes)), markup=False, highlight=False)
    for table in render_match_tables(match_summary(episodes)):
        console.print(table)
