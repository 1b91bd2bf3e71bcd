"""The TextWorld game files: where they live, whether they are built, and building them.

Layout: ``games_dir()/<family>/<family>-<NN>.z8`` with, next to it, TextWorld's ``.json`` (needed
to play: objective, score, walkthrough), the Inform 7 source ``.ni`` and our ``.meta.json``
(generation seed, attempt, recipe, TextWorld version, walkthrough length). ``games_dir()`` is
``moria.cache.cache_path("textworld")``, or ``$MORIA_TEXTWORLD_GAMES`` for a prebuilt (possibly
read-only) folder.

Building (``build_game``) is idempotent and safe across processes and threads: it holds
``moria.cache.file_lock`` on a per-game lock file, generates into a temporary folder beside the
game and renames the files into place, the ``.z8`` last, so nobody sees half a game. Generation
runs in-process through ``textworld.challenges.CHALLENGES`` (tw-make's code path without its
process start), one game at a time per process (``PARSE_LOCK``), with the exact speed-up and
work budget of ``quest_search``. See ``recipes`` for the recipes and the candidate-seed sequence.

Determinism: the same recipe, index and TextWorld version give byte-identical files. The one
input TextWorld takes from outside, the compile date that Inform writes as the story's serial
number (Z-machine header bytes 0x12-0x17, outside the checksummed range), is overwritten with
``000000``.

This module imports textworld only when it builds a game.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from env_server.families.textworld import recipes
from moria.cache import cache_path, file_lock
from moria.files import replace_file

#: The step cap of every TextWorld game (BALROG's) and the action of a turn without one.
MAX_STEPS = 80
DEFAULT_ACTION = "help"

GAME_FAMILIES: tuple[str, ...] = ("treasure_hunter", "the_cooking_game", "coin_collector")
GAMES_PER_FAMILY = 25
GAMES_ENV = "MORIA_TEXTWORLD_GAMES"

# Z-machine story-file header: six ASCII digits of serial number (Inform: the compile date).
_SERIAL_OFFSET = 0x12
_SERIAL = b"000000"
# Files of one game, by suffix; the story file is renamed into place last.
_SIDE_SUFFIXES = (".ni", ".json", ".meta.json")

#: Serialises TextWorld work that parses logic or grammar files (generating a game, loading one)
#: within a process: TextWorld's tatsu parsers are shared objects and not thread-safe.
PARSE_LOCK = threading.RLock()


class GameBuildError(RuntimeError):
    """A game could not be built; the message names the family, the index and the cause."""


def games_dir() -> Path:
    """``$MORIA_TEXTWORLD_GAMES`` (``~`` expanded) when set, else ``cache_path("textworld")``."""
    env = os.environ.get(GAMES_ENV)
    return Path(env).expanduser() if env else cache_path("textworld")


def index_for_seed(seed: int) -> int:
    """The game index an episode seed plays: ``seed mod 25`` (docs/families/textworld.md)."""
    return int(seed) % GAMES_PER_FAMILY


def recipe(family: str) -> str:
    """Human-readable recipe of a family, e.g. ``"tw-make tw-coin_collector --level 220; .z8;
    objective names only the last action"``. Raises ValueError for an unknown family."""
    return _recipe(family).describe()


def game_path(family: str, index: int) -> Path:
    """The story file of game ``index`` (0..24) of ``family``; it may not exist yet.

    Raises ValueError for an unknown family or an index outside [0, 25).
    """
    _check_index(index)
    _recipe(family)
    return games_dir() / family / f"{family}-{index:02d}.z8"


def metadata_path(family: str, index: int) -> Path:
    """Our metadata file of a game (``<family>-<NN>.meta.json``)."""
    return game_path(family, index).with_suffix(".meta.json")


def read_metadata(family: str, index: int) -> dict[str, Any]:
    """The metadata of a built game (keys: family, index, generation_seed, attempt, rejected
    (earlier candidates and why), recipe, textworld_version, walkthrough_length, max_score, uuid).
    Raises OSError if missing."""
    data: dict[str, Any] = json.loads(metadata_path(family, index).read_text())
    return data


def is_built(family: str, index: int) -> bool:
    """Whether the game's files exist and were generated with the family's current recipe.

    Cheap: two stats and one small JSON read. Never builds. Raises ValueError like ``game_path``.
    """
    path = game_path(family, index)
    if not (path.is_file() and path.with_suffix(".json").is_file()):
        return False
    try:
        meta = read_metadata(family, index)
    except (OSError, ValueError):
        return False
    return bool(meta.get("recipe") == _recipe(family).as_dict())


