"""``moria prepare``: build every piece of game data and model weights once, before a run.

This is the offline counterpart of BALROG's post-install step. The data is declared where it is
used: each family that builds data names its sources in its manifest (``prepare``, read here
from ``moria/families.json``) and defines them in its folder's ``prepare.py``; the agent server
owns the local model weights. The orchestrator imports neither server: it runs
``python -m env_server.prepare`` and ``python -m agent_server.prepare`` as subprocesses (with
this interpreter), which list items as JSON lines (``source``, ``name``, ``built``,
``how_to_fix``) and build them, printing one JSON line per item done (the protocol is in those
modules' docstrings). Building is idempotent and safe across processes (the builders hold
``moria.cache.file_lock`` and write atomically), so ``prepare`` can be rerun or run next to a
live evaluation.

Two ways to choose items:

- everything a source can build (``moria prepare [--env NAME ...]``): all 75 TextWorld games,
  the whole generated Boxoban pools, the joined local-model weights;
- exactly what a run spec needs (``moria eval`` calls :func:`items_for_spec` and builds the
  missing ones first): the items its planned episodes read, as the families answer for each
  (env, task, seed), and the local model if the run uses it.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rich.console import Console
from rich.progress import Progress, TaskID

from moria.config import NON_MODEL_AGENT_TYPES
from moria.families import families
from orchestrator.apps.say import literal
from orchestrator.plan.spec import RunSpec
from orchestrator.report.progress import progress_bar

log = logging.getLogger("moria.prepare")

Server = Literal["env", "agent"]

#: The module each side runs (``python -m MODULE``) to list and build its data.
SERVER_MODULES: dict[Server, str] = {"env": "env_server.prepare",
                                     "agent": "agent_server.prepare"}

#: The agent server's one data source: the local model weights.
LOCAL_MODEL = "local-model"

#: The folder holding the ``orchestrator`` package, hence its sibling server packages.
_CODE_ROOT = Path(__file__).resolve().parents[2]


class PrepareError(RuntimeError):
    """A piece of data could not be listed or built; the message names it and how to get it."""


@dataclass(frozen=True)
class DataItem:
    """One thing to build: ``source`` (e.g. ``textworld``), a ``name`` unique within it,
    whether it was ``built`` when listed, what to do when building it fails, and the ``server``
    side that builds it."""

    source: str
    name: str
    built: bool
    how_to_fix: str = ""
    server: Server = "env"


@dataclass(frozen=True)
class Source:
    """A kind of prebuilt data: its name, the envs that read it, the side that builds it."""

    name: str
    envs: tuple[str, ...]
    server: Server = "env"


def _all_sources() -> dict[str, Source]:
    envs: dict[str, list[str]] = {}
    for env, manifest in sorted(families().items()):
        for source in manifest.prepare:
            envs.setdefault(source, []).append(env)
    table = {name: Source(name, tuple(readers)) for name, readers in envs.items()}
    table[LOCAL_MODEL] = Source(LOCAL_MODEL, (), "agent")
    return table


#: Every source ``moria prepare`` knows, by name: the families' (from their manifests) and
#: the agent server's local model.
SOURCES: dict[str, Source] = _all_sources()


def env_help() -> str:
    """The ``moria prepare --env`` help: every family (from ``moria/families.json``, so a new
    family is listed without touching this) and every data source, saying which families
    have data to build."""
    readers = {env: [s.name for s in SOURCES.values() if env in s.envs] for env in families()}
    names = [f"{env} ({', '.join(data)})" if data else env
             for env, data in sorted(readers.items())]
    return ("only this env family or data source; repeatable; default: everything. "
            f"Families: {', '.join(names)} (in parentheses: the data each one reads; the "
            "others need nothing built). Data sources: " + ", ".join(sorted(SOURCES))
            + f" ({LOCAL_MODEL}: the local model's weights)")


def sources_for(names: Iterable[str]) -> list[Source]:
    """The sources for env names (``textworld``, ``minihack``) or source names
    (``boxoban``, ``local-model``). Raises ``ValueError`` naming what is allowed."""
    chosen: list[Source] = []
    for name in names:
        matches = [s for s in SOURCES.values() if name == s.name or name in s.envs]
        if not matches:
            if name in families():
                continue  # a known env with nothing to build (babyai, crafter, ...)
            allowed = sorted({*SOURCES, *families()})
            raise ValueError(f"unknown env or data {name!r}; allowed: {', '.join(allowed)}")
        chosen.extend(m for m in matches if m not in chosen)
    return chosen


# -- the subprocesses --------------------------------------------------------------------------

def _command(server: Server, *args: str) -> list[str]:
    return [sys.executable, "-m", SERVER_MODULES[server], *args]


def _child_env() -> dict[str, str]:
    """This process's environment (cache folders, level sets), with the code this process runs
    first on the path, so the child runs the same tree."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(_CODE_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _tail(text: str, lines: int = 8) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _parse(line: str, module: str) -> dict[str, Any] | None:
    """One JSON object of a child's output (None for a blank line). Raises PrepareError."""
    if not line.strip():
        return None
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise PrepareError(f"{module} wrote a line that is not JSON: {line.strip()!r}") from exc
    if not isinstance(record, dict):
        raise PrepareError(f"{module} wrote {line.strip()!r}, not a JSON object")
    return record


