"""Where Moria keeps game data and model weights it builds once, and the lock that guards them.

Everything lives under one root: ``$MORIA_CACHE_DIR`` when set, else ``~/.cache/moria``. Each
kind of data has its own subfolder (``models``, ``boxoban``, ``textworld``). Builders write a file
under a temporary name and rename it into place, holding :func:`file_lock` on a sibling
``.lock`` file, so two processes never build the same item and a reader never sees half a file.

Reading built data takes no lock and writes nothing: the data may sit in a read-only image,
owned by another user (a container's data is built as root and read by an unprivileged
server). So readers check "is it there and valid" first and take the lock only to build, and
builders make what they write readable by everyone (:func:`make_dirs`, :func:`make_readable`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

CACHE_ENV = "MORIA_CACHE_DIR"
#: Modes of built files and of the folders made for them: readable (and folders enterable) by
#: every user, whatever the builder's umask.
FILE_MODE = 0o644
DIR_MODE = 0o755


def cache_root() -> Path:
    """``$MORIA_CACHE_DIR`` (``~`` expanded) or ``~/.cache/moria``; not created."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "moria"


def cache_path(kind: str) -> Path:
    """The subfolder for one kind of data, e.g. ``cache_path("textworld")``; not created."""
    return cache_root() / kind


def make_dirs(folder: str | os.PathLike[str]) -> Path:
    """``mkdir -p folder``, giving each folder it creates ``DIR_MODE`` (not the umask's mode);
    folders that already exist are left as they are. Returns ``Path(folder)``.

    Raises:
        OSError: a folder cannot be created (e.g. a read-only file system).
    """
    target = Path(folder)
    missing = []
    current = target
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    target.mkdir(parents=True, exist_ok=True)
    for created in reversed(missing):
        with contextlib.suppress(OSError):  # made by another user meanwhile: theirs to set
            os.chmod(created, DIR_MODE)
    return target


def make_readable(*paths: str | os.PathLike[str]) -> None:
    """Give built files ``FILE_MODE`` (0644), so a server running as another user can read
    data built as root. Best effort: a file that cannot be changed is left as it is."""
    for path in paths:
        with contextlib.suppress(OSError):
            os.chmod(path, FILE_MODE)


@contextlib.contextmanager
def file_lock(path: str | os.PathLike[str], *, remove: bool = False) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created, with its parents, if missing).

    Blocks until the lock is free. The lock is released when the block exits or the process
    dies, so a crashed builder never leaves a stale lock behind.

    With ``remove=True`` the holder deletes the lock file before releasing it, so built data
    carries no lock files. This is safe: a process that waited on the deleted file sees, once
    it holds it, that ``path`` is no longer that file, and locks ``path`` afresh.
    """
    lock = Path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    while True:
        handle = open(lock, "a+")  # noqa: SIM115 - closed below or by the with block
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            if not remove or _is_same_file(handle.fileno(), lock):
                break
        except BaseException:
            handle.close()
            raise
        handle.close()  # the lock file was deleted by its last holder: lock the new one
    with handle:
        try:
            yield
        finally:
            if remove:
                with contextlib.suppress(OSError):
                    lock.unlink()
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _is_same_file(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False
