"""MiniHack's prebuilt data (``env_server.prepare``): the generated Boxoban level pools.

Source ``boxoban``; item ``<difficulty>/<NNNN>`` is level NNNN of Moria's generated pool for
``medium`` or ``hard`` (``boxoban.source.LevelSource.generated()``, cached under
``$MORIA_CACHE_DIR/boxoban``). An episode of a Boxoban task reads level ``seed mod 1000``;
with an official level set (option ``boxoban_levels`` or ``$MORIA_BOXOBAN_LEVELS``) it reads
that instead and nothing is built. ``nle`` has no data.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from env_server.data_source import DataSource
from env_server.families.nethack.boxoban.generator import DIFFICULTIES
from env_server.families.nethack.boxoban.source import (
    DEFAULT_POOL_SIZE,
    OFFICIAL_ENV,
    LevelSource,
    default_cache_dir,
)
from env_server.families.nethack.game import reduce_seed
from env_server.families.nethack.minihack_tasks import BOXOBAN_DIFFICULTY

HOW_TO_FIX = ("Boxoban levels are generated locally; set MORIA_BOXOBAN_LEVELS (or "
              "minihack_kwargs.boxoban_levels) to an official boxoban-levels checkout instead")


def _name(difficulty: str, index: int) -> str:
    return f"{difficulty}/{index:04d}"


def _parse(name: str) -> tuple[str, int]:
    """``(difficulty, index)`` of an item name. Raises ValueError for a malformed name."""
    difficulty, _, index = name.partition("/")
    if difficulty not in DIFFICULTIES or not index.isdigit() or \
            not 0 <= int(index) < DEFAULT_POOL_SIZE:
        raise ValueError(f"no Boxoban level {name!r}: expected <difficulty>/<NNNN> with a "
                         f"difficulty of {', '.join(DIFFICULTIES)} and NNNN in "
                         f"0000..{DEFAULT_POOL_SIZE - 1}")
    return difficulty, int(index)


def all_items() -> list[str]:
    """Both whole pools, medium first."""
    return [_name(d, i) for d in DIFFICULTIES for i in range(DEFAULT_POOL_SIZE)]


def items_for(task: str, seed: int, options: Mapping[str, Any]) -> list[str]:
    """The generated level an episode of a Boxoban task reads; none for other tasks or when
    an official level set is configured."""
    difficulty = BOXOBAN_DIFFICULTY.get(task)
    if difficulty is None or options.get("boxoban_levels") or os.environ.get(OFFICIAL_ENV):
        return []
    return [_name(difficulty, reduce_seed(seed) % DEFAULT_POOL_SIZE)]


def is_built(name: str) -> bool:
    """Whether the level's file is in the cache."""
    difficulty, index = _parse(name)
    return LevelSource.generated().is_cached(difficulty, index)


def build(name: str) -> Path:
    """Generate the level into the cache unless it is there; the cache folder.

    Raises OSError when the cache cannot be written (the level source itself would go on
    without it, generating the level at every episode)."""
    difficulty, index = _parse(name)
    source = LevelSource.generated()
    source.level_for(difficulty, index)
    if not source.is_cached(difficulty, index):
        raise OSError(f"cannot write the Boxoban level cache {default_cache_dir()}")
    return default_cache_dir()


SOURCES = [DataSource(
    name="boxoban", description="Boxoban levels (2 x 1000)", how_to_fix=HOW_TO_FIX,
    location=default_cache_dir, all_items=all_items, items_for=items_for, is_built=is_built,
    build=build,
)]
