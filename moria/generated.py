"""Generated files of the repository (``moria/families.json``, ``moria/strategies.json``):
write them, or check that they are current (``make checks`` runs every ``--check``)."""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(path: Path, text: str, command: str, *, check: bool) -> int:
    """With ``check``: 0 when ``path`` holds exactly ``text``, else 1 with a line on standard
    error naming ``command`` (the one that regenerates it). Without: write ``text`` when it
    differs (printing the path) and return 0. Raises OSError when the file cannot be written."""
    current = path.read_text(encoding="utf-8") if path.exists() else ""
    if check:
        if current != text:
            print(f"{path} is not current: run {command}", file=sys.stderr)
            return 1
        return 0
    if current != text:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
    return 0
