"""``python -m env_server.prepare``: list and build the families' prebuilt game data.

The orchestrator's ``moria prepare`` (and ``moria eval``, for what a run needs) runs this as a
subprocess and reads its standard output, one JSON object per line:

``sources [--family F ...] [--source S ...]``
    one line per data source: ``{"source", "families", "description", "location"}``.
``list [--family F ...] [--source S ...]``
    one line per item of those sources (every source when none is given):
    ``{"source", "name", "built", "how_to_fix"}``.
``list --episodes FILE``
    the items that the planned episodes in ``FILE`` (``-``: standard input) read, each once;
    ``FILE`` holds one JSON object per line, ``{"env", "task", "seed"}`` and optionally
    ``"options"`` (the run's ``envs.<env>_kwargs``).
``build [FILE]``
    builds the items in ``FILE`` (default ``-``: standard input; ``{"source", "name"}`` per
    line) in order, and prints one line per item as soon as it is done:
    ``{"source", "name", "built": true, "already", "path"}``. On the first failure it prints
    ``{"source", "name", "built": false, "error", "how_to_fix"}`` and exits 1.

Exit status 2, with the reason on standard error, for an unknown family, source or malformed
input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from env_server.prepare import (
    DataSource,
    Episode,
    PrepareRequestError,
    families_of,
    items_for_episodes,
    select,
    sources,
)

#: The stream the JSON lines go to (standard output unless ``_own_stdout`` moved it).
_OUT: TextIO | None = None


def _emit(record: dict[str, Any]) -> None:
    out = _OUT or sys.stdout
    out.write(json.dumps(record) + "\n")
    out.flush()


def _own_stdout() -> TextIO:
    """Keep standard output for the JSON lines alone: return a stream on a copy of file
    descriptor 1 and point descriptor 1 at standard error, so that whatever else writes there
    (a builder's print, a compiler it runs) goes to standard error."""
    sys.stdout.flush()
    protocol = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    return protocol


def _item(source: DataSource, name: str) -> dict[str, Any]:
    return {"source": source.name, "name": name, "built": source.is_built(name),
            "how_to_fix": source.how_to_fix}


def _records(handle: TextIO, keys: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    """The JSON objects of ``handle``, one a line (blank lines skipped), each with ``keys``."""
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


def _open(path: str) -> TextIO:
    return sys.stdin if path == "-" else open(path, encoding="utf-8")


def _episodes(path: str) -> list[Episode]:
    with _open(path) as handle:
        try:
            return [Episode(str(r["env"]), str(r["task"]), int(r["seed"]),
                            dict(r.get("options") or {}))
                    for r in _records(handle, ("env", "task", "seed"))]
        except (TypeError, ValueError) as exc:
            if isinstance(exc, PrepareRequestError):
                raise
            raise PrepareRequestError(f"bad episode: {exc}") from exc


def _cmd_sources(args: argparse.Namespace) -> int:
    for source in select(args.family or (), args.source or ()):
        _emit({"source": source.name, "families": families_of(source.name),
               "description": source.description, "location": str(source.location())})
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    if args.episodes is not None:
        if args.family or args.source:
            raise PrepareRequestError("--episodes takes no --family or --source")
        for source, name in items_for_episodes(_episodes(args.episodes)):
            _emit(_item(source, name))
        return 0
    for source in select(args.family or (), args.source or ()):
        for name in source.all_items():
            _emit(_item(source, name))
    return 0


def _cmd_build(args: argparse.Namespace) -> int:
    known = sources()
    with _open(args.file) as handle:
        wanted = list(_records(handle, ("source", "name")))  # all read before any build
    for record in wanted:
        if record["source"] not in known:
            raise PrepareRequestError(f"unknown data source {record['source']!r}; known: "
                                      + ", ".join(sorted(known)))
    for record in wanted:
        source, name = known[record["source"]], str(record["name"])
        try:
            already = source.is_built(name)
            path = source.build(name)
        except Exception as exc:  # noqa: BLE001 - reported to the orchestrator, which raises
            _emit({"source": source.name, "name": name, "built": False,
                   "error": str(exc) or type(exc).__name__, "how_to_fix": source.how_to_fix})
            return 1
        _emit({"source": source.name, "name": name, "built": True, "already": already,
               "path": str(path)})
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m env_server.prepare",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in (("sources", "describe the data sources"),
                       ("list", "list items and whether they are built")):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("--family", action="append", metavar="F",
                         help="only this family's data (repeatable)")
        cmd.add_argument("--source", action="append", metavar="S",
                         help="only this data source (repeatable)")
        cmd.set_defaults(func=_cmd_sources if name == "sources" else _cmd_list)
    sub.choices["list"].add_argument(
        "--episodes", metavar="FILE",
        help="list what these episodes read: JSON lines {env, task, seed[, options]}; - = stdin")
    build = sub.add_parser("build", help="build items given as JSON lines {source, name}")
    build.add_argument("file", nargs="?", default="-", help="the items (default -: stdin)")
    build.set_defaults(func=_cmd_build)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit status (0 done, 1 a build failed, 2 bad request)."""
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except (PrepareRequestError, OSError) as exc:
        print(f"env_server.prepare: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    _OUT = _own_stdout()
    sys.exit(main())