def build_game(family: str, index: int) -> Path:
    """Build game ``index`` of ``family`` unless it is built; return its ``.z8`` path.

    Holds ``file_lock(<games_dir>/.locks/<family>-<NN>.lock)`` while checking and building, so
    concurrent callers (threads or processes) build it once; the others wait and then return.

    Raises:
        ValueError: unknown family or index outside [0, 25).
        GameBuildError: textworld missing, the folder not writable (e.g. a read-only
            ``$MORIA_TEXTWORLD_GAMES`` lacking the game), no acceptable candidate seed, or a
            compile failure; the message names the family and index.
    """
    path = game_path(family, index)
    if is_built(family, index):
        return path
    lock = games_dir() / ".locks" / f"{path.stem}.lock"
    try:
        with file_lock(lock):
            if is_built(family, index):
                return path
            with PARSE_LOCK:
                _build_into(family, index, path)
    except GameBuildError:
        raise
    except Exception as exc:
        raise GameBuildError(
            f"cannot build TextWorld game {family} #{index} in {path.parent} "
            f"({_recipe(family).describe()}): {type(exc).__name__}: {exc}"
        ) from exc
    return path


def _build_into(family: str, index: int, path: Path) -> None:
    """Generate into a temporary folder beside ``path``, then move the files into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{path.stem}.", dir=path.parent))
    try:
        stem = scratch / path.stem
        meta = _generate(_recipe(family), index, stem)
        _normalise_serial(stem.with_suffix(".z8"))
        stem.with_suffix(".meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        for suffix in (*_SIDE_SUFFIXES, ".z8"):
            replace_file(stem.with_suffix(suffix), path.with_suffix(suffix))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _generate(recipe_: recipes.Recipe, index: int, stem: Path) -> dict[str, Any]:
    """Try the candidate seeds of game ``index`` in order; compile the first accepted one.

    Writes ``stem.z8``, ``stem.json`` and ``stem.ni``; returns the metadata to store.
    A candidate is rejected when TextWorld cannot generate its quest, when it exceeds the
    ``quest_search`` budget, or when its walkthrough length differs from the recipe's.
    """
    try:
        import textworld
        from textworld.challenges import CHALLENGES
        from textworld.generator import QuestGenerationError, compile_game
    except ImportError as exc:
        raise GameBuildError(
            f"TextWorld game {recipe_.family} #{index} needs the textworld package "
            "(pip install 'moria[textworld]')"
        ) from exc
    from env_server.families.textworld import quest_search

    make = CHALLENGES[recipe_.challenge][1]
    rejected: list[dict[str, Any]] = []
    for attempt in range(recipes.MAX_ATTEMPTS):
        seed = recipes.candidate_seed(index, attempt)
        options = textworld.GameOptions()
        options.seeds = seed
        options.grammar.only_last_action = recipe_.only_last_action
        options.path = str(stem.with_suffix(".z8"))
        options.file_ext = ".z8"
        options.force_recompile = True
        try:
            with quest_search.budget():
                game = make(settings=dict(recipe_.settings), options=options)
                walkthrough = list(game.walkthrough or [])
        except (QuestGenerationError, quest_search.BudgetExceeded) as exc:
            rejected.append({"seed": seed, "reason": type(exc).__name__})
            continue
        wanted = recipe_.walkthrough_length
        if wanted is not None and len(walkthrough) != wanted:
            rejected.append({"seed": seed, "reason": f"walkthrough of {len(walkthrough)}"})
            continue
        compile_game(game, options)
        return {
            "family": recipe_.family,
            "index": index,
            "generation_seed": seed,
            "attempt": attempt,
            "rejected": rejected,
            "recipe": recipe_.as_dict(),
            "textworld_version": textworld.__version__,
            "walkthrough_length": len(walkthrough),
            "max_score": game.max_score,
            "uuid": game.metadata.get("uuid", ""),
        }
    raise GameBuildError(
        f"no acceptable game for {recipe_.family} #{index} in {recipes.MAX_ATTEMPTS} candidate "
        f"seeds ({recipe_.describe()})"
    )


def _normalise_serial(story: Path) -> None:
    """Overwrite the story's serial number (the compile date) with ``000000``."""
    data = bytearray(story.read_bytes())
    data[_SERIAL_OFFSET : _SERIAL_OFFSET + len(_SERIAL)] = _SERIAL
    story.write_bytes(bytes(data))


def _recipe(family: str) -> recipes.Recipe:
    try:
        return recipes.RECIPES[family]
    except KeyError:
        raise ValueError(
            f"unknown TextWorld game family {family!r}; known: {', '.join(GAME_FAMILIES)}"
        ) from None


def _check_index(index: int) -> None:
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < GAMES_PER_FAMILY:
        raise ValueError(f"game index must be an integer in [0, {GAMES_PER_FAMILY}), got {index!r}")
