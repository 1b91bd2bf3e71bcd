"""The expert for ``options.oracle``: the next action of a solver plan, replanned on deviation.

The plan comes from ``solver.solve`` on the current grid with the steps left as budget. While the
agent follows it, the remaining actions stay valid (the engine is deterministic); when the agent
plays anything else, the next advice is planned afresh from the new state. When no plan is found
(the agent made the puzzle unwinnable, or the steps left are too few) the advice is ``idle``
for the rest of the episode: a state with no plan within ``B`` steps cannot have a successor with
a plan within ``B - 1``, so searching again would only cost time. The search is capped at
``MAX_EXPANSIONS`` states (about a second and a half on one core; a fresh BALROG puzzle needs at
most a few hundred), so a hopeless state costs one slow step, once.
"""

from __future__ import annotations

from collections import deque

from env_server.families.babaisai.grid import Board
from env_server.families.babaisai.instruction import ACTION_NAMES, DEFAULT_ACTION
from env_server.families.babaisai.rules import Ruleset
from env_server.families.babaisai.solver import solve

MAX_EXPANSIONS = 10_000


class Oracle:
    """Advice for one episode (create a new one at every reset)."""

    def __init__(self) -> None:
        self._plan: deque[int] = deque()
        self._gave_up = False

    @property
    def gave_up(self) -> bool:
        """True once a search found no plan (the advice is then always ``idle``)."""
        return self._gave_up

    def advise(self, board: Board, ruleset: Ruleset, steps_left: int) -> str:
        """The action name to play now (plans if needed)."""
        if self._gave_up:
            return DEFAULT_ACTION
        if not self._plan:
            plan = solve(board, budget=steps_left, ruleset=ruleset,
                         max_expansions=MAX_EXPANSIONS)
            if plan is None:
                self._gave_up = True
                return DEFAULT_ACTION
            self._plan.extend(plan.actions)
        return ACTION_NAMES[self._plan[0]]

    def observe(self, action: int) -> None:
        """Tell the oracle which action index was applied."""
        if self._plan and self._plan[0] == action:
            self._plan.popleft()
        else:
            self._plan.clear()
