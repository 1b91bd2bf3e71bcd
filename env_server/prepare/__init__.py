"""The game data the families build once before play: ``moria prepare``'s env-server side.

A family whose games read data that is built ahead (TextWorld's generated games, MiniHack's
Boxoban level pools) names its *data sources* in its manifest (``FamilyManifest.prepare``) and
defines them in its own folder, in ``env_server/families/<folder>/prepare.py``: a module-level
``SOURCES`` list with one :class:`DataSource` per name. Nothing else registers data and nothing
outside the family folder knows what a family builds.

A source's *items* are named by strings unique within it (``coin_collector/03``,
``hard/0042``). A source answers four questions:

- ``all_items()``: every item it can build (what ``moria prepare --env NAME`` builds);
- ``items_for(task, seed, options)``: the items one episode of ``task`` with episode seed
  ``seed`` and the run's family options (``envs.<family>_kwargs``) reads, possibly none;
- ``is_built(name)``: cheap (stats, a small read), never builds;
- ``build(name)``: builds the item unless it is built and returns where it went. Builders are
  idempotent and safe across processes (``moria.cache.file_lock``, atomic writes).

The orchestrator never imports this package: it runs ``python -m env_server.prepare`` (see
``__main__``) and reads JSON lines.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from env_server.data_source import DataSource
from moria.prepare_protocol import PrepareRequestError

__all__ = [
    "DataSource",
    "Episode",
    "PrepareRequestError",
    "families_of",
    "family_sources",
    "items_for_episodes",
    "select",
    "sources",
]


@dataclass(frozen=True)
class Episode:
    """One planned episode whose data is asked for: the family, the task, the episode seed and
    the run's options of the family."""

    env: str
    task: str
    seed: int
    options: Mapping[str, Any]


def _folder_module(entry_point: str) -> str:
    """``env_server.families.<folder>`` of a family entry point (``module:Class``)."""
    import env_server.families as package

    parts = entry_point.split(":")[0].split(".")
    prefix = package.__name__.split(".")
    if parts[:len(prefix)] != prefix or len(parts) <= len(prefix):
        raise ValueError(f"entry point {entry_point!r} is not inside {package.__name__}")
    return ".".join(parts[:len(prefix) + 1])


@functools.cache
def family_sources() -> dict[str, tuple[DataSource, ...]]:
    """Family name -> its data sources, in its manifest's order, for every family (an empty
    tuple for a family with nothing to build).

    Raises ``LookupError`` when a manifest names a source its folder's ``prepare`` module does
    not define, ``ValueError`` when two families define one source name differently."""
    from env_server.families import discover

    found: dict[str, tuple[DataSource, ...]] = {}
    by_name: dict[str, DataSource] = {}
    for manifest in discover():
        if not manifest.prepare:
            found[manifest.name] = ()
            continue
        module_name = _folder_module(manifest.entry_point) + ".prepare"
        module = importlib.import_module(module_name)
        defined = {source.name: source for source in getattr(module, "SOURCES", [])}
        chosen = []
        for name in manifest.prepare:
            if name not in defined:
                raise LookupError(f"family {manifest.name!r} names data source {name!r} in its "
                                  f"manifest, but {module_name}.SOURCES does not define it")
            if by_name.setdefault(name, defined[name]) is not defined[name]:
                raise ValueError(f"data source {name!r} is defined twice")
            chosen.append(defined[name])
        found[manifest.name] = tuple(chosen)
    return found


def sources() -> dict[str, DataSource]:
    """Every data source by name."""
    return {s.name: s for group in family_sources().values() for s in group}


def families_of(source: str) -> list[str]:
    """The families that read ``source``."""
    return [family for family, group in family_sources().items()
            if any(s.name == source for s in group)]


def select(families: Iterable[str] = (), names: Iterable[str] = ()) -> list[DataSource]:
    """The sources of ``families`` plus those named ``names``; every source when both are
    empty. Raises ``PrepareRequestError`` naming what is allowed for an unknown name."""
    families, names = list(families), list(names)
    known, by_name = family_sources(), sources()
    if not families and not names:
        return list(by_name.values())
    chosen: list[DataSource] = []
    for family in families:
        if family not in known:
            raise PrepareRequestError(f"unknown family {family!r}; known: "
                                      + ", ".join(sorted(known)))
        chosen.extend(s for s in known[family] if s not in chosen)
    for name in names:
        if name not in by_name:
            raise PrepareRequestError(f"unknown data source {name!r}; known: "
                                      + ", ".join(sorted(by_name)))
        if by_name[name] not in chosen:
            chosen.append(by_name[name])
    return chosen


def items_for_episodes(episodes: Iterable[Episode]) -> Iterator[tuple[DataSource, str]]:
    """The (source, item) pairs the episodes read, each once, in first-needed order.

    Raises ``PrepareRequestError`` for an unknown family."""
    known = family_sources()
    seen: set[tuple[str, str]] = set()
    for episode in episodes:
        if episode.env not in known:
            raise PrepareRequestError(f"unknown family {episode.env!r}; known: "
                                      + ", ".join(sorted(known)))
        for source in known[episode.env]:
            for name in source.items_for(episode.task, episode.seed, episode.options):
                if (source.name, name) not in seen:
                    seen.add((source.name, name))
                    yield source, name
