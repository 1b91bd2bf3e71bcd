"""One Crafter game: a single agent ``agent_0`` in one seeded crafter world.

Episode rules (docs/families/crafter.md; BALROG's Crafter wrapper unless noted):

- ``reset`` builds the world from the episode seed (``world.new_env``; BALROG ignores the seed)
  as a ``seeded_env.DeterministicEnv``, so the dynamics are reproducible too, resets it and,
  as BALROG does, applies one ``Noop`` step, so the first observation is already one world tick
  in; that step's reward is not counted;
- each step applies one of the 17 actions (an invalid answer becomes ``Noop``) and then renders
  the frame once more, exactly as BALROG's wrapper renders its image after every step. crafter's
  night-time rendering draws from the world RNG, so this keeps the world's random stream draw
  for draw the same as under BALROG's wrapper, whether or not images are requested (checked
  against the reference wrapper driven with the same seeds, actions and creature ordering:
  identical texts, frames and rewards over 6,300 steps);
- the episode terminates when the player dies and is truncated at the step limit (2000 by
  default; kwargs ``max_episode_steps`` or ``GameOptions.max_steps`` override it); crafter's own
  length limit is disabled.

Observation: long-term and short-term text from ``text.py`` (the invalid-action feedback
sentence travels only in ``ActionResult.feedback``, never in these texts). The
image (``render_image``) is that post-step frame, (H, W, 3) uint8 with (W, H) = kwargs ``size``
(256x256 by default). ``tensors["semantic"]`` is the 9x7 local window, int16 of shape (7, 9):
rows north to south, columns west to east, the player at [3, 4], crafter semantic ids
(``vocab.SEMANTIC_NAMES``), -1 for cells outside the map.

Metrics: ``progression`` (distinct achievements unlocked / 22), ``score`` (that count),
``achievements`` (all 22 names -> unlock count, in the instruction's order),
``achievements_unlocked`` (names, in the order first unlocked; same-step unlocks in instruction
order), ``episode_return`` (sum of crafter rewards), ``steps``, ``died``, and the text settings
(``text_format``, ``unique_items``, ``precise_location``, ``skip_items``, ``edge_only_items``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from env_server.actions import (
    single_agent_result,
)
from env_server.families.crafter.balrog_text import BalrogCrafterText
from env_server.families.crafter.config import CrafterConfig
from env_server.families.crafter.instruction import build_instruction
from env_server.families.crafter.text import long_term_text, short_term_text
from env_server.families.crafter.vocab import (
    ACHIEVEMENTS,
    ACTION_INDEX,
    ACTIONS,
    DEFAULT_ACTION,
    NOOP_INDEX,
)
from env_server.families.crafter.window import Frame, local_window
from env_server.families.crafter.world import frame_from, new_env
from env_server.game import (
    ActionInfo,
    AgentView,
    GameOptionError,
    GameOptions,
    StepResult,
    SubmittedAction,
)
from env_server.single_agent import AGENT_ID, SingleAgentGame


class CrafterGame(SingleAgentGame):
    """A Crafter game; built by ``CrafterFamily.open``, not reset yet.

    Args:
        config: the validated family options.
        options: the open options (seed, render_image, max_steps).

    ``render`` before the first ``reset`` starts an episode with the options' seed (the state an
    explicit ``reset()`` gives, since the seed determines it).
    """

    def __init__(self, config: CrafterConfig, options: GameOptions):
        self._config = config
        self._options = options
        limit = options.max_steps
        self._step_limit = int(limit) if limit is not None else config.max_episode_steps
        self._instruction = build_instruction()
        try:
            self._balrog_text = (BalrogCrafterText(config.balrog_source, config.text)
                                 if config.balrog_source else None)
        except ValueError as exc:  # BalrogSourceError: a path that is not a usable checkout
            raise GameOptionError(f"balrog_source: {exc}") from None
        self._info: dict[str, Any] = {}
        self._env: Any = None
        self._image: np.ndarray | None = None
        self._closed = False
        self._done = False
        self._died = False
        self._steps = 0
        self._return = 0.0
        self._counts: dict[str, int] = dict.fromkeys(ACHIEVEMENTS, 0)
        self._unlocked: list[str] = []

    # -- static facts -----------------------------------------------------------------------

    @property
    def max_steps(self) -> int:
        """The step limit (agent steps; the reset's Noop is not counted)."""
        return self._step_limit

    def instruction(self, agent_id: str) -> str:
        """Game, actions, achievements and goal (``instruction.build_instruction``)."""
        self._check_agent(agent_id)
        return self._instruction

    def _action_list(self) -> list[ActionInfo]:
        return list(ACTIONS)

    def _default_name(self) -> str:
        return DEFAULT_ACTION

    # -- episode ----------------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> dict[str, AgentView]:
        """Start an episode whose world comes from ``seed`` (default: the options' seed)."""
        if self._closed:
            raise RuntimeError("the game is closed")
        env = new_env(self._config, self._options.seed if seed is None else seed)
        env.reset()
        _, _, _, info = env.step(NOOP_INDEX)  # BALROG's reset Noop (its reward is dropped)
        self._env = env
        self._reset_counters()
        frame = self._advance(info)
        return {AGENT_ID: self._view(frame)}

    def step(self, actions: Mapping[str, SubmittedAction]) -> StepResult:
        """Apply ``actions["agent_0"]``; an invalid one becomes ``Noop`` (valid=False).

        Raises:
            RuntimeError: before ``reset`` or after the episode ended.
            ValueError: ``actions`` is not exactly one entry for ``agent_0``.
        """
        choice = self._choose(actions, started=self._env is not None)
        applied = choice.applied

        _, reward, _, info = self._env.step(ACTION_INDEX[applied])
        reward = float(reward)
        self._steps += 1
        self._return += reward
        frame = self._advance(info)
        terminated = frame.dead
        truncated = not terminated and self._steps >= self._step_limit
        self._died = terminated
        self._done = terminated or truncated

        view = self._view(frame)
        transition = choice.transition(view, reward, terminated=terminated, truncated=truncated)
        return single_agent_result(AGENT_ID, transition, done=self._done, metrics=self.metrics())

    def metrics(self) -> dict[str, Any]:
        """Running metrics (module docstring); zero counts before the first reset."""
        return {
            "progression": len(self._unlocked) / len(ACHIEVEMENTS),
            "score": len(self._unlocked),
            "achievements": dict(self._counts),
            "achievements_unlocked": list(self._unlocked),
            "episode_return": self._return,
            "steps": self._steps,
            "died": self._died,
            **self._config.text_metrics(),
        }

    def render(self) -> np.ndarray:
        """The current frame (the one rendered after the last step): (H, W, 3) uint8 copy."""
        if self._image is None:
            self.reset()
        assert self._image is not None
        return self._image.copy()

    def close(self) -> None:
        """Drop the world; safe to call twice."""
        self._closed = True
        self._env = None
        self._image = None

    # -- helpers ----------------------------------------------------------------------------

    def _reset_counters(self) -> None:
        self._done = False
        self._died = False
        self._steps = 0
        self._return = 0.0
        self._counts = dict.fromkeys(ACHIEVEMENTS, 0)
        self._unlocked = []

    def _advance(self, info: dict[str, Any]) -> Frame:
        """After a crafter step: render the frame as BALROG does, record achievements, and
        return the new ``Frame``."""
        self._image = np.asarray(self._env.render(), dtype=np.uint8)
        self._info = info
        counts = info["achievements"]
        for name in ACHIEVEMENTS:
            self._counts[name] = int(counts[name])
            if self._counts[name] > 0 and name not in self._unlocked:
                self._unlocked.append(name)
        return frame_from(self._env, info)

    def _view(self, frame: Frame) -> AgentView:
        window = local_window(frame.semantic, frame.pos)
        if self._balrog_text is not None:
            long_term, short_term = self._balrog_text.describe(self._env, self._info)
        else:
            long_term = long_term_text(frame, self._config.text, window)
            short_term = short_term_text(frame.inventory)
        image = None
        if self._options.render_image and self._image is not None:
            image = self._image.copy()
        return AgentView(
            long_term_context=long_term,
            short_term_context=short_term,
            image=image,
            tensors={"semantic": np.ascontiguousarray(window.T)},
        )

