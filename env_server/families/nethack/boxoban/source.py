"""Where Boxoban levels come from: Moria's generated pools or an official level checkout.

``LevelSource.level_for(difficulty, seed)`` is a pure function of its arguments and of the
source's configuration, and always says which level it chose (``source_id``):

- ``LevelSource.generated()`` (the default): level index ``seed mod pool_size`` (1000 unless
  told) of Moria's own set for that difficulty, made by :func:`.generator.generate_level` with
  the index as seed. So each difficulty is a reproducible finite pool. Generated levels are
  cached as files under ``$MORIA_CACHE_DIR/boxoban`` (else ``~/.cache/moria/boxoban``), one per
  level. A cached level is read with no lock and no write (the cache may be a read-only image
  built by another user); only a missing level is generated, under a per-level file lock that is
  deleted afterwards, and written readable by all. A cache that cannot be written is skipped.
  ``source_id`` = ``generated/v<generator version>/<difficulty>/<index>``.
- ``LevelSource.official(path)``: a checkout of DeepMind's boxoban-levels, with
  ``medium/train/*.txt`` (medium) and ``hard/*.txt`` (hard). Files are sorted by name; the file
  is ``seed mod n_files`` and the level ``(seed // n_files) mod n_levels`` of that file.
  ``source_id`` = ``official/<subdir>/<file>#<level>``.
- ``LevelSource.from_env()``: ``official($MORIA_BOXOBAN_LEVELS)`` when that variable is set,
  else ``generated()``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from moria.cache import cache_path, file_lock, make_dirs, make_readable
from moria.files import atomic_write_text

from .generator import DIFFICULTIES, GENERATOR_VERSION, generate_level
from .levels import format_level, parse_level, read_level_file

log = logging.getLogger(__name__)

DEFAULT_POOL_SIZE = 1000
OFFICIAL_SUBDIRS: dict[str, str] = {"medium": "medium/train", "hard": "hard"}
OFFICIAL_ENV = "MORIA_BOXOBAN_LEVELS"
_FILES_KEPT = 8  # official level files kept parsed in memory


def default_cache_dir() -> Path:
    """``$MORIA_CACHE_DIR/boxoban``, else ``~/.cache/moria/boxoban``."""
    return cache_path("boxoban")


def _check_difficulty(difficulty: str) -> None:
    if difficulty not in DIFFICULTIES:
        raise ValueError(
            f"unknown Boxoban difficulty {difficulty!r}; expected one of {', '.join(DIFFICULTIES)}"
        )


class LevelSource:
    """Chooses a Boxoban level for (difficulty, seed). Build it with a class method."""

    def __init__(
        self,
        *,
        kind: str,
        cache_dir: Path | None = None,
        pool_size: int = DEFAULT_POOL_SIZE,
        root: Path | None = None,
    ) -> None:
        self.kind = kind
        self.cache_dir = cache_dir
        self.pool_size = pool_size
        self.root = root
        self._files: dict[str, list[Path]] = {}
        self._file_levels: dict[Path, list[str]] = {}

    # ------------------------------------------------------------------ constructors
    @classmethod
    def generated(
        cls,
        *,
        cache_dir: str | os.PathLike[str] | bool | None = True,
        pool_size: int = DEFAULT_POOL_SIZE,
    ) -> LevelSource:
        """Moria's generated levels.

        Args:
            cache_dir: ``True`` for :func:`default_cache_dir`, a path, or ``None``/``False`` for
                no cache.
            pool_size: how many distinct levels each difficulty has (index = seed mod size).

        Raises:
            ValueError: ``pool_size`` < 1.
        """
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, got {pool_size}")
        if cache_dir is True:
            resolved: Path | None = default_cache_dir()
        elif cache_dir is None or cache_dir is False:
            resolved = None
        else:
            resolved = Path(cache_dir)
        return cls(kind="generated", cache_dir=resolved, pool_size=pool_size)

    @classmethod
    def official(cls, path: str | os.PathLike[str]) -> LevelSource:
        """An official boxoban-levels checkout at ``path``.

        Raises:
            FileNotFoundError: ``path`` is not a directory, or holds no ``*.txt`` level file in
                any of the expected subdirectories (``medium/train``, ``hard``).
        """
        root = Path(path)
        if not root.is_dir():
            raise FileNotFoundError(f"Boxoban levels directory {root} does not exist")
        source = cls(kind="official", root=root)
        if not any(source._list(d) for d in DIFFICULTIES):
            raise FileNotFoundError(
                f"no Boxoban levels in {root}: expected *.txt level files in "
                + " and ".join(f"{root / sub}/" for sub in OFFICIAL_SUBDIRS.values())
            )
        return source

    @classmethod
    def from_env(cls) -> LevelSource:
        """``official($MORIA_BOXOBAN_LEVELS)`` when set and non-empty, else ``generated()``."""
        path = os.environ.get(OFFICIAL_ENV)
        return cls.official(path) if path else cls.generated()

    # ------------------------------------------------------------------ choosing
    def level_for(self, difficulty: str, seed: int) -> tuple[str, str]:
        """The level for an episode.

        Args:
            difficulty: ``"medium"`` or ``"hard"``.
            seed: the episode seed (any integer; negative seeds wrap like Python's ``%``).

        Returns:
            ``(level_text, source_id)``: 10 rows joined by ``\\n``, and where it came from.

        Raises:
            ValueError: unknown difficulty.
            FileNotFoundError: official source without level files for this difficulty.
        """
        _check_difficulty(difficulty)
        if self.kind == "official":
            return self._official(difficulty, seed)
        return self._generated(difficulty, seed)

    def is_cached(self, difficulty: str, seed: int) -> bool:
        """True when ``level_for(difficulty, seed)`` needs no generation: an official source, no
        cache configured (nothing to build ahead), or the generated level's file is readable and
        valid. Takes no lock and writes nothing."""
        _check_difficulty(difficulty)
        if self.kind == "official" or self.cache_dir is None:
            return True
        return self._read_cached(self._cached_path(difficulty, seed % self.pool_size)) is not None

    def _cached_path(self, difficulty: str, index: int) -> Path:
        assert self.cache_dir is not None
        return self.cache_dir / f"v{GENERATOR_VERSION}" / difficulty / f"{index:06d}.txt"

    def _generated(self, difficulty: str, seed: int) -> tuple[str, str]:
        index = seed % self.pool_size
        source_id = f"generated/v{GENERATOR_VERSION}/{difficulty}/{index}"
        if self.cache_dir is None:
            return generate_level(difficulty, index), source_id
        path = self._cached_path(difficulty, index)
        text = self._read_cached(path)  # no lock: files are only ever replaced whole
        if text is not None:
            return text, source_id
        folder = path.parent
        try:
            make_dirs(folder)
            with file_lock(folder / f".{index:06d}.lock", remove=True):
                text = self._read_cached(path)  # generated by another process meanwhile?
                if text is None:
                    text = generate_level(difficulty, index)
                    atomic_write_text(path, text + "\n")
                    make_readable(path)
            return text, source_id
        except OSError as exc:
            log.warning("Boxoban level cache %s unusable (%s); generating without it", folder, exc)
            return generate_level(difficulty, index), source_id

    @staticmethod
    def _read_cached(path: Path) -> str | None:
        """The cached level at ``path``, or None when it is missing, unreadable or corrupt."""
        try:
            raw = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("cannot read the cached Boxoban level %s (%s)", path, exc)
            return None
        try:
            return format_level(parse_level(raw))
        except ValueError:
            log.warning("ignoring a corrupt cached Boxoban level %s", path)
            return None

    def _list(self, difficulty: str) -> list[Path]:
        if difficulty not in self._files:
            assert self.root is not None
            folder = self.root / OFFICIAL_SUBDIRS[difficulty]
            files = sorted(folder.glob("*.txt")) if folder.is_dir() else []
            self._files[difficulty] = files
        return self._files[difficulty]

    def _official(self, difficulty: str, seed: int) -> tuple[str, str]:
        assert self.root is not None
        files = self._list(difficulty)
        sub = OFFICIAL_SUBDIRS[difficulty]
        if not files:
            raise FileNotFoundError(
                f"no {difficulty} Boxoban levels: expected *.txt level files in {self.root / sub}/"
            )
        path = files[seed % len(files)]
        levels = self._file_levels.get(path)
        if levels is None:
            levels = read_level_file(path)
            if len(self._file_levels) >= _FILES_KEPT:
                self._file_levels.pop(next(iter(self._file_levels)))
            self._file_levels[path] = levels
        if not levels:
            raise FileNotFoundError(f"Boxoban level file {path} holds no level")
        index = (seed // len(files)) % len(levels)
        text = format_level(parse_level(levels[index]))
        return text, f"official/{sub}/{path.name}#{index}"