def _query(server: Server, args: list[str], stdin: str = "") -> list[dict[str, Any]]:
    """Run ``python -m <server module> ARGS`` and return its JSON lines. Raises PrepareError
    (with the end of its standard error) when it fails."""
    module = SERVER_MODULES[server]
    done = subprocess.run(_command(server, *args), input=stdin, capture_output=True, text=True,
                          env=_child_env(), check=False)
    if done.returncode != 0:
        raise PrepareError(f"could not list the {server} server's data: python -m {module} "
                           f"{args[0]} exited with status {done.returncode}"
                           + (f": {_tail(done.stderr)}" if done.stderr.strip() else ""))
    return [r for line in done.stdout.splitlines() if (r := _parse(line, module)) is not None]


def _list(server: Server, args: list[str], stdin: str = "") -> list[DataItem]:
    try:
        return [DataItem(str(r["source"]), str(r["name"]), bool(r["built"]),
                         str(r.get("how_to_fix", "")), server)
                for r in _query(server, ["list", *args], stdin)]
    except KeyError as exc:
        raise PrepareError(f"python -m {SERVER_MODULES[server]} list wrote an item "
                           f"without {exc}") from exc


def _source_args(sources: Iterable[Source]) -> list[str]:
    return [f"--source={s.name}" for s in sources]


# -- choosing items ----------------------------------------------------------------------------

def items_for_spec(spec: RunSpec) -> list[DataItem]:
    """The data the planned episodes of ``spec`` read, built or not (see
    :func:`items_for_specs`)."""
    return items_for_specs([spec])


def items_for_specs(specs: Iterable[RunSpec]) -> list[DataItem]:
    """The data the planned episodes of ``specs`` read, built or not, each item once.

    The env server's families answer for each planned (env, task, seed) of an env whose
    manifest names data; the agent server for the models of the seats that call the local
    model. Env data is skipped when a run uses remote endpoints (those servers have their own),
    the model when it uses remote policy servers. At most one subprocess per side.

    Raises:
        PrepareError: a side could not say what it needs.
    """
    from orchestrator.plan.seeds import derive_seed

    episodes: list[str] = []
    models: list[str] = []
    for spec in specs:
        if not spec.endpoints.configured:
            options = {env: spec.envs.kwargs_for(env) for env in spec.envs.env_list
                       if env in families() and families()[env].prepare}
            for env, task, index in spec.episodes():
                if env in options:
                    row: dict[str, Any] = {"env": env, "task": task,
                                           "seed": derive_seed(spec.eval.seed, env, task, index)}
                    if options[env]:
                        row["options"] = options[env]
                    episodes.append(json.dumps(row, default=str))
        models.extend(m for m in _local_models(spec) if m not in models)
    items: list[DataItem] = []
    if episodes:
        items += _list("env", ["--episodes", "-"], "\n".join(episodes) + "\n")
    if models:
        items += _list("agent", [f"--model={m}" for m in models])
    seen: set[tuple[str, str]] = set()
    unique = []
    for item in items:
        if (item.source, item.name) not in seen:
            seen.add((item.source, item.name))
            unique.append(item)
    return unique


def _local_models(spec: RunSpec) -> list[str]:
    """The ``client.model_id`` ('' for the default) of every seat of ``spec`` that calls the
    local model on a policy server started here (players that call no model,
    ``moria.config.NON_MODEL_AGENT_TYPES``, need none)."""
    if spec.endpoints.policy:
        return []
    found: list[str] = []
    for agent, client in spec.seat_configs():
        model = client.model_id or ""
        if agent.type not in NON_MODEL_AGENT_TYPES and client.client_name == "local" \
                and model not in found:
            found.append(model)
    return found


