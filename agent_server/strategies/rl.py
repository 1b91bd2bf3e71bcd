"""rl: plays a trained policy loaded from a ``moria-mlp`` checkpoint (``agent.checkpoint``).

Each turn the strategy reads the env tensors the checkpoint names (version 1: its
``observation_key``; version 2: the keys of its ``inputs``), computes
the policy's logits, removes illegal actions and plays the best remaining one. Legality comes
from ``turn.action_mask`` (aligned with ``ctx.action_names``) when the env sends one, else from
``turn.legal_actions``; with neither, every action of the checkpoint is allowed. Equal best
logits are broken by ``random.Random(ctx.seed)``; with ``sample`` the action is drawn from the
softmax over the legal logits with the same generator. Calls no model.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np

from agent_server.backends.base import Backend, TokenUsage
from agent_server.rl.checkpoint import CheckpointError, MlpPolicy, load_checkpoint_cached
from agent_server.strategies.base import Strategy
from agent_server.turn import Decision, EpisodeContext, TurnInput


class RLStrategy(Strategy):
    """The ``rl`` player.

    The checkpoint is loaded (or taken from the module cache keyed by path and mtime; the
    loaded policy is immutable) when the episode begins. Per-episode state is only the random
    generator, so nothing leaks across episodes.

    Args:
        ctx: the episode context; ``ctx.agent.checkpoint`` is the checkpoint path (relative paths
            are read from the policy server's working directory).
        backend: ignored (may be None).
        sample: draw from the softmax over legal logits instead of playing the argmax; None
            reads ``ctx.agent.sample`` when the config has that field, else False.

    Raises:
        ValueError: no checkpoint configured; the checkpoint cannot be loaded (the
            ``CheckpointError`` message, naming the file); the episode's env or task is not one
            the checkpoint was trained for; the checkpoint's action names are not the env's.
    """

    name = "rl"
    calls_model = False
    reads_tensors = True  # the checkpoint's input tensors
    keeps_images = False

    def __init__(self, ctx: EpisodeContext, backend: Backend | None, *,
                 sample: bool | None = None) -> None:
        super().__init__(ctx, backend)
        path = ctx.agent.checkpoint
        if not path:
            raise ValueError("agent.type=rl needs agent.checkpoint=<path of a .npz checkpoint>")
        try:
            self.policy: MlpPolicy = load_checkpoint_cached(path)
        except CheckpointError as exc:
            raise ValueError(f"rl checkpoint unusable: {exc}") from None
        meta = self.policy.metadata
        if ctx.env_name != meta.env or ctx.task not in meta.tasks:
            raise ValueError(
                f"rl checkpoint {path} was trained for env {meta.env!r}, tasks "
                f"{list(meta.tasks)}; this episode is env {ctx.env_name!r}, task {ctx.task!r} "
                f"(allowed with this checkpoint: {meta.env} {', '.join(meta.tasks)}; for "
                f"{ctx.task} give a checkpoint trained for it)")
        # checkpoint output index -> position in ctx.action_names (for the env's action mask)
        self._mask_index: list[int] | None = None
        if ctx.action_names:
            unknown = [n for n in meta.action_names if n not in ctx.action_names]
            if unknown:
                raise ValueError(
                    f"rl checkpoint {path}: action names {unknown} are not actions of "
                    f"{ctx.task} (the env's actions: {ctx.action_names})")
            self._mask_index = [ctx.action_names.index(n) for n in meta.action_names]
        self.sample = ctx.agent.sample if sample is None else sample
        self._label = Path(path).name
        self._rng = random.Random(ctx.seed)

    def legal(self, turn: TurnInput) -> np.ndarray:
        """Boolean ``(num_actions,)``: which checkpoint outputs are legal this turn."""
        names = self.policy.metadata.action_names
        if turn.action_mask and self._mask_index is not None and any(turn.action_mask):
            if len(turn.action_mask) != len(self.ctx.action_names):
                raise ValueError(
                    f"rl: the action mask has {len(turn.action_mask)} entries but the env "
                    f"has {len(self.ctx.action_names)} action names")
            return np.array([bool(turn.action_mask[j]) for j in self._mask_index])
        if turn.legal_actions:
            allowed = set(turn.legal_actions)
            return np.array([n in allowed for n in names])
        return np.ones(len(names), dtype=bool)

    async def act(self, turn: TurnInput) -> Decision:
        """The policy's move for ``turn`` (an action name of the checkpoint, always legal when
        the env says what is legal).

        Raises:
            ValueError: an observation tensor the checkpoint reads is missing (the session was
                not opened with tensors), its shape is not the checkpoint's, or it holds a value
                a one_hot input cannot encode.
        """
        meta = self.policy.metadata
        missing = [k for k in self.policy.input_keys if k not in turn.tensors]
        if missing:
            have = sorted(turn.tensors) or "none"
            raise ValueError(
                f"rl: the observation has no tensor {missing[0]!r} (tensors: {have}); the env "
                "session must be opened with tensors (the orchestrator does so for rl seats)")
        try:
            logits = self.policy.logits(
                {k: turn.tensors[k] for k in self.policy.input_keys})
        except CheckpointError as exc:
            raise ValueError(f"rl: {exc}") from None
        legal = self.legal(turn)
        if not legal.any():
            # the env's legal moves are none of the checkpoint's actions
            choices = turn.legal_actions or self.ctx.action_names
            action = self._rng.choice(choices) if choices else self.ctx.default_action
            return self._decision(action, "no checkpoint action is legal; played a random "
                                  "legal move")
        index = self._sample(logits, legal) if self.sample else self._argmax(logits, legal)
        how = "sampled from the legal softmax" if self.sample else "argmax of legal logits"
        action = meta.action_names[index]
        return self._decision(
            action, f"rl policy {self._label}: {how}: {action} (logit {logits[index]:.3f}, "
            f"{int(legal.sum())} legal actions)")

    def _argmax(self, logits: np.ndarray, legal: np.ndarray) -> int:
        best = max(float(logits[i]) for i in np.flatnonzero(legal))
        ties = [int(i) for i in np.flatnonzero(legal) if float(logits[i]) == best]
        return ties[0] if len(ties) == 1 else self._rng.choice(ties)

    def _sample(self, logits: np.ndarray, legal: np.ndarray) -> int:
        idx = [int(i) for i in np.flatnonzero(legal)]
        top = max(float(logits[i]) for i in idx)
        weights = [math.exp(float(logits[i]) - top) for i in idx]
        return self._rng.choices(idx, weights=weights, k=1)[0]

    def _decision(self, action: str, reasoning: str) -> Decision:
        return Decision(action=action, raw_completion=action, reasoning=reasoning,
                        usage=TokenUsage(), latency_s=0.0, stop_reason="")
