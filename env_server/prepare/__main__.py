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
input. The line format is ``moria.prepare_protocol``'s, shared with ``python -m
agent_server.prepare``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from env_server.prepare import (
    DataSource,
    Episode,
    PrepareRequestError,
    families_of,
    items_for_episodes,
    select,
    sources,
)
from moria.prepare_protocol import (
    OUT,
    Buildable,
    add_build_command,
    build_each,
    item_line,
    read_records,
    run,
)


def _item(source: DataSource, name: str) -> dict[str, Any]:
    return item_line(source.name, name, source.is_built(name), source.how_to_fix)


def _episodes(path: str) -> list[Episode]:
    try:
        return [Episode(str(r["env"]), str(r["task"]), int(r["seed"]),
                        dict(r.get("options") or {}))
                for r in read_records(path, ("env", "task", "seed"))]
    except (TypeError, ValueError) as exc:
        if isinstance(exc, PrepareRequestError):
            raise
        raise PrepareRequestError(f"bad episode: {exc}") from exc


def _cmd_sources(args: argparse.Namespace) -> int:
    for source in select(args.family or (), args.source or ()):
        OUT.emit({"source": source.name, "families": families_of(source.name),
                  "description": source.description, "location": str(source.location())})
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    if args.episodes is not None:
        if args.family or args.source:
            raise PrepareRequestError("--episodes takes no --family or --source")
        for source, name in items_for_episodes(_episodes(args.episodes)):
            OUT.emit(_item(source, name))
        return 0
    for source in select(args.family or (), args.source or ()):
        for name in source.all_items():
            OUT.emit(_item(source, name))
    return 0


def _cmd_build(args: argparse.Namespace) -> int:
    known = sources()
    wanted = list(read_records(args.file, ("source", "name")))  # all read before any build
    for record in wanted:
        if record["source"] not in known:
            raise PrepareRequestError(f"unknown data source {record['source']!r}; known: "
                                      + ", ".join(sorted(known)))

    def item(source: DataSource, name: str) -> Buildable:
        return Buildable(lambda: source.is_built(name), lambda: source.build(name),
                         source.how_to_fix)

    return build_each((record["source"], str(record["name"]),
                       item(known[record["source"]], str(record["name"])))
                      for record in wanted)


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
    add_build_command(sub, _cmd_build)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit status (0 done, 1 a build failed, 2 bad request)."""
    return run(build_parser(), argv)


if __name__ == "__main__":
    OUT.own_stdout()
    sys.exit(main())
