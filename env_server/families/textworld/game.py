"""One TextWorld game: a single agent ``agent_0`` typing commands into one generated story.

Behaviour (docs/families/textworld.md):

- the episode seed picks the game file, ``games.index_for_seed(seed)`` (seed mod 25), built on
  demand; the seed also seeds the Z-machine's random generator;
- any text is an action (the action list is empty) and reaches the interpreter as submitted,
  as BALROG sends it. A non-text answer (an index) is invalid and ``help`` is applied instead.
  Commands naming ``save``, ``restore`` or a transcript are answered with a fixed notice and
  not sent: the interpreter would write files into the server's working directory;
- the episode ends when the game is won or lost, or after ``max_steps`` commands (80 unless
  ``GameOptions.max_steps``);
- long-term text: ``text.observation_text`` (status line and objective removed unless
  ``keep_objective``); short-term text: empty (the invalid-action feedback travels only in
  ``ActionResult.feedback``);
- reward: the change of the game's score at this step (BALROG summed cumulative scores);
- ``progression``: 0 until the episode ends, then max(score / max_score, 1 if won);
- no image: ``AgentView.image`` stays None even with ``render_image`` (the agent side then falls
  back to text); ``render()`` draws the last text on a frame (``render.py``).

Metrics: ``progression``, ``score``, ``max_score``, ``won``, ``lost``, ``steps``,
``episode_return`` (sum of score changes), ``game_index``, ``game_file`` (file name only),
``generation_seed`` (-1 before the first reset) and ``keep_objective``.

The oracle (``GameOptions.oracle``) puts the first command of TextWorld's ``policy_commands``
(the walkthrough from the current state) in ``info["expert_action"]``; asking for it makes every
step 10-20x slower (TextWorld re-plans the quest), so it is only requested with the oracle.

Loading a game parses its logic with TextWorld's shared, thread-unsafe parsers, so it happens
under ``games.PARSE_LOCK``; the family runs each game in its own process anyway.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import textworld

from env_server.actions import invalid_action_feedback, single_agent_action, single_agent_result
from env_server.families.textworld import games
from env_server.families.textworld.games import DEFAULT_ACTION, MAX_STEPS
from env_server.families.textworld.instruction import BUILDERS
from env_server.families.textworld.render import text_frame
from env_server.families.textworld.text import observation_text
from env_server.game import (
    ActionInfo,
    AgentTransition,
    AgentView,
    GameOptions,
    StepResult,
    SubmittedAction,
)
from env_server.single_agent import AGENT_ID, SingleAgentGame

BLOCKED_NOTICE = "Saving, restoring and transcripts are disabled in this game."
# Interpreter meta-commands that read or write files in the working directory.
_BLOCKED = re.compile(r"\b(?:save|restore|script|transcript|unscript|noscript)\b", re.IGNORECASE)


def frotz_seed(seed: int) -> int:
    """The Z-machine random seed for an episode seed: in [1, 2**31 - 1] (0 means 'random')."""
    return int(seed) % (2**31 - 1) + 1


class TextWorldGame(SingleAgentGame):
    """A TextWorld game of one family; built by ``TextWorldFamily.open``, not reset yet.

    Args:
        task: the family (``treasure_hunter``, ``the_cooking_game`` or ``coin_collector``).
        options: the open options (seed, oracle, max_steps; ``render_image`` is
            accepted but no image is sent: the game is text-only).
        keep_objective: keep the objective in the observations (see ``text.observation_text``).
    """

    def __init__(self, task: str, options: GameOptions, keep_objective: bool):
        self._task = task
        self._options = options
        self._keep_objective = keep_objective
        self._infos = textworld.EnvInfos(
            feedback=True, objective=True, score=True, max_score=True, won=True, lost=True,
            policy_commands=options.oracle,
        )
        self._env: Any = None
        self._path: Path | None = None
        self._index = games.index_for_seed(options.seed)
        self._generation_seed = -1
        self._objective = ""
        self._text = ""
        self._started = False
        self._done = False
        self._steps = 0
        self._score = 0
        self._max_score = 0
        self._won = False
        self._lost = False
        self._return = 0
        self._progression = 0.0
        self._policy: list[str] = []

    # -- static facts -----------------------------------------------------------------------

    @property
    def max_steps(self) -> int:
        """``GameOptions.max_steps`` if set, else 80 (BALROG's TextWorld limit)."""
        limit = self._options.max_steps
        return MAX_STEPS if limit is None else int(limit)

    def instruction(self, agent_id: str) -> str:
        """The family's instruction, stating this game's step limit."""
        self._check_agent(agent_id)
        return BUILDERS[self._task](self.max_steps, self._keep_objective)

    def _action_list(self) -> list[ActionInfo]:
        """Empty: any text is a command."""
        return []

    def _default_name(self) -> str:
        """``help`` (applied only to non-text answers)."""
        return DEFAULT_ACTION

    # -- episode ----------------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> dict[str, AgentView]:
        """Start an episode on game ``seed mod 25`` (default: the options' seed).

        Builds the game file first if it is missing (seconds; see ``games.build_game``).
        Raises ``games.GameBuildError`` if that fails.
        """
        seed = self._options.seed if seed is None else int(seed)
        index = games.index_for_seed(seed)
        path = games.build_game(self._task, index)
        with games.PARSE_LOCK:  # loading parses the game's logic (not thread-safe in TextWorld)
            if self._env is None or path != self._path:
                self._close_env()
                self._env = textworld.start(str(path), request_infos=self._infos)
                self._path = path
                meta = games.read_metadata(self._task, index)
                self._generation_seed = int(meta["generation_seed"])
            self._env.seed(frotz_seed(seed))
            state = self._env.reset()
        self._index = index
        self._objective = str(state["objective"] or "")
        self._max_score = int(state["max_score"] or 0)
        self._score = int(state["score"] or 0)
        self._started = True
        self._done = False
        self._steps = 0
        self._won = self._lost = False
        self._return = 0
        self._progression = 0.0
        view = self._view(str(state["feedback"] or ""), state.get("policy_commands"))
        return {AGENT_ID: view}

    def step(self, actions: Mapping[str, SubmittedAction]) -> StepResult:
        """Send ``actions["agent_0"]`` to the game as submitted, as BALROG does (a non-text
        answer becomes ``help``).

        Raises:
            RuntimeError: before ``reset`` or after the episode ended.
            ValueError: ``actions`` is not exactly one entry for ``agent_0``.
        """
        submitted = single_agent_action(actions, AGENT_ID, started=self._started, done=self._done)
        valid = isinstance(submitted, str)
        command = submitted if isinstance(submitted, str) else DEFAULT_ACTION
        feedback = "" if valid else invalid_action_feedback(submitted, command)

        previous = self._score
        if _BLOCKED.search(command):
            # Not sent: nothing changes but the step count.
            raw, policy, game_over = BLOCKED_NOTICE, self._policy, False
        else:
            state, score, game_over = self._env.step(command)
            raw, policy = str(state["feedback"] or ""), state.get("policy_commands")
            self._score = int(score or 0)
            self._won = bool(state["won"])
            self._lost = bool(state["lost"])
        self._steps += 1
        self._return += self._score - previous
        terminated = bool(game_over) or self._won or self._lost
        truncated = not terminated and self._steps >= self.max_steps
        self._done = terminated or truncated
        if self._done:
            ratio = self._score / self._max_score if self._max_score > 0 else 0.0
            self._progression = min(1.0, max(ratio, 1.0 if self._won else 0.0, 0.0))

        transition = AgentTransition(
            view=self._view(raw, policy),
            reward=float(self._score - previous),
            terminated=terminated,
            truncated=truncated,
            valid=valid,
            applied_action=command,
            feedback=feedback,
        )
        return single_agent_result(AGENT_ID, transition, done=self._done, metrics=self.metrics())

    def metrics(self) -> dict[str, Any]:
        """Running metrics (see the module docstring); zeros before the first reset."""
        return {
            "progression": self._progression,
            "score": self._score,
            "max_score": self._max_score,
            "won": self._won,
            "lost": self._lost,
            "steps": self._steps,
            "episode_return": float(self._return),
            "game_index": self._index,
            "game_file": games.game_path(self._task, self._index).name,
            "generation_seed": self._generation_seed,
            "keep_objective": self._keep_objective,
        }

    def render(self) -> np.ndarray:
        """The last observation text drawn on a (480, 640, 3) uint8 frame (``render.py``)."""
        if not self._started:
            self.reset()
        return text_frame(self._text)

    def close(self) -> None:
        """Close the interpreter; safe to call twice."""
        self._close_env()
        self._started = False

    # -- helpers ----------------------------------------------------------------------------

    def _view(self, raw: str, policy: Any) -> AgentView:
        self._text = observation_text(raw, self._objective, self._keep_objective)
        self._policy = list(policy or [])
        info: dict[str, Any] = {}
        if self._options.oracle:
            info["expert_action"] = self._policy[0] if self._policy else DEFAULT_ACTION
        # Text-only: no image even with render_image (the agent side falls back to text).
        return AgentView(long_term_context=self._text, info=info)

    def _close_env(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
            self._path = None