# -- building ----------------------------------------------------------------------------------

@dataclass
class PrepareReport:
    """What a prepare call did: items built, items already present, per source."""

    built: dict[str, int]
    present: dict[str, int]


def _failure(source: str, name: str, cause: str, how_to_fix: str) -> PrepareError:
    return PrepareError(f"could not build {source} {name}: {cause}"
                        + (f" ({how_to_fix})" if how_to_fix else ""))


def build_items(items: list[DataItem], *, console: Console | None = None,
                show_progress: bool = True) -> PrepareReport:
    """Build the items that are not built yet, with a progress bar (one subprocess per side,
    advancing as each item is done).

    Raises:
        PrepareError: an item failed; the message names it, the cause and how to get it.
    """
    console = console or Console(stderr=True)
    report = PrepareReport({}, {})
    missing: dict[Server, list[DataItem]] = {}
    for item in items:
        if item.built:
            report.present[item.source] = report.present.get(item.source, 0) + 1
        else:
            missing.setdefault(item.server, []).append(item)
    if not missing:
        return report
    progress = progress_bar(console, show_progress, label="prepare[/bold] {task.description}")
    with progress:
        bar = progress.add_task("", total=sum(len(group) for group in missing.values()))
        for server, group in missing.items():
            _build(server, group, progress, bar, report)
    return report


def _build(server: Server, group: list[DataItem], progress: Progress, bar: TaskID,
           report: PrepareReport) -> None:
    """Build ``group`` with one ``python -m <module> build``, counting into ``report``."""
    module = SERVER_MODULES[server]
    request = "".join(json.dumps({"source": i.source, "name": i.name}) + "\n" for i in group)
    done = 0
    failure: dict[str, Any] | None = None
    progress.update(bar, description=f"{group[0].source} {group[0].name}")
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errors:
        child = subprocess.Popen(_command(server, "build"), stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=errors, text=True,
                                 env=_child_env())
        assert child.stdin is not None and child.stdout is not None
        try:
            try:
                child.stdin.write(request)  # the child reads it all before building
                child.stdin.close()
            except BrokenPipeError:
                pass  # it exited early; its status and standard error say why
            for line in child.stdout:
                record = _parse(line, module)
                if record is None:
                    continue
                if not record.get("built"):
                    failure = record
                    break
                counts = report.present if record.get("already") else report.built
                source = str(record.get("source"))
                counts[source] = counts.get(source, 0) + 1
                done += 1
                progress.advance(bar)
                if done < len(group):
                    progress.update(bar, description=f"{group[done].source} {group[done].name}")
            status = child.wait()
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        if failure is not None:
            raise _failure(str(failure.get("source")), str(failure.get("name")),
                           str(failure.get("error", "failed")),
                           str(failure.get("how_to_fix", "")))
        if status != 0 or done < len(group):
            errors.seek(0)
            stderr = _tail(errors.read())
            item = group[min(done, len(group) - 1)]
            raise _failure(item.source, item.name,
                           f"python -m {module} build exited with status {status}"
                           + (f": {stderr}" if stderr else ""), item.how_to_fix)


def prepare_sources(sources: list[Source], *, console: Console | None = None,
                    show_progress: bool = True) -> PrepareReport:
    """Build everything the given sources can build and print, per source, how many items
    were built now or already there and where they are.

    Raises:
        PrepareError: a side could not list its data, or an item failed.
    """
    console = console or Console(stderr=True)
    sides: dict[Server, list[Source]] = {}
    for source in sources:
        sides.setdefault(source.server, []).append(source)
    items: list[DataItem] = []
    for server, chosen in sides.items():
        items += _list(server, _source_args(chosen))
    report = build_items(items, console=console, show_progress=show_progress)
    about = {str(row.get("source")): row for server, chosen in sides.items()
             for row in _query(server, ["sources", *_source_args(chosen)])}
    for source in sources:
        row = about.get(source.name, {})
        console.print(literal(f"{row.get('description', source.name)}: "
                            f"{report.built.get(source.name, 0)} built now, "
                            f"{report.present.get(source.name, 0)} already there\n  -> "
                            f"{row.get('location', '?')}"), soft_wrap=True)
    return report
