"""Where ``moria protocol-check`` results are kept, and how a run finds the one that covers it
(recorded in every ``agent.protocol=balrog`` episode as ``protocol.protocol_check``).

A check covers some envs and strategies of one BALROG commit; its result is saved per
(commit, env, strategy) it covered, under the Moria cache:
``<cache>/protocol-check/<commit>/<env>__<strategy>.json``. A run looks up the record of its own
commit, env and strategy: a check of other envs or strategies says nothing about it
(``not checked``), and a later check replaces only the records it covers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from moria.cache import cache_path
from moria.files import atomic_write_json

#: The status of a (commit, env, strategy) no check has covered.
NOT_CHECKED: Final = "not checked"


def _safe(part: str) -> str:
    return "".join(c for c in (part or "unknown") if c.isalnum() or c in "-_.")[:128] \
        or "unknown"


def check_file(commit: str, env: str, strategy: str) -> Path:
    """Where the record of (``commit``, ``env``, ``strategy``) is saved (``unknown`` for no
    commit)."""
    return (cache_path("protocol-check") / _safe(commit)
            / f"{_safe(env)}__{_safe(strategy)}.json")


def save_check(result: dict[str, Any]) -> list[Path]:
    """Save a check's result document (``run_check``'s) as one record per (env, strategy) it
    covered (``result["cases"]``); returns the files. Each record holds the commit, the
    source, when, the env, the strategy, its own status and counts, and the check's settings."""
    commit = str(result.get("balrog_commit", ""))
    shared = {key: result.get(key) for key in ("balrog_commit", "balrog_source", "checked_at",
                                               "episodes", "max_steps", "seed")}
    paths = []
    for case in result.get("cases", []):
        record = {**shared, **case, "status": "passed" if case.get("passed") else "failed"}
        paths.append(atomic_write_json(check_file(commit, case["env"], case["strategy"]),
                                       record, indent=2, ensure_ascii=False))
    return paths


def saved_check(commit: str, env: str, strategy: str) -> dict[str, Any]:
    """The saved record of (``commit``, ``env``, ``strategy``), or ``{"status": "not checked",
    "balrog_commit", "env", "strategy"}`` when no check covered it (or its file is
    unreadable)."""
    try:
        record = json.loads(check_file(commit, env, strategy).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = None
    if isinstance(record, dict):
        return record
    return {"status": NOT_CHECKED, "balrog_commit": commit, "env": env, "strategy": strategy}
