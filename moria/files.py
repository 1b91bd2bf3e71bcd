"""Atomic file writes: the one place in Moria that writes a file through a temp file and a rename.

Every function here gives the same guarantee: a reader of the target path sees either the old
file (or no file, if there was none) or the complete new one, never a partial one, even when the
process is killed mid-write. The recipe is always the same:

1. create the parent directories of the target;
2. create a uniquely named hidden temp file in the *same* directory (so the rename stays on one
   file system): ``.<target name>.<random>.tmp`` (see ``TEMP_SUFFIX``, ``TEMP_GLOB``);
3. write the data, flush it and ``fsync`` the file;
4. ``os.replace`` the temp file over the target (atomic on POSIX and Windows);
5. best-effort ``fsync`` the directory, so the rename itself survives a power loss.

On any error (including ``KeyboardInterrupt``) before the rename, the temp file is removed and the
exception propagates unchanged; the target is untouched. A process killed between steps 2 and 4
leaves its temp file behind; ``remove_stale_temp_files`` deletes such leftovers.

Which function to use:

- data in memory: ``atomic_write_bytes``, ``atomic_write_text`` (UTF-8), ``atomic_write_json``;
- data streamed to a handle (large files, ``np.savez(handle)``): ``atomic_open``;
- a library API that only takes a path (``fig.savefig(path)``): ``atomic_path``. The temp path
  ends in ``.tmp``, so an API that picks a format or adds an extension from the file name must be
  told the format (``savefig(tmp, format="png")``) or be given a handle (``atomic_open``);
- files a generator already wrote beside the target (several files from one run): ``replace_file``.

Locking is not done here: callers that must serialise writers (read-modify-write, build once)
hold ``moria.cache.file_lock`` around the call.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, Final

#: Every temp file made here ends with this suffix.
TEMP_SUFFIX: Final = ".tmp"
#: Glob pattern matching the temp files made here (``.<name>.<random>.tmp``).
TEMP_GLOB: Final = f".*{TEMP_SUFFIX}"

StrPath = str | os.PathLike[str]


def _file_mode() -> int:
    """The mode ``open()`` would give a new file: 0o666 less the process umask (read from
    /proc where it can be, so the umask is never changed, not even for an instant)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def _new_temp(target: Path) -> tuple[int, Path]:
    """Create the parents of ``target`` and an empty temp file beside it; return (fd, path).

    The temp file gets the mode a plain ``open()`` would give the target (``mkstemp`` makes it
    0600), so results and prepared data are readable by other users as any file written
    directly would be (a server running as another user reads data built as root)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=TEMP_SUFFIX)
    try:
        os.fchmod(fd, _file_mode())
    except BaseException:
        os.close(fd)
        _discard(Path(name))
        raise
    return fd, Path(name)


def _discard(tmp: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def _fsync_dir(directory: Path) -> None:
    """Best-effort fsync of a directory (makes a rename in it durable); never raises."""
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:  # e.g. Windows: directories cannot be opened
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


@contextlib.contextmanager
def atomic_open(path: StrPath) -> Iterator[BinaryIO]:
    """Open a binary handle whose content replaces ``path`` atomically when the block exits.

    Usage: ``with atomic_open(p) as handle: handle.write(...)``. The handle writes to a hidden
    temp file beside ``path`` (parents are created); when the block ends normally the data is
    flushed, fsynced and renamed over ``path``, and the directory is fsynced (best effort).

    Raises:
        OSError: the directory or temp file cannot be created, or writing, fsyncing or renaming
            fails.
        Anything raised inside the block propagates unchanged.
        In every error case the temp file is removed and ``path`` keeps its old content.
    """
    target = Path(path)
    fd, tmp = _new_temp(target)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        _discard(tmp)
        raise
    _fsync_dir(target.parent)


def atomic_write_bytes(path: StrPath, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (see the module docstring); return ``Path(path)``.

    Parents are created. Readers see the old or the new file, never a partial one.

    Raises:
        OSError: the file cannot be written or renamed; ``path`` is then untouched and no temp
            file is left behind.
    """
    with atomic_open(path) as handle:
        handle.write(data)
    return Path(path)


def atomic_write_text(path: StrPath, text: str) -> Path:
    """Write ``text`` to ``path`` atomically as UTF-8, newlines untranslated; return the path.

    Parents are created. Readers see the old or the new file, never a partial one.

    Raises:
        UnicodeEncodeError: ``text`` cannot be encoded (e.g. a lone surrogate); nothing written.
        OSError: the file cannot be written or renamed; ``path`` is then untouched and no temp
            file is left behind.
    """
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: StrPath, obj: Any, **dumps_kwargs: Any) -> Path:
    """Serialise ``obj`` with ``json.dumps(obj, **dumps_kwargs)`` and write it atomically
    (UTF-8, no trailing newline added); return the path.

    ``obj`` is serialised before any file is touched.

    Raises:
        TypeError, ValueError: ``obj`` is not JSON-serialisable (or has a circular reference, or
            a non-finite float with ``allow_nan=False``); nothing written.
        OSError: as ``atomic_write_text``.
    """
    return atomic_write_text(path, json.dumps(obj, **dumps_kwargs))


def replace_file(src: StrPath, dst: StrPath) -> Path:
    """Move the complete file ``src`` over ``dst`` atomically: fsync ``src``, ``os.replace`` it,
    best-effort fsync ``dst``'s directory; return ``Path(dst)``.

    For files that something else wrote under a temporary name (e.g. a game generator writing
    several files into a scratch folder). ``src`` must be on the same file system as ``dst``
    (best: the same directory, or a scratch folder beside it).

    Raises:
        OSError: ``src`` is missing or cannot be fsynced or renamed; ``dst`` is then untouched and
            ``src`` is left where it was (the caller owns it).
    """
    source, target = Path(src), Path(dst)
    fd = os.open(source, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(source, target)
    _fsync_dir(target.parent)
    return target


@contextlib.contextmanager
def atomic_path(path: StrPath) -> Iterator[Path]:
    """Yield a temp path beside ``path`` for an API that writes to a path; on success the file
    there is fsynced and renamed over ``path``, on any exception it is removed.

    Usage: ``with atomic_path(out) as tmp: fig.savefig(tmp, format="png")``. The temp file exists
    (empty) when the block starts and its name ends in ``.tmp``: pass the format explicitly to
    APIs that guess it from the extension, and never use APIs that append one (``np.savez(str)``
    adds ``.npz``; give it a handle from ``atomic_open`` instead). Parents are created.

    Raises:
        OSError: the temp file cannot be created, fsynced or renamed.
        Anything raised inside the block propagates unchanged.
        In every error case the temp file is removed and ``path`` keeps its old content.
    """
    target = Path(path)
    fd, tmp = _new_temp(target)
    os.close(fd)
    try:
        yield tmp
        replace_file(tmp, target)
    except BaseException:
        _discard(tmp)
        raise


def remove_stale_temp_files(directory: StrPath) -> list[Path]:
    """Delete the temp files (``TEMP_GLOB``: hidden ``.<name>.*.tmp``) that the writers here
    leave when the process is killed between writing and renaming, anywhere under
    ``directory``; the real files are then the previous whole versions, or absent.

    Call it before a process starts writing into ``directory`` (a concurrent writer's temp file
    would be deleted too, making its rename fail). Returns what was removed; files that cannot
    be removed are skipped silently.
    """
    removed = []
    for tmp in Path(directory).rglob(TEMP_GLOB):
        if not tmp.is_file():
            continue
        with contextlib.suppress(OSError):
            tmp.unlink()
            removed.append(tmp)
    return removed
