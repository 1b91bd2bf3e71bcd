"""Where ``moria protocol-check`` results are kept, and how a run finds the one for its BALROG
commit (recorded in every ``agent.protocol=balrog`` episode as ``protocol.protocol_check``).

Results live under the Moria cache: ``<cache>/protocol-check/<commit>.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from moria.cache import cache_path
from moria.files import atomic_write_json


def check_file(commit: str) -> Path:
    """Where the check result of a BALROG commit is saved (``unknown`` for no commit)."""
    name = "".join(c for c in (commit or "unknown") if c.isalnum() or c in "-_") or "unknown"
    return cache_path("protocol-check") / f"{name}.json"


def save_check(result: dict[str, Any]) -> Path:
    """Save a check result document under its ``balrog_commit``; returns the file."""
    return atomic_write_json(check_file(str(result.get("balrog_commit", ""))), result,
                             indent=2, ensure_ascii=False)


def saved_check(commit: str) -> dict[str, Any]:
    """The saved ``moria protocol-check`` result for ``commit``, or
    ``{"status": "not run", "balrog_commit": commit}`` when there is none (or it is unreadable).
    """
    try:
        result = json.loads(check_file(commit).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        result = None
    return result if isinstance(result, dict) else {"status": "not run", "balrog_commit": commit}
