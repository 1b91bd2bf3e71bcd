"""The game wrapper shared by the ``nle`` and ``minihack`` families.

One :class:`NetHackGame` drives one NLE-based env (``nle.env.base.NLE`` subclass, used
unwrapped or behind thin patches) for a single agent ``agent_0``:

- seeding: ``(task, seed)`` fixes the episode. The 64-bit seed is hashed into NetHack's *core*
  and *disp* RNG seeds (``nethack_seeds``), reseeding is turned off and the moon phase /
  Friday-13th / night effects are derived from the seed instead of the wall clock
  (``fix_moon_phase=True``), so nothing depends on time, PIDs or global RNG state. The
  level-generation RNG (*lgen*) is left unset by default: levels are then drawn from the core
  stream exactly as in the reference, already a function of the seed. With
  ``fixed_levels=True`` lgen is seeded too (NLE then generates every level from its own
  stream, independent of the agent's actions);
- one ``step`` = the agent's key, then (when the task offers the MORE key) the --More--
  presses of ``text.more.skip_more``, whose rewards are added and whose messages are joined;
- the step limit counts agent steps (``max_steps``); an optional no-progress abort counts env
  steps (--More-- presses included, as in the reference) during which blstats ``time`` did not
  advance;
- an invalid action becomes the default action; the feedback sentence travels only in
  ``ActionResult.feedback`` (the player puts it in front of the short-term context, so it
  reaches the model whatever its history window);
- the text comes from ``text.render_observation`` (``hybrid`` or ``language`` mode).

Subclasses (``nle_family.NLEGame``, ``minihack_family.MiniHackGame``) supply the env, the
metrics and the image through the ``_`` hooks below. Everything a game holds is its own: no
module-level mutable state, and views carry only copies (NLE reuses its observation buffers).
"""

from __future__ import annotations

import hashlib
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from env_server.actions import (
    single_agent_result,
)
from env_server.families.nethack.actions import KeyAction
from env_server.game import (
    ActionInfo,
    AgentView,
    GameOptions,
    StepResult,
    SubmittedAction,
)
from env_server.single_agent import AGENT_ID, SingleAgentGame

SEED_MASK = (1 << 64) - 1
# NLE's own step limit is disabled (we count agent steps ourselves); this is "never".
ENV_STEP_LIMIT = 1 << 62
# blstats index of the in-game turn counter (nethack.NLE_BL_TIME) and of the depth.
BL_TIME = 20
BL_DEPTH = 12
#: Observation keys every family asks for (never the ``*_crop`` keys).
TEXT_KEYS = (
    "glyphs",
    "blstats",
    "tty_chars",
    "tty_colors",
    "tty_cursor",
    "inv_letters",
    "inv_strs",
)


def reduce_seed(seed: int) -> int:
    """Fold any integer onto [0, 2**64) (negative or oversized seeds stay deterministic)."""
    return int(seed) & SEED_MASK


def nethack_seeds(seed: int) -> tuple[int, int, int]:
    """NetHack's (core, disp, lgen) seeds for an episode seed: three independent 63-bit values
    hashed from the seed (blake2b with distinct salts), so nearby seeds give unrelated games."""
    out = []
    for salt in (b"core", b"disp", b"lgen"):
        digest = hashlib.blake2b(
            reduce_seed(seed).to_bytes(8, "little"), digest_size=8, salt=salt.ljust(16, b"\0")
        ).digest()
        out.append(int.from_bytes(digest, "little") & ((1 << 63) - 1))
    return out[0], out[1], out[2]


class Expert(Protocol):
    """An oracle that names the next action from what the agent sees (``oracle.py``)."""

    def reset(self, obs: Mapping[str, np.ndarray], message: str) -> str:
        """The hint for the first observation of an episode."""

    def next(self, obs: Mapping[str, np.ndarray], message: str, applied: str) -> str:
        """The hint after ``applied`` was played and ``obs`` came back."""


@dataclass
class StepOutcome:
    """One agent step after the --More-- handling: the final observation and the totals."""

    obs: Mapping[str, np.ndarray]
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]
    message: str


