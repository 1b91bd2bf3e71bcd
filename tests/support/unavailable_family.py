"""A test-only game family that lists a task it cannot open (``TaskInfo.unavailable``).

Registered into ``env_server.families.FAMILIES`` by the tests of the unavailable-task mechanism,
so the env server's answer (FAILED_PRECONDITION with the reason) is checked apart from any real
family, in-process and with process isolation.
"""

from __future__ import annotations

from env_server.game import (
    Family,
    Game,
    GameOptions,
    TaskInfo,
    TaskNotFoundError,
    TaskUnavailableError,
)
from tests.support.crash_family import CrashGame

#: The reason the locked task gives (what is missing, how to provide it).
LOCKED_REASON = "needs the door key (locked_kwargs.key=PATH), which this test server lacks"


class LockedFamily(Family):
    """Task ``open`` plays ``CrashGame``; task ``locked`` is listed but unavailable."""

    name = "locked"

    def list_tasks(self) -> list[TaskInfo]:
        return [TaskInfo("locked", "open", "a door that opens", default_action="ok"),
                TaskInfo("locked", "locked", "a door that does not",
                         default_action="ok", unavailable=LOCKED_REASON)]

    def open(self, task: str, options: GameOptions) -> Game:
        if task == "locked":
            raise TaskUnavailableError(task, LOCKED_REASON)
        if task != "open":
            raise TaskNotFoundError(task, ["open", "locked"])
        return CrashGame()
