"""Running a check as another user: what a container's non-root server (UID 10001) can read."""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable


def as_user(uid: int, check: Callable[[], bool]) -> bool:
    """Run ``check`` in a forked child that switched to ``uid`` (needs root); its result.

    The child never returns into pytest: it exits 0 when ``check`` is true, 1 when false, 2
    when it raised (the traceback goes to standard error)."""
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 1
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            code = 0 if check() else 1
        except BaseException:  # noqa: BLE001 - the forked child must exit whatever happens
            traceback.print_exc()
            code = 2
        finally:
            os._exit(code)
    return os.waitpid(pid, 0)[1] == 0
