"""One BabaIsAI game: a single agent ``agent_0`` playing one of the 40 puzzles.

Source of reference behaviour: docs/families/babaisai.md (rewards, ending, progression, text) and
the invalid-action rule of docs/adding-a-family.md. Per step: ``idle`` changes nothing but uses
a step; a move runs the engine (``engine.advance``). Then:

- a win gives reward ``1 - 0.9 * steps / D`` and ends the episode (terminated), where ``D`` is
  100 (BALROG's value) or the step limit when a longer one was asked for, so that a win always
  pays more than 0;
- a lose gives -1 and ends the episode;
- nothing YOU any more (the YOU rule was broken without a replacement) ends the episode as lost,
  reward -1, and the observation says so (the reference instead swapped in a new random puzzle
  without ending the episode, a defect);
- otherwise the episode is truncated when ``steps`` reaches the step limit (100 by default).

``progression`` becomes 1.0 on the step that ends the episode if that step's reward is > 0, else
stays 0.0 (BALROG's definition). The long-term text is the rules/objects description; the
short-term text is empty (the invalid-action feedback travels only in ``ActionResult.feedback``).

Metrics: ``progression``, ``won``, ``lost``, ``end_reason`` (``win``, ``lose``, ``no_you``,
``step_limit`` or empty), ``steps``, ``episode_return``, ``target_plan`` (never shown to the
model), ``rules`` (active rules, with colours and transformation rules) and ``text_fixes``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from env_server.actions import (
    single_agent_result,
)
from env_server.families.babaisai.engine import advance
from env_server.families.babaisai.grid import Board
from env_server.families.babaisai.instruction import (
    ACTION_INDEX,
    ACTIONS,
    DEFAULT_ACTION,
    build_instruction,
)
from env_server.families.babaisai.oracle import Oracle
from env_server.families.babaisai.puzzles import generate
from env_server.families.babaisai.render import render
from env_server.families.babaisai.rules import Ruleset, ruleset_for
from env_server.families.babaisai.tasks import MAX_STEPS
from env_server.families.babaisai.text import observation_text
from env_server.game import (
    ActionInfo,
    AgentView,
    GameOptions,
    StepResult,
    SubmittedAction,
)
from env_server.single_agent import AGENT_ID, SingleAgentGame

WIN_PENALTY = 0.9
LOSE_REWARD = -1.0


class BabaIsAIGame(SingleAgentGame):
    """A BabaIsAI game; built by ``BabaIsAIFamily.open``, not reset yet.

    Args:
        task: the canonical task id (for messages).
        puzzle: the bare puzzle name (a key of ``puzzles.PUZZLES``).
        options: the open options (seed, oracle, render_image, max_steps).
        tile_size: pixels per cell of rendered frames.
        text_fixes: corrected text observations instead of the reference's (``text.py``).

    ``instruction``, ``max_steps`` and ``render`` work before the first ``reset`` too (they start
    the episode of the options' seed, the same state an explicit ``reset()`` gives).
    """

    def __init__(self, task: str, puzzle: str, options: GameOptions, tile_size: int,
                 text_fixes: bool):
        self._task = task
        self._puzzle = puzzle
        self._options = options
        self._tile_size = tile_size
        self._text_fixes = text_fixes
        self._limit = int(options.max_steps) if options.max_steps is not None else MAX_STEPS
        self._board: Board | None = None
        self._ruleset: Ruleset | None = None
        self._plan_text = ""
        self._oracle: Oracle | None = None
        self._reset_counters()

    def _reset_counters(self) -> None:
        self._done = False
        self._steps = 0
        self._return = 0.0
        self._progression = 0.0
        self._won = False
        self._lost = False
        self._end_reason = ""
        self._no_you = False

    # -- static facts -------------------------------------------------------------------------

    @property
    def max_steps(self) -> int:
        """The step limit: ``GameOptions.max_steps`` if set, else 100."""
        return self._limit

    def instruction(self, agent_id: str) -> str:
        """Game, actions, observation format and tips (the same for every puzzle)."""
        self._check_agent(agent_id)
        return build_instruction(self._limit)

    def _action_list(self) -> list[ActionInfo]:
        return list(ACTIONS)

    def _default_name(self) -> str:
        return DEFAULT_ACTION

    # -- episode ------------------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> dict[str, AgentView]:
        """Start an episode; ``(task, seed)`` (default: the options' seed) fixes the layout.

        Raises ``ValueError`` for a negative seed.
        """
        seed = self._options.seed if seed is None else seed
        if seed < 0:
            raise ValueError(f"seed must be >= 0, got {seed}")
        puzzle = generate(self._puzzle, int(seed))
        self._board = puzzle.board
        self._ruleset = ruleset_for(puzzle.board)
        self._plan_text = puzzle.target_plan
        self._reset_counters()
        self._oracle = Oracle() if self._options.oracle else None
        return {AGENT_ID: self._view()}

    def step(self, actions: Mapping[str, SubmittedAction]) -> StepResult:
        """Apply ``actions["agent_0"]``; an invalid one becomes ``idle`` (valid=False).

        Raises:
            RuntimeError: before ``reset`` or after the episode ended.
            ValueError: ``actions`` is not exactly one entry for ``agent_0``.
        """
        choice = self._choose(actions, started=self._board is not None)
        applied = choice.applied
        index = ACTION_INDEX[applied]
        board, ruleset = self._started()

        outcome = advance(board, ruleset, index)
        self._ruleset = outcome.ruleset
        self._steps += 1
        if self._oracle is not None:
            self._oracle.observe(index)

        reward, terminated = 0.0, False
        if outcome.won:
            scale = max(MAX_STEPS, self._limit)
            reward, terminated, self._won, self._end_reason = (
                1.0 - WIN_PENALTY * self._steps / scale, True, True, "win")
        elif outcome.lost or outcome.no_you:
            reward, terminated, self._lost = LOSE_REWARD, True, True
            self._end_reason = "lose" if outcome.lost else "no_you"
        self._no_you = outcome.no_you and not outcome.won
        truncated = not terminated and self._steps >= self._limit
        if truncated:
            self._end_reason = "step_limit"
        self._return += reward
        self._done = terminated or truncated
        if self._done:
            self._progression = 1.0 if reward > 0 else 0.0

        transition = choice.transition(self._view(), reward, terminated=terminated,
                                       truncated=truncated)
        return single_agent_result(AGENT_ID, transition, done=self._done, metrics=self.metrics())

    def metrics(self) -> dict[str, Any]:
        """Running metrics (module doc); zeros and empty values before the first reset."""
        return {
            "progression": self._progression,
            "won": self._won,
            "lost": self._lost,
            "end_reason": self._end_reason,
            "steps": self._steps,
            "episode_return": self._return,
            "target_plan": self._plan_text,
            "rules": self._ruleset.texts() if self._ruleset is not None else [],
            "text_fixes": self._text_fixes,
        }

    def render(self) -> np.ndarray:
        """The whole grid: ``(H * tile_size, W * tile_size, 3)`` uint8."""
        board, _ = self._started()
        return render(board, self._tile_size)

    def close(self) -> None:
        """Drop the episode; safe to call twice."""
        self._board = None
        self._ruleset = None
        self._oracle = None

    # -- helpers ------------------------------------------------------------------------------

    def _view(self) -> AgentView:
        board, ruleset = self._started()
        info: dict[str, Any] = {}
        if self._oracle is not None and not self._done:
            info["expert_action"] = self._oracle.advise(
                board, ruleset, self._limit - self._steps)
        return AgentView(
            long_term_context=observation_text(board, ruleset, self._text_fixes, self._no_you),
            image=render(board, self._tile_size) if self._options.render_image else None,
            info=info,
        )

    def _started(self) -> tuple[Board, Ruleset]:
        if self._board is None or self._ruleset is None:
            self.reset()
        assert self._board is not None and self._ruleset is not None
        return self._board, self._ruleset

