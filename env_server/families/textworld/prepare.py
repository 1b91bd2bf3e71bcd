"""TextWorld's prebuilt data (``env_server.prepare``): the 75 generated games.

Source ``textworld``; item ``<family>/<NN>`` is game NN (0..24) of a TextWorld family
(``treasure_hunter``, ``the_cooking_game``, ``coin_collector``), built by ``games.build_game``
into ``games.games_dir()``. An episode of task ``<family>`` plays game ``seed mod 25``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from env_server.data_source import DataSource
from env_server.families.textworld import games

HOW_TO_FIX = ("needs the textworld package (pip install 'moria[textworld]'); the games are "
              "generated locally, nothing is downloaded")


def _name(family: str, index: int) -> str:
    return f"{family}/{index:02d}"


def _parse(name: str) -> tuple[str, int]:
    """``(family, index)`` of an item name. Raises ValueError for a malformed name."""
    family, _, index = name.partition("/")
    if family not in games.GAME_FAMILIES or not index.isdigit() or \
            not 0 <= int(index) < games.GAMES_PER_FAMILY:
        raise ValueError(f"no TextWorld game {name!r}: expected <family>/<NN> with a family of "
                         f"{', '.join(games.GAME_FAMILIES)} and NN in "
                         f"00..{games.GAMES_PER_FAMILY - 1}")
    return family, int(index)


def all_items() -> list[str]:
    """Every game, family by family."""
    return [_name(family, index) for family in games.GAME_FAMILIES
            for index in range(games.GAMES_PER_FAMILY)]


def items_for(task: str, seed: int, options: Mapping[str, Any]) -> list[str]:
    """The game an episode of ``task`` with ``seed`` plays (none for an unknown task)."""
    if task not in games.GAME_FAMILIES:
        return []
    return [_name(task, games.index_for_seed(seed))]


def is_built(name: str) -> bool:
    """Whether the game's files are there, made with the current recipe."""
    return games.is_built(*_parse(name))


def build(name: str) -> Path:
    """Build the game unless it is built; its ``.z8`` path."""
    return games.build_game(*_parse(name))


SOURCES = [DataSource(
    name="textworld", description="TextWorld games (3 x 25, .z8)", how_to_fix=HOW_TO_FIX,
    location=games.games_dir, all_items=all_items, items_for=items_for, is_built=is_built,
    build=build,
)]
