"""The worker's human seat: moves typed into the JSON-lines protocol are played for the human,
in the worker's own process, with no policy server.

``QueueConsole`` holds the moves: the protocol loop calls ``supply(move)`` with the ``action`` of
a step command, then plays the step. ``HumanPlayer`` is served as an in-process player
(``moria.clients.serve_in_process``), so the episode driver reaches it through ``PolicyClient``
like any policy server: each ``observe`` waits for the next supplied move and answers it as
typed (stripped), and the env judges it like any model answer (an invalid move gets the env's
default action). A policy server can seat a human too (``agent_server.strategies.human``, with
a console of its own); the worker does not need one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import grpc

from moria.clients import PlayStream
from moria.common.v1 import types_pb2
from moria.config import AgentConfig, ClientConfig
from moria.policy.v1 import policy_service_pb2 as pol_pb

#: The only agent type an in-process human seat plays.
HUMAN = "human"


class QueueConsole:
    """The human's moves, fed by ``supply``. Create and use it inside one event loop.

    ``last_observation`` / ``last_agent``: what the human was last asked about (for front ends).
    """

    def __init__(self) -> None:
        self._moves: asyncio.Queue[str | None] = asyncio.Queue()
        self.last_observation: types_pb2.Observation | None = None
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

    async def ask(self, agent_id: str, observation: types_pb2.Observation) -> str:
        """The next supplied move for ``agent_id``, who sees ``observation``.

        Raises:
            ConnectionError: the console was closed.
        """
        self.last_observation, self.last_agent = observation, agent_id
        move = await self._moves.get()
        if move is None:
            self._moves.put_nowait(None)  # stay closed for other waiters
            raise ConnectionError("the human console is closed")
        return move


class HumanPlayStream(PlayStream):
    """One human seat's episode: ``Begin`` -> ``Ready``, each ``Observe`` -> the next move."""

    def __init__(self, console: QueueConsole) -> None:  # no gRPC call behind it
        self.console = console
        self.agent_id = ""

    async def begin(self, begin: pol_pb.Begin) -> pol_pb.Ready:
        """Seat the human; ``Ready.idle_timeout_s`` 0 (nothing to keep alive)."""
        self.agent_id = begin.agent_id
        return pol_pb.Ready(strategy=HUMAN, model="")

    async def observe(self, observe: pol_pb.Observe,
                      grant: Callable[[pol_pb.Reserve], Awaitable[pol_pb.Grant]] | None = None,
                      ) -> pol_pb.Act:
        """The human's move as typed (stripped); ``Act.error`` (UNAVAILABLE) when the console
        closed before a move came (the episode then ends as an agent error). A human calls no
        model: ``grant`` is never used."""
        started = time.perf_counter()
        try:
            typed = await self.console.ask(self.agent_id, observe.observation)
        except ConnectionError as exc:
            closed = types_pb2.Status(code=grpc.StatusCode.UNAVAILABLE.value[0],
                                      message=f"the human player's console closed: {exc}")
            return pol_pb.Act(error=closed, latency_s=time.perf_counter() - started)
        return pol_pb.Act(action=types_pb2.Action(text=typed.strip()), raw_completion=typed,
                          reasoning="typed by a human", usage=types_pb2.Usage(),
                          latency_s=time.perf_counter() - started)

    async def end(self, episode_end: types_pb2.EpisodeEnd) -> pol_pb.Ended | None:
        """Nothing to count: a human uses no tokens."""
        return pol_pb.Ended(total_usage=types_pb2.Usage())

    async def aclose(self) -> None:
        """Nothing to close."""


class HumanPlayer:
    """The in-process player of the human seat (``moria.clients.InProcessPlayer``)."""

    def __init__(self, console: QueueConsole) -> None:
        self.console = console

    def play(self) -> PlayStream:
        """A stream for one episode of the human seat."""
        return HumanPlayStream(self.console)

    async def get_info(self, check: tuple[AgentConfig, ClientConfig] | None,
                       ) -> pol_pb.GetInfoResponse:
        """``strategies`` ["human"]; ``config_errors`` when ``check`` asks for another type."""
        errors = ([f"this in-process seat plays agent type {HUMAN!r} only, not "
                   f"{check[0].type!r}"] if check is not None and check[0].type != HUMAN else [])
        return pol_pb.GetInfoResponse(
            strategies=[HUMAN], capacity=1, config_errors=errors,
            strategy_info=[pol_pb.StrategyInfo(name=HUMAN, calls_model=False,
                                               reads_tensors=False, keeps_images=False)])
