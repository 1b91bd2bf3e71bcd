"""oracle: plays the env's expert hint ``info["expert_action"]`` (for example BabyAI's bot)."""

from __future__ import annotations

from agent_server.backends.base import TokenUsage
from agent_server.strategies.base import Strategy
from agent_server.turn import Decision, TurnInput

#: The ``TurnInput.info`` key that carries the expert's action.
HINT_KEY = "expert_action"


class OracleStrategy(Strategy):
    """Plays ``turn.info["expert_action"]``: a name is played as given; an integer is read as an
    index into ``ctx.action_names``. When the hint is missing or unusable the default action is
    played and the reasoning says so. Calls no model (``backend`` may be None).
    """

    name = "oracle"
    calls_model = False
    reads_tensors = False
    keeps_images = False

    async def act(self, turn: TurnInput) -> Decision:
        """Play the hint for ``turn`` (or the default action without one)."""
        action = self._hint(turn.info.get(HINT_KEY))
        if action:
            reasoning = f"oracle hint {HINT_KEY!r}"
        else:
            action = self.ctx.default_action
            reasoning = f"oracle hint {HINT_KEY!r} was absent; played the default action"
        return Decision(
            action=action,
            raw_completion=action,
            reasoning=reasoning,
            usage=TokenUsage(),
            latency_s=0.0,
            stop_reason="",
        )

    def _hint(self, hint: object) -> str:
        names = self.ctx.action_names
        if isinstance(hint, bool):
            return ""
        if isinstance(hint, int):
            return names[hint] if 0 <= hint < len(names) else ""
        return hint.strip() if isinstance(hint, str) else ""
