"""Per-minute leaky buckets (aiolimiter) for the rate limits a client sets
(``client.max_requests_per_minute``, ``client.max_tokens_per_minute``): one construction for the
policy server's limits and the orchestrator's run-wide ones.

A provider counts a call when it arrives, the client when it lets the call go, a moment
earlier. Right after both have counted it, the provider's bucket holds as much as the client's
plus what the client's leaked in that moment; a client that lets the next call go as soon as its
own bucket has room would meet a 429 whenever the limit is tight. So the bucket holds
``HEADROOM_S`` seconds of the limit less than a minute's worth, while it drains at the full rate:
the long-run rate is the limit, and only the first burst is smaller.
"""

from __future__ import annotations

from typing import Any, Final

#: Seconds of the limit the bucket keeps back for calls in transit (module docstring).
HEADROOM_S: Final = 1.0


def minute_bucket(per_minute: float) -> Any:
    """An ``aiolimiter.AsyncLimiter`` that drains ``per_minute`` a minute and holds a minute's
    worth less ``HEADROOM_S`` seconds of it. Raises ValueError for ``per_minute`` <= 0."""
    from aiolimiter import AsyncLimiter  # only processes given a limit import it

    if not per_minute > 0:
        raise ValueError(f"a per-minute limit must be > 0, got {per_minute}")
    period = 60.0 - HEADROOM_S
    return AsyncLimiter(per_minute * period / 60.0, period)
