"""human: a person types each move; it reaches the policy server through its ``HumanConsole``.

The console is the server's (``PolicyServicer(human_console=...)``), for a front end that
embeds a policy server and reads moves from a keyboard (the MOSAIC worker seats its human in
its own process instead: ``worker/human.py``). The move is passed to the env as typed
(stripped), and the env judges it like any model answer (an invalid move gets the env's
default action and feedback).
"""

from __future__ import annotations

import time

from agent_server.backends.base import Backend, BackendError, TokenUsage
from agent_server.strategies.base import Strategy
from agent_server.turn import Decision, EpisodeContext, HumanConsole, TurnInput


class HumanStrategy(Strategy):
    """Asks ``ctx.human_console`` for every move. Calls no model (``backend`` may be None).

    Raises:
        ValueError: at construction when the policy server has no human console.
        BackendError: from ``act`` when the console closed before a move came (the episode
            then ends as an agent error, like a model that cannot answer).
    """

    name = "human"
    calls_model = False
    reads_tensors = False
    keeps_images = False

    def __init__(self, ctx: EpisodeContext, backend: Backend | None) -> None:
        if ctx.human_console is None:
            raise ValueError("agent type 'human' needs a policy server with a human console; "
                             "the MOSAIC worker seats a human itself (--interactive "
                             "--agent-type human)")
        super().__init__(ctx, backend)
        self._console: HumanConsole = ctx.human_console

    async def act(self, turn: TurnInput) -> Decision:
        """Wait for the human's move for ``turn`` and return it as typed."""
        started = time.perf_counter()
        try:
            typed = await self._console.ask(self.ctx, turn)
        except ConnectionError as exc:
            raise BackendError(f"the human player's console closed: {exc}",
                               provider="human") from None
        return Decision(action=typed.strip(), raw_completion=typed, reasoning="typed by a human",
                        usage=TokenUsage(), latency_s=time.perf_counter() - started,
                        stop_reason="")
