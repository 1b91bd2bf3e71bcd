"""The worker's human console: moves typed into the JSON-lines protocol reach the human
player's strategy (``agent_server.strategies.human``) through an asyncio queue.

The protocol loop calls ``supply(move)`` with the ``action`` of a step command, then plays the
step; the policy server, running in the same event loop, calls ``ask`` for the human's turn and
gets that move.
"""

from __future__ import annotations

import asyncio

from agent_server.turn import EpisodeContext, TurnInput


class QueueConsole:
    """A ``HumanConsole`` fed by ``supply``. Create and use it inside one event loop.

    ``last_turn`` / ``last_agent``: what the human was last shown (for front ends).
    """

    def __init__(self) -> None:
        self._moves: asyncio.Queue[str | None] = asyncio.Queue()
        self.last_turn: TurnInput | None = None
        self.last_agent = ""

    def supply(self, move: str) -> None:
        """Queue the human's next move (text, as typed)."""
        self._moves.put_nowait(move)

    def pending(self) -> int:
        """Moves supplied but not yet asked for."""
        return self._moves.qsize()

    def discard(self) -> None:
        """Drop moves nobody asked for (an episode ended before the human's turn)."""
        while not self._moves.empty():
            self._moves.get_nowait()

    def close(self) -> None:
        """Wake every waiting ``ask`` with ConnectionError."""
        self._moves.put_nowait(None)

    async def ask(self, ctx: EpisodeContext, turn: TurnInput) -> str:
        """The next supplied move for ``ctx.agent_id``'s ``turn``.

        Raises:
            ConnectionError: the console was closed.
        """
        self.last_turn, self.last_agent = turn, ctx.agent_id
        move = await self._moves.get()
        if move is None:
            self._moves.put_nowait(None)  # stay closed for other waiters
            raise ConnectionError("the human console is closed")
        return move
