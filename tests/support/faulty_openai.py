"""An OpenAI chat-completions server that injects faults from a seeded RNG (tests).

``FaultyOpenAI`` is ``FakeOpenAI`` (the same real wire format) whose behaviour for each chat
request is drawn from ``random.Random(seed)``: with probability ``p_500`` an HTTP 500 with
OpenAI's error body, with ``p_timeout`` an answer held ``hold_s`` seconds (longer than the
client's timeout, so the client gives up), with ``p_429`` an HTTP 429 with ``retry-after: 0``;
otherwise the normal answer. Scripted behaviours (``script``) still take precedence.

``injected`` counts what was injected per kind ("500", "timeout", "429"); ``answered`` counts
the normal answers. Both are read under the server's lock.
"""

from __future__ import annotations

import random
from collections import Counter

from tests.support.fake_openai import Behaviour, FakeOpenAI, ReplyFn

__all__ = ["FaultyOpenAI"]


class FaultyOpenAI(FakeOpenAI):
    """The faulty server; start/stop it with ``with`` (or ``start()``/``stop()``)."""

    thread_name = "faulty-openai"

    def __init__(self, reply: str | ReplyFn = "ok", *, seed: int = 0, p_500: float = 0.10,
                 p_timeout: float = 0.05, p_429: float = 0.05, hold_s: float = 2.0,
                 latency: float = 0.0, model: str = "fake-model"):
        """``reply``: the normal answer; ``seed``: the fault RNG's seed; ``p_*``: probability
        of each fault per request (their sum must be <= 1); ``hold_s``: seconds a timeout
        fault holds the answer; ``latency``: seconds slept before every answer."""
        if not 0 <= p_500 + p_timeout + p_429 <= 1:
            raise ValueError("fault probabilities must sum to a value in [0, 1]")
        super().__init__(reply, latency=latency, model=model)
        self._rng = random.Random(seed)
        self._p = (p_500, p_timeout, p_429)
        self._hold_s = hold_s
        self._injected: Counter[str] = Counter()
        self._answered = 0

    def new_behaviour(self) -> Behaviour:
        """Draw this request's fate (called under the server lock, once per request)."""
        p_500, p_timeout, p_429 = self._p
        draw = self._rng.random()
        if draw < p_500:
            self._injected["500"] += 1
            return Behaviour(status=500)
        if draw < p_500 + p_timeout:
            self._injected["timeout"] += 1
            return Behaviour(delay=self._hold_s)
        if draw < p_500 + p_timeout + p_429:
            self._injected["429"] += 1
            return Behaviour(status=429, headers={"retry-after": "0"})
        self._answered += 1
        return Behaviour()

    @property
    def injected(self) -> dict[str, int]:
        """Faults injected so far, per kind ("500", "timeout", "429")."""
        with self._lock:
            return {kind: self._injected[kind] for kind in ("500", "timeout", "429")}

    @property
    def answered(self) -> int:
        """Requests answered normally so far."""
        with self._lock:
            return self._answered
