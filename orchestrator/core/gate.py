"""What each model call of a run passes at the orchestrator before it is sent: the run's rate
limits and its cost cap, over every episode, seat and Policy server of the run.

A run with ``eval.max_cost_usd`` or a client rate limit (``client.max_requests_per_minute``,
``client.max_tokens_per_minute``) begins its model-calling seats with ``Begin.reserve_calls``:
before each call the Policy server sends ``Reserve`` (the model, the call's worst-case tokens
and the tokens it counts against a rate limit) and waits for ``Grant``. The gate first waits
until the call fits the run's rate limits of its model (one leaky bucket per limit and model for
the whole run, ``moria.limiter``: a run spread over several Policy servers is held to its limit
as a whole, without splitting it), then asks the cost ledger (``orchestrator.core.budget``). The
seconds a turn waited here are added to what its Act reports (``rate_limit_wait_s``).

Each Policy server applies the same limits to its own calls too (shared by every run it
serves, and fed by the 429s it meets: ``agent_server.backends.limits``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from moria.config import NON_MODEL_AGENT_TYPES, ClientConfig
from moria.limiter import minute_bucket
from moria.policy.v1 import policy_service_pb2 as pol_pb
from orchestrator.core.budget import CostLedger, TurnLedger


def model_name(client: ClientConfig) -> str:
    """``"<client_name>/<model_id>"`` as Policy servers name a model (``Act.model``)."""
    return f"{client.client_name}/{client.model_id or 'default'}"


class RunRateLimits:
    """Per model, the run's requests-per-minute and tokens-per-minute buckets (each None when
    that limit is not set). ``limits``: model -> (requests per minute, tokens per minute)."""

    def __init__(self, limits: Mapping[str, tuple[float | None, float | None]]):
        self._buckets: dict[str, tuple[Any, Any]] = {
            model: (minute_bucket(rpm) if rpm else None, minute_bucket(tpm) if tpm else None)
            for model, (rpm, tpm) in limits.items()}

    @classmethod
    def of(cls, clients: list[tuple[Any, ClientConfig]]) -> RunRateLimits | None:
        """The limits of the run's seats ((agent, client) pairs; the first seat naming a model
        sets its limits), or None when no model-calling seat sets one."""
        limits: dict[str, tuple[float | None, float | None]] = {}
        for agent, client in clients:
            if agent.type in NON_MODEL_AGENT_TYPES:
                continue
            pair = (client.max_requests_per_minute, client.max_tokens_per_minute)
            if any(pair):
                limits.setdefault(model_name(client), pair)
        return cls(limits) if limits else None

    async def wait(self, reserve: pol_pb.Reserve) -> float:
        """Wait until ``reserve``'s call fits its model's buckets (counted: one request, its
        ``rate_tokens``); the seconds waited (0 for a model without limits)."""
        requests, tokens = self._buckets.get(reserve.model, (None, None))
        started = time.monotonic()
        if requests is not None:
            await requests.acquire(1)
        if tokens is not None:
            await tokens.acquire(min(float(reserve.rate_tokens), tokens.max_rate))
        return time.monotonic() - started


@dataclass(frozen=True)
class RunGate:
    """A run's gate: its rate limits and its cost ledger (either may be None, not both)."""

    limits: RunRateLimits | None = None
    ledger: CostLedger | None = None

    def turn(self) -> TurnGate:
        """The gate of one agent turn (one Observe)."""
        return TurnGate(self.limits, self.ledger.turn() if self.ledger is not None else None)


@dataclass
class TurnGate:
    """One turn's passage: ``grant`` answers each Reserve; ``settle`` (the turn's Act) or
    ``abandon`` (no Act) ends it. ``waited_s``: seconds its calls waited on rate limits here;
    ``refused``: why the cost cap refused a call ("" when none was)."""

    limits: RunRateLimits | None
    ledger: TurnLedger | None
    waited_s: float = field(default=0.0)

    @property
    def refused(self) -> str:
        """The cost cap's reason for refusing one of the turn's calls, or ""."""
        return self.ledger.refused if self.ledger is not None else ""

    async def grant(self, reserve: pol_pb.Reserve) -> pol_pb.Grant:
        """Wait for the rate limits, then reserve on the ledger (granted when there is none)."""
        if self.limits is not None:
            self.waited_s += await self.limits.wait(reserve)
        if self.ledger is None:
            return pol_pb.Grant(granted=True)
        return await self.ledger.grant(reserve)

    def settle(self, act: pol_pb.Act) -> None:
        """End the turn with its ``act`` (the ledger's settlement; the wait added to
        ``act.rate_limit_wait_s``)."""
        act.rate_limit_wait_s += self.waited_s
        if self.ledger is not None:
            self.ledger.settle(act)

    def abandon(self) -> None:
        """End a turn that got no Act."""
        if self.ledger is not None:
            self.ledger.abandon()
