"""One BabyAI / MiniGrid game: a single agent ``agent_0`` playing one minigrid env.

Observations reproduce BALROG's BabyAI wrapper: the long-term text is the view description with
"You see " removed (``describe.py``); the short-term text is empty (the invalid-action
feedback sentence travels only in ``ActionResult.feedback``; the player shows it in its
short-term text, so that it reaches the model whatever its history window).

Metrics: ``progression`` (1.0 once any step gave a reward > 0, else 0.0; BALROG's definition),
``success`` (same event, as a bool), ``episode_return``, ``steps``, ``task_kind`` and ``mission``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from env_server.actions import (
    single_agent_result,
)
from env_server.families.babyai.describe import balrog_text, describe
from env_server.families.babyai.instruction import (
    ACTION_INDEX,
    ACTIONS,
    DEFAULT_ACTION,
    build_instruction,
)
from env_server.families.babyai.oracle import Oracle
from env_server.families.babyai.tasks import reduce_seed
from env_server.game import (
    ActionInfo,
    AgentView,
    GameOptions,
    StepResult,
    SubmittedAction,
)
from env_server.single_agent import AGENT_ID, SingleAgentGame


class BabyAIGame(SingleAgentGame):
    """A BabyAI game; built by ``BabyAIFamily.open``, not reset yet.

    Args:
        task: the task name (for messages).
        source: a ``sources.MixedSource`` / ``RegisteredSource`` giving the env for each seed.
        options: the open options (seed, oracle, render_image, max_steps).
        tile_size: pixels per grid cell of the rendered frames.

    ``instruction``, ``max_steps`` and ``render`` need an episode; called before the first
    ``reset`` they start one with the options' seed (the same state an explicit ``reset()``
    gives, since (task, seed) determines it).
    """

    def __init__(self, task: str, source: Any, options: GameOptions, tile_size: int):
        self._task = task
        self._source = source
        self._options = options
        self._tile_size = tile_size
        self._env: Any = None
        self._kind = ""
        self._oracle: Oracle | None = None
        self._done = False
        self._steps = 0
        self._return = 0.0
        self._progression = 0.0

    # -- static facts -----------------------------------------------------------------------

    @property
    def max_steps(self) -> int:
        """The step limit of the current episode (``GameOptions.max_steps`` if set)."""
        return int(self._started().max_steps)

    def instruction(self, agent_id: str) -> str:
        """Game, goal (this episode's mission), actions and tips."""
        self._check_agent(agent_id)
        return build_instruction(self._started().mission)

    def _action_list(self) -> list[ActionInfo]:
        return list(ACTIONS)

    def _default_name(self) -> str:
        return DEFAULT_ACTION

    # -- episode ----------------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> dict[str, AgentView]:
        """Start an episode; the seed (default: the options' seed) fixes kind and layout."""
        if self._source is None:
            raise RuntimeError("the game is closed")
        seed = reduce_seed(self._options.seed if seed is None else seed)
        self._kind, env = self._source.env_for(seed)
        obs, _ = env.reset(seed=seed)
        if self._options.max_steps is not None:
            env.max_steps = int(self._options.max_steps)
        self._env = env
        self._done = False
        self._steps = 0
        self._return = 0.0
        self._progression = 0.0
        self._oracle = Oracle(env) if self._options.oracle else None
        expert = self._oracle.first_action if self._oracle else None
        return {AGENT_ID: self._view(obs["image"], expert)}

    def step(self, actions: Mapping[str, SubmittedAction]) -> StepResult:
        """Apply ``actions["agent_0"]``; an invalid one becomes ``go forward`` (valid=False).

        Raises:
            RuntimeError: before ``reset`` or after the episode ended.
            ValueError: ``actions`` is not exactly one entry for ``agent_0``.
        """
        choice = self._choose(actions, started=self._env is not None)
        applied = choice.applied
        index = ACTION_INDEX[applied]

        obs, reward, terminated, truncated, _ = self._env.step(index)
        reward = float(reward)
        self._steps += 1
        self._return += reward
        if reward > 0:
            self._progression = 1.0
        self._done = bool(terminated or truncated)

        expert = self._oracle.after_step(index) if self._oracle else None
        view = self._view(obs["image"], expert)
        transition = choice.transition(view, reward, terminated=bool(terminated),
                                       truncated=bool(truncated))
        return single_agent_result(AGENT_ID, transition, done=self._done, metrics=self.metrics())

    def metrics(self) -> dict[str, Any]:
        """Running metrics; all zero / empty before the first reset."""
        return {
            "progression": self._progression,
            "success": self._progression > 0,
            "episode_return": self._return,
            "steps": self._steps,
            "task_kind": self._kind,
            "mission": self._env.mission if self._env is not None else "",
        }

    def render(self) -> np.ndarray:
        """The whole grid, agent view highlighted: (H, W, 3) uint8, ``tile_size`` px per cell."""
        return self._started().get_full_render(True, self._tile_size)

    def close(self) -> None:
        """Close the envs; safe to call twice."""
        if self._source is not None:
            self._source.close()
            self._source = None
        self._env = None

    # -- helpers ----------------------------------------------------------------------------

    def _view(self, image: np.ndarray, expert: str | None) -> AgentView:
        frame = self._env.get_pov_render(self._tile_size) if self._options.render_image else None
        return AgentView(
            long_term_context=balrog_text(describe(image)),
            image=frame,
            # minigrid's encoded egocentric view: (7, 7, 3) uint8 of (object, colour, state)
            tensors={"grid": image},
            # the mission in every view: BALROG's own BabyAI instruction names it
            # (agent.protocol=balrog reads it from the first observation)
            info={"mission": str(self._env.mission),
                  **({} if expert is None else {"expert_action": expert})},
        )

    def _started(self) -> Any:
        if self._env is None:
            self.reset()
        return self._env

