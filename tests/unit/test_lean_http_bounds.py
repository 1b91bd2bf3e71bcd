"""The lean HTTP client against a model server whose answers never end
(``tests.support.endless_http``): it reads a bounded part of each and gives the call back, as
a refusal naming the bound or as the answer already whole, never a Policy server that fills its
memory or a call that never returns (``agent_server.backends.lean_http``'s bounds)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent_server.backends import create_backend
from agent_server.backends.base import BackendError, ChatMessage, GenerateParams
from agent_server.backends.lean_http import (
    MAX_AFTER_DONE_BYTES,
    MAX_ERROR_BYTES,
    MAX_EVENT_BYTES,
    MAX_REPLY_BYTES,
    MAX_STREAM_BYTES,
)
from agent_server.backends.openai_compat import OpenAICompatBackend
from moria.config import ClientConfig
from tests.support.endless_http import DRIP_ERROR, DRIP_TEXT, EndlessServer
from tests.support.waiting import async_wait_until

#: What the kernel may hold of a connection beyond what the client read (its socket buffers
#: and the server's, on loopback), plus one of the server's writes.
IN_FLIGHT_SLACK = 16 * 1024 * 1024
#: A call that has not come back after this long has hung: the test fails rather than wait.
HANG_S = 60.0
CHAT = [ChatMessage("user", "hi")]


def _backend(server: EndlessServer, **overrides: Any) -> OpenAICompatBackend:
    settings: dict[str, Any] = {"client_name": "vllm", "model_id": "m",
                                "base_url": server.base_url, "delay": 0.01, "timeout": 30.0,
                                "max_retries": 2, **overrides}
    backend = create_backend(ClientConfig(**settings))
    assert isinstance(backend, OpenAICompatBackend) and backend.transport == "lean"
    return backend


async def _call(backend: OpenAICompatBackend) -> Any:
    try:
        async with asyncio.timeout(HANG_S):
            return await backend.complete(CHAT, GenerateParams(max_tokens=8))
    finally:
        await backend.aclose()


async def _cut_after(server: EndlessServer, connections: int) -> list[int]:
    """The bytes the server wrote on each connection before the client closed it, once
    ``connections`` have been closed."""
    return await async_wait_until(
        lambda: list(server.finished) if len(server.finished) >= connections else None,
        f"the client to close {connections} connection(s)")


@pytest.mark.asyncio
@pytest.mark.parametrize(("kind", "stream", "said", "limit"), [
    ("json", False, "sent a reply over 32 MiB", MAX_REPLY_BYTES),
    ("line", True, "sent a line over 4 MiB", MAX_EVENT_BYTES),
    ("comments", True, "sent a stream over 256 MiB", MAX_STREAM_BYTES),
])
async def test_an_endless_answer_is_refused_at_its_bound_and_not_retried(
        kind: str, stream: bool, said: str, limit: int) -> None:
    with EndlessServer(kind) as server:
        with pytest.raises(BackendError) as info:
            await _call(_backend(server, stream=stream))
        [written] = await _cut_after(server, 1)
    assert f"{said}, the most the lean client reads" in str(info.value)
    assert server.base_url in str(info.value) and not info.value.retryable
    assert server.requests == 1  # the same request gets the same answer: no retry
    assert limit <= written < limit + IN_FLIGHT_SLACK


@pytest.mark.asyncio
async def test_a_reply_declared_too_long_is_refused_before_any_of_it_is_read() -> None:
    with EndlessServer("declared") as server:
        with pytest.raises(BackendError, match="sent a reply over 32 MiB") as info:
            await _call(_backend(server))
        [written] = await _cut_after(server, 1)
    assert not info.value.retryable and server.requests == 1
    assert written < IN_FLIGHT_SLACK  # the server wrote 1 KiB every 10 ms until cut off


@pytest.mark.asyncio
async def test_an_endless_error_body_is_read_for_its_message_only_and_retried() -> None:
    with EndlessServer("error") as server:
        with pytest.raises(BackendError) as info:
            await _call(_backend(server, max_retries=1))
        written = await _cut_after(server, 2)
    said = str(info.value)
    assert "retries exhausted after 2 attempts" in said and "500" in said
    assert info.value.retryable and server.requests == 2
    assert all(MAX_ERROR_BYTES <= n < MAX_ERROR_BYTES + IN_FLIGHT_SLACK for n in written)


@pytest.mark.asyncio
async def test_a_stream_that_goes_on_after_done_gives_its_answer() -> None:
    with EndlessServer("after_done") as server:
        out = await _call(_backend(server, stream=True))
        [written] = await _cut_after(server, 1)
    assert out.text == "hi" and out.attempts == 1 and server.requests == 1
    assert written < MAX_AFTER_DONE_BYTES + IN_FLIGHT_SLACK


@pytest.mark.asyncio
async def test_a_stream_held_open_after_done_gives_its_answer_not_a_timeout() -> None:
    # the end of the body is waited for AFTER_DONE_WAIT_S (1 s), not the client's timeout
    # (5 s per attempt, retried): the answer is whole, the connection is closed
    with EndlessServer("held") as server:
        out = await _call(_backend(server, stream=True, timeout=5.0))
        await _cut_after(server, 1)
    assert out.text == "hi" and out.attempts == 1 and server.requests == 1


@pytest.mark.asyncio
async def test_a_stream_dripped_one_byte_at_a_time_reads_whole() -> None:
    # every line arrives in pieces: the parser finds each line end once, and keeps an
    # event's two data lines, the CRLF line ends and the comment as a server means them
    with EndlessServer("drip") as server:
        out = await _call(_backend(server, stream=True))
    assert out.text == DRIP_TEXT and out.attempts == 1 and server.requests == 1


@pytest.mark.asyncio
async def test_an_error_body_dripped_in_pieces_keeps_its_message() -> None:
    # the bound on an error body is a bound, not one read: every piece up to it is kept
    with EndlessServer("drip_error") as server, pytest.raises(BackendError) as info:
        await _call(_backend(server))
    assert DRIP_ERROR in str(info.value) and info.value.status == 400
    assert not info.value.retryable and server.requests == 1
