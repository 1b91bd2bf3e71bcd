"""The line protocol of ``moria prepare``'s server sides (``python -m env_server.prepare``,
``python -m agent_server.prepare``): one JSON object per line on standard output, requests as
JSON lines on standard input or in a file.

Both sides share it, so the orchestrator reads one format:

- an item line: ``{"source", "name", "built", "how_to_fix"}`` (``item_line``);
- a build result, after each item: ``{"source", "name", "built": true, "already", "path"}``,
  or on the first failure ``{"source", "name", "built": false, "error", "how_to_fix"}`` and
  exit status 1 (``build_each``);
- exit status 2 with the reason on standard error for a malformed or unknown request
  (``PrepareRequestError``, ``run``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO


class PrepareRequestError(ValueError):
    """A request names an unknown family, source or item, or is malformed."""


@dataclass(frozen=True)
class Buildable:
    """One item as a builder sees it: whether it is built (cheap), how to build it (returns
    where it went; idempotent), and what to do when that fails."""

    is_built: Callable[[], bool]
    build: Callable[[], Path]
    how_to_fix: str


class JsonLines:
    """The protocol's output stream: standard output, or after ``own_stdout`` a private copy
    of it, so that whatever else writes to file descriptor 1 (a builder's print, a compiler it
    runs) goes to standard error instead of corrupting the lines."""

    def __init__(self) -> None:
        self._out: TextIO | None = None

    def own_stdout(self) -> None:
        """Keep standard output for the JSON lines alone (point descriptor 1 at stderr)."""
        sys.stdout.flush()
        self._out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
        os.dup2(2, 1)

    def emit(self, record: dict[str, Any]) -> None:
        """Write one JSON line and flush it."""
        out = self._out or sys.stdout
        out.write(json.dumps(record) + "\n")
        out.flush()


#: The process's protocol stream (each side's ``__main__`` calls ``OUT.own_stdout()``).
OUT = JsonLines()


def item_line(source: str, name: str, built: bool, how_to_fix: str) -> dict[str, Any]:
    """The line that lists one item."""
    return {"source": source, "name": name, "built": built, "how_to_fix": how_to_fix}


def read_records(path: str, keys: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    """The JSON objects of ``path`` (``-``: standard input), one a line, blank lines skipped,
    each holding ``keys``. Raises PrepareRequestError naming the line of a bad one."""
    handle = sys.stdin if path == "-" else open(path, encoding="utf-8")  # noqa: SIM115
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise PrepareRequestError(f"line {number}: not JSON ({exc})") from exc
            if not isinstance(record, dict) or any(key not in record for key in keys):
                raise PrepareRequestError(f"line {number}: expected an object with "
                                          + ", ".join(keys))
            yield record


def build_each(wanted: Iterable[tuple[str, str, Buildable]]) -> int:
    """Build (source, name, item) in order, emitting one result line after each; returns 0,
    or 1 at the first failure (its line carries the error and how to fix it)."""
    for source, name, item in wanted:
        try:
            already = item.is_built()
            path = item.build()
        except Exception as exc:  # noqa: BLE001 - reported to the orchestrator, which raises
            OUT.emit({"source": source, "name": name, "built": False,
                      "error": str(exc) or type(exc).__name__, "how_to_fix": item.how_to_fix})
            return 1
        OUT.emit({"source": source, "name": name, "built": True, "already": already,
                  "path": str(path)})
    return 0


def add_build_command(sub: Any, func: Callable[[argparse.Namespace], int]) -> None:
    """Add the ``build [FILE]`` command (items as JSON lines ``{source, name}``; default ``-``,
    standard input) to a side's subcommands, run by ``func``."""
    build = sub.add_parser("build", help="build items given as JSON lines {source, name}")
    build.add_argument("file", nargs="?", default="-", help="the items (default -: stdin)")
    build.set_defaults(func=func)


def run(parser: argparse.ArgumentParser, argv: list[str] | None) -> int:
    """Parse ``argv`` and run the chosen command (``args.func``); returns its status, or 2
    with the reason on standard error for a bad request or an unreadable input file."""
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except (PrepareRequestError, OSError) as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 2
    return code
