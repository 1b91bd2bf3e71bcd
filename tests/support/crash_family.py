"""A test-only game family whose game raises inside ``step`` when told "crash" (task
"crash"), or inside its first ``reset`` (task "crash_on_reset", which counts its closes).

Registered into ``env_server.families.FAMILIES`` by the tests that need a crashing game, to
prove a game crash ends only its own session (INTERNAL) while the server keeps serving.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from env_server.game import (
    ActionInfo,
    AgentTransition,
    AgentView,
    Family,
    Game,
    GameOptions,
    StepResult,
    SubmittedAction,
    TaskInfo,
    TaskNotFoundError,
)


class CrashGame(Game):
    """One agent; "ok" advances, "crash" raises RuntimeError."""

    def __init__(self) -> None:
        self.steps = 0

    @property
    def agents(self) -> list[str]:
        return ["agent_0"]

    @property
    def max_steps(self) -> int:
        return 100

    def instruction(self, agent_id: str) -> str:
        return "say ok"

    def actions(self, agent_id: str) -> list[ActionInfo]:
        return [ActionInfo("ok", "fine"), ActionInfo("crash", "raise inside the game")]

    def default_action(self, agent_id: str) -> str:
        return "ok"

    def reset(self, seed: int | None = None) -> dict[str, AgentView]:
        self.steps = 0
        return {"agent_0": AgentView(long_term_context="ready")}

    def step(self, actions: Mapping[str, SubmittedAction]) -> StepResult:
        if actions["agent_0"] == "crash":
            raise RuntimeError("boom")
        self.steps += 1
        view = AgentView(long_term_context=f"step {self.steps}")
        tr = AgentTransition(view, 0.0, False, False, True, "ok")
        return StepResult({"agent_0": tr}, ["agent_0"], self.metrics(), False)

    def metrics(self) -> dict[str, float]:
        return {"progression": 0.0}

    def render(self) -> np.ndarray:
        return np.zeros((4, 4, 3), dtype=np.uint8)


class ResetCrashGame(CrashGame):
    """A CrashGame whose ``reset`` raises RuntimeError("reset boom"); ``closed`` counts the
    ``close`` calls of every instance (tests read it in-process)."""

    closed = 0

    def reset(self, seed: int | None = None) -> dict[str, AgentView]:
        raise RuntimeError("reset boom")

    def close(self) -> None:
        type(self).closed += 1


class CrashFamily(Family):
    """The family of CrashGame (task "crash") and ResetCrashGame (task "crash_on_reset")."""

    name = "crashy"

    def list_tasks(self) -> list[TaskInfo]:
        return [TaskInfo("crashy", "crash"), TaskInfo("crashy", "crash_on_reset")]

    def open(self, task: str, options: GameOptions) -> Game:
        if task == "crash_on_reset":
            return ResetCrashGame()
        if task != "crash":
            raise TaskNotFoundError(task, ["crash", "crash_on_reset"])
        return CrashGame()
