"""``call_with_retries``: the first attempt runs outside tenacity, and a first failure is handed
to the tenacity loop as that loop's first attempt (same waits, logs, counts and messages)."""

from __future__ import annotations

import logging

import pytest

from agent_server.backends.base import BackendError
from agent_server.backends.retry import TransientError, call_with_retries
from moria.config import ClientConfig


class Scripted:
    """An attempt that raises or returns the scripted outcomes in order, counting its calls."""

    def __init__(self, *outcomes: object) -> None:
        self.outcomes = list(outcomes)
        self.calls = 0

    async def __call__(self) -> object:
        self.calls += 1
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def client(max_retries: int) -> ClientConfig:
    return ClientConfig(client_name="vllm", model_id="m", max_retries=max_retries, delay=0.01)


@pytest.mark.asyncio
async def test_success_at_once_is_one_attempt() -> None:
    attempt = Scripted("answer")
    assert await call_with_retries(attempt, client(3), "vllm") == ("answer", 1)
    assert attempt.calls == 1


@pytest.mark.asyncio
async def test_first_failure_is_retried_once_per_attempt(caplog: pytest.LogCaptureFixture) -> None:
    attempt = Scripted(TransientError("HTTP 503", status=503, retry_after=0.02),
                       TransientError("HTTP 502", status=502), "answer")
    with caplog.at_level(logging.WARNING, logger="agent_server.backends.retry"):
        result = await call_with_retries(attempt, client(3), "vllm")
    assert result == ("answer", 3)
    assert attempt.calls == 3  # the replayed first failure made no call of its own
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "vllm: attempt 1 failed (HTTP 503); retrying in 0.02s"  # retry-after
    assert messages[1].startswith("vllm: attempt 2 failed (HTTP 502); retrying in ")
    assert len(messages) == 2


@pytest.mark.asyncio
async def test_no_retries_left_after_the_first_failure() -> None:
    attempt = Scripted(TransientError("timed out after 5s"))
    with pytest.raises(BackendError) as info:
        await call_with_retries(attempt, client(0), "vllm")
    assert str(info.value) == "vllm: retries exhausted after 1 attempts: timed out after 5s"
    assert info.value.retryable and attempt.calls == 1


@pytest.mark.asyncio
async def test_every_attempt_failing_exhausts_the_retries() -> None:
    attempt = Scripted(*[TransientError("HTTP 500", status=500)] * 3)
    with pytest.raises(BackendError) as info:
        await call_with_retries(attempt, client(2), "vllm")
    assert str(info.value) == "vllm: retries exhausted after 3 attempts: HTTP 500"
    assert info.value.status == 500 and attempt.calls == 3


@pytest.mark.asyncio
@pytest.mark.parametrize("retries_before", [0, 1])
async def test_backend_error_is_never_retried(retries_before: int) -> None:
    refused = BackendError("vllm: HTTP 400: bad request", provider="vllm", status=400)
    attempt = Scripted(*[TransientError("HTTP 503", status=503)] * retries_before, refused)
    with pytest.raises(BackendError) as info:
        await call_with_retries(attempt, client(3), "vllm")
    assert info.value is refused
    assert attempt.calls == retries_before + 1