class NetHackGame(SingleAgentGame):
    """A single-agent NetHack/MiniHack game; built by a family's ``open``, not reset yet.

    Args:
        task: the task name.
        options: the open options (seed, oracle, render_image, max_steps).
        table: ``[(action, env_index)]`` in action-list order.
        default_action: the name applied for invalid answers (must be in ``table``).
        step_limit: agent steps per episode (``options.max_steps`` already applied).
        text_mode: ``"hybrid"`` or ``"language"``.
        no_progress_limit: end the episode (truncated) after this many env steps without the
            turn counter advancing; ``None`` disables the rule.
        fixed_levels: seed NetHack's level-generation RNG too (see the module docstring).

    ``render`` before the first ``reset`` starts an episode with the options' seed (the same
    state an explicit ``reset()`` gives).
    """

    def __init__(
        self,
        task: str,
        options: GameOptions,
        *,
        table: list[tuple[KeyAction, int]],
        default_action: str,
        step_limit: int,
        text_mode: str = "hybrid",
        no_progress_limit: int | None = None,
        fixed_levels: bool = False,
    ):
        self._task = task
        self._options = options
        self._table = table
        self._actions = [a.info for a, _ in table]
        self._index = {a.name: i for a, i in table}
        if default_action not in self._index:
            raise ValueError(f"default action {default_action!r} is not offered by {task}")
        self._default = default_action
        self._step_limit = int(step_limit)
        self._text_mode = text_mode
        self._no_progress_limit = no_progress_limit
        self._fixed_levels = fixed_levels
        self._more_index = self._index.get("more")
        self._episode_seed = 0
        self._env: Any = None
        self._expert: Expert | None = None
        self._closed = False
        self._last_obs_for_render: Mapping[str, np.ndarray] | None = None
        self._reset_counters()

    # -- static facts -----------------------------------------------------------------------

    @property
    def max_steps(self) -> int:
        """Agent steps per episode (the task's limit or ``GameOptions.max_steps``)."""
        return self._step_limit

    def instruction(self, agent_id: str) -> str:
        """The full instruction text (see the family's ``instructions`` functions)."""
        self._check_agent(agent_id)
        return self._instruction()

    def _action_list(self) -> list[ActionInfo]:
        return list(self._actions)

    def _default_name(self) -> str:
        return self._default

    # -- episode ----------------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> dict[str, AgentView]:
        """Start an episode; ``(task, seed)`` fixes its whole initial state.

        Raises:
            RuntimeError: the game is closed.
        """
        if self._closed:
            raise RuntimeError("the game is closed")
        seed = reduce_seed(self._options.seed if seed is None else seed)
        self._episode_seed = seed
        env = self._env_for_episode(seed)
        self._env = env
        core, disp, lgen = nethack_seeds(seed)
        env.unwrapped.seed(
            core=core, disp=disp, reseed=False, lgen=lgen if self._fixed_levels else None
        )
        obs, info = env.reset()
        self._reset_counters()
        self._last_time = int(obs["blstats"][BL_TIME])
        message = self._extract_message(obs)
        self._on_reset(obs, info)
        self._expert = self._make_expert(obs) if self._options.oracle else None
        hint = self._expert.reset(obs, message) if self._expert is not None else None
        self._last_obs_for_render = obs
        return {AGENT_ID: self._view(obs, message, hint)}

    def step(self, actions: Mapping[str, SubmittedAction]) -> StepResult:
        """Apply ``actions["agent_0"]``; an invalid answer becomes the default (valid=False).

        Raises:
            RuntimeError: before ``reset`` or after the episode ended.
            ValueError: ``actions`` is not exactly one entry for ``agent_0``.
        """
        choice = self._choose(actions, started=self._env is not None)
        applied = choice.applied

        out = self._play(self._index[applied])
        self._steps += 1
        self._return += out.reward
        truncated = out.truncated
        if not (out.terminated or truncated) and self._steps >= self._step_limit:
            truncated = True
            self._abort_reason = "step limit"
        self._done = bool(out.terminated or truncated)
        self._on_step(out, truncated)

        hint = None
        if self._expert is not None and not self._done:
            hint = self._expert.next(out.obs, out.message, applied)
        self._last_obs_for_render = out.obs
        view = self._view(out.obs, out.message, hint)
        transition = choice.transition(view, out.reward, terminated=bool(out.terminated),
                                       truncated=bool(truncated and not out.terminated))
        return single_agent_result(AGENT_ID, transition, done=self._done, metrics=self.metrics())

    def metrics(self) -> dict[str, Any]:
        """Running metrics: the family's (``progression`` first), then ``steps`` and
        ``episode_return``."""
        return {**self._metrics(), "steps": self._steps, "episode_return": self._return}

    def render(self) -> np.ndarray:
        """The current frame, (H, W, 3) uint8 (the family's renderer)."""
        if self._env is None:
            self.reset()
        return self._frame(self._last_obs_for_render)

    def close(self) -> None:
        """Close the env; safe to call twice."""
        self._closed = True
        if self._env is not None:
            self._close_env()
        self._env = None

    # -- helpers ----------------------------------------------------------------------------

    def _reset_counters(self) -> None:
        self._done = False
        self._steps = 0
        self._return = 0.0
        self._stalled = 0
        self._last_time = 0
        self._abort_reason = ""
        self._last_obs_for_render = None

    def _env_step(self, index: int) -> tuple[Mapping[str, np.ndarray], float, bool, bool, dict]:
        """One raw env step with the no-progress rule applied (``truncated`` set when it
        fires)."""
        obs, reward, terminated, truncated, info = self._env.step(index)
        terminated, truncated = bool(terminated), bool(truncated)
        if self._no_progress_limit is not None and not terminated:
            now = int(obs["blstats"][BL_TIME])
            if now == self._last_time:
                self._stalled += 1
            else:
                self._last_time, self._stalled = now, 0
            if self._stalled >= self._no_progress_limit and not truncated:
                truncated = True
                self._abort_reason = f"no progress for {self._no_progress_limit} steps"
        return obs, float(reward), terminated, truncated, info

    def _play(self, index: int) -> StepOutcome:
        """The agent's key, then the --More-- presses (when the task offers the MORE key)."""
        obs, reward, terminated, truncated, info = self._env_step(index)
        if self._more_index is None:
            return StepOutcome(obs, reward, terminated, truncated, info, self._extract_message(obs))
        from env_server.families.nethack.text.more import skip_more

        more = skip_more(
            obs,
            self._env_step,
            self._more_index,
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            info=info,
        )
        return StepOutcome(
            more.obs,
            float(more.reward),
            more.terminated,
            more.truncated,
            dict(more.info),
            more.message,
        )

    @staticmethod
    def _extract_message(obs: Mapping[str, np.ndarray]) -> str:
        from env_server.families.nethack.text.message import extract_message

        return extract_message(obs["tty_chars"])

    def _view(self, obs: Mapping[str, np.ndarray], message: str, hint: str | None) -> AgentView:
        from env_server.families.nethack.text import render_observation

        long_term, short_term = render_observation(obs, message=message, mode=self._text_mode)
        return AgentView(
            long_term_context=long_term,
            short_term_context=short_term,
            image=self._frame(obs) if self._options.render_image else None,
            # glyphs: (21, 79) int16 NetHack glyph ids; blstats: (27,) int64 bottom-line stats
            tensors=({"glyphs": np.array(obs["glyphs"]), "blstats": np.array(obs["blstats"])}
                     if self._options.include_tensors else {}),
            info={} if hint is None else {"expert_action": hint},
        )

    # -- hooks ------------------------------------------------------------------------------

    @abstractmethod
    def _env_for_episode(self, seed: int) -> Any:
        """The env to play this episode (created or reused); not reset here."""

    @abstractmethod
    def _instruction(self) -> str:
        """The instruction text."""

    @abstractmethod
    def _on_reset(self, obs: Mapping[str, np.ndarray], info: Mapping[str, Any]) -> None:
        """Start the family's episode metrics from the first observation."""

    @abstractmethod
    def _on_step(self, out: StepOutcome, truncated: bool) -> None:
        """Update the family's metrics after one agent step (``truncated`` includes the step
        limit); ``self._done`` is already set."""

    @abstractmethod
    def _metrics(self) -> dict[str, Any]:
        """The family's metrics, ``progression`` included."""

    @abstractmethod
    def _frame(self, obs: Mapping[str, np.ndarray] | None) -> np.ndarray:
        """An RGB frame for ``obs`` (None: before any episode)."""

    def _make_expert(self, obs: Mapping[str, np.ndarray]) -> Expert:
        """The oracle for this episode (families that allow ``oracle`` override this)."""
        raise NotImplementedError

    def _close_env(self) -> None:
        self._env.close()
