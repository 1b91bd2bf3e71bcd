"""dummy: a random legal action from a generator seeded with the episode seed."""

from __future__ import annotations

import random

from agent_server.backends.base import Backend, TokenUsage
from agent_server.strategies.base import Strategy
from agent_server.turn import Decision, EpisodeContext, TurnInput


class DummyStrategy(Strategy):
    """Plays a uniformly random action: from ``turn.legal_actions`` when non-empty, else from
    ``ctx.action_names``, else the default action. The generator is ``random.Random(ctx.seed)``,
    so equal seeds give equal action sequences. Calls no model (``backend`` may be None).
    """

    name = "dummy"
    calls_model = False
    reads_tensors = False
    keeps_images = False

    def __init__(self, ctx: EpisodeContext, backend: Backend | None) -> None:
        super().__init__(ctx, backend)
        self._rng = random.Random(ctx.seed)

    async def act(self, turn: TurnInput) -> Decision:
        """Pick the random action for ``turn``."""
        choices = turn.legal_actions or self.ctx.action_names
        if choices:
            action = self._rng.choice(choices)
            reasoning = f"random choice among {len(choices)} actions"
        else:
            action = self.ctx.default_action
            reasoning = "no action list to choose from; played the default action"
        return Decision(
            action=action,
            raw_completion=action,
            reasoning=reasoning,
            usage=TokenUsage(),
            latency_s=0.0,
            stop_reason="",
        )


class RandomStrategy(DummyStrategy):
    """``random``: the MOSAIC name of the random baseline player; plays exactly as ``dummy``."""

    name = "random"
