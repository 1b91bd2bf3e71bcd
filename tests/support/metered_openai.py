"""A fake OpenAI-compatible server that bills tokens and enforces a tokens-per-minute limit the
way OpenAI documents it (tests and benchmarks of the cost cap and the rate limits).

- **Its own count.** Every answered request is billed ``prompt_tokens`` (a quarter of the
  UTF-8 bytes of the request's message texts, rounded up) and ``completion_tokens`` (the reply's
  words); ``billed()`` sums them, and the usage it answers says the same.
- **Its limit.** With ``tokens_per_minute``, a request is counted before it is answered as
  OpenAI's limiter counts it: its prompt estimate plus its ``max_tokens`` (or
  ``max_completion_tokens``; 4096 when it sends neither), against a leaky bucket holding a
  minute's tokens that drains at ``tokens_per_minute / 60`` per second. A request that does not
  fit is answered 429 with ``retry-after-ms`` and ``retry-after`` saying when it would fit;
  ``throttled`` counts them.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from tests.support import fake_http
from tests.support.fake_http import ScriptedHandler
from tests.support.fake_openai import Behaviour, FakeOpenAI, RecordedRequest

#: The output cap counted for a request that sends none.
DEFAULT_MAX_TOKENS = 4096


def prompt_tokens(request: dict[str, Any]) -> int:
    """The server's count of a request's prompt: a quarter of its text bytes, rounded up."""
    size = 0
    for message in request.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            size += len(content.encode("utf-8"))
        else:
            size += sum(len(str(p.get("text", "")).encode("utf-8"))
                        for p in content or [] if isinstance(p, dict))
    return math.ceil(size / 4)


class MeteredOpenAI(FakeOpenAI):
    """``FakeOpenAI`` with billing and a tokens-per-minute limit (module docstring)."""

    thread_name = "metered-openai"

    def __init__(self, reply: str = "ok", *, tokens_per_minute: float | None = None,
                 latency: float = 0.0, model: str = "fake-model") -> None:
        super().__init__(reply, latency=latency, model=model)
        self.tokens_per_minute = tokens_per_minute
        self._meter = threading.Lock()
        self._level = 0.0
        self._last = time.monotonic()
        self.throttled = 0
        self.answered = 0
        self._prompt_billed = 0
        self._completion_billed = 0

    def billed(self) -> dict[str, int]:
        """``{"input_tokens", "output_tokens", "calls"}`` of the answered requests."""
        with self._meter:
            return {"input_tokens": self._prompt_billed,
                    "output_tokens": self._completion_billed, "calls": self.answered}

    def _admit(self, request: dict[str, Any]) -> float:
        """0 when the request fits the limit now (it is counted), else the seconds until it
        would."""
        if self.tokens_per_minute is None:
            return 0.0
        cost = prompt_tokens(request) + int(request.get("max_tokens")
                                            or request.get("max_completion_tokens")
                                            or DEFAULT_MAX_TOKENS)
        capacity = self.tokens_per_minute
        rate = capacity / 60.0
        with self._meter:
            now = time.monotonic()
            self._level = max(0.0, self._level - (now - self._last) * rate)
            self._last = now
            if self._level + min(cost, capacity) <= capacity:
                self._level += min(cost, capacity)
                return 0.0
            self.throttled += 1
            return (self._level + min(cost, capacity) - capacity) / rate

    def respond(self, out: ScriptedHandler, behaviour: Behaviour, record: RecordedRequest,
                request: Any) -> None:
        """429 past the limit, else the scripted answer, billed."""
        wait = self._admit(request) if behaviour.status == 200 else 0.0
        if wait > 0:
            self.send_scripted_error(out, Behaviour(status=429, headers={
                "retry-after-ms": str(math.ceil(wait * 1000)),
                "retry-after": str(math.ceil(wait))}))
            return
        super().respond(out, behaviour, record, request)
        if behaviour.status == 200:
            text = self.reply_text(behaviour, request)
            with self._meter:
                self.answered += 1
                self._prompt_billed += prompt_tokens(request)
                self._completion_billed += fake_http.words(text)

    def completion_json(self, behaviour: Behaviour, request: dict[str, Any]) -> dict[str, Any]:
        """As ``FakeOpenAI``'s, its usage the server's own count."""
        body = super().completion_json(behaviour, request)
        if behaviour.usage is None:
            prompt = prompt_tokens(request)
            completion = fake_http.words(self.reply_text(behaviour, request))
            body["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion,
                             "total_tokens": prompt + completion}
        return body
