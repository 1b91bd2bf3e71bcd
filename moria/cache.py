"""Where Moria keeps game data and model weights it builds once, and the lock that guards them.

Everything lives under one root: ``$MORIA_CACHE_DIR`` when set, else ``~/.cache/moria``. Each
kind of data has its own subfolder (``models``, ``boxoban``, ``textworld``). Builders write a file
under a temporary name and rename it into place, holding :func:`file_lock` on a sibling
``.lock`` file, so two processes never build the same item and a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

CACHE_ENV = "MORIA_CACHE_DIR"


def cache_root() -> Path:
    """``$MORIA_CACHE_DIR`` (``~`` expanded) or ``~/.cache/moria``; not created."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "moria"


def cache_path(kind: str) -> Path:
    """The subfolder for one kind of data, e.g. ``cache_path("textworld")``; not created."""
    return cache_root() / kind


@contextlib.contextmanager
def file_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created, with its parents, if missing).

    Blocks until the lock is free. The lock is released when the block exits or the process
    dies, so a crashed builder never leaves a stale lock behind.
    """
    lock = Path(path)
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
