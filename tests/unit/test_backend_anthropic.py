"""The Anthropic backend through the real ``anthropic`` SDK against a local fake Messages server.

The fake (``tests/support/fake_anthropic.py``) speaks the real wire format (message JSON, the SSE
event sequence, Anthropic's error bodies) and answers a request that breaks the API's rules with
HTTP 400, so every test here also proves the backend's request is acceptable.
"""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import pytest
import pytest_asyncio

from agent_server.backends import create_backend, missing_api_key
from agent_server.backends.anthropic_backend import (
    EFFORT_BUDGET,
    LEADING_USER_TURN,
    AnthropicBackend,
)
from agent_server.backends.base import Backend, BackendError, ChatMessage, GenerateParams
from moria.config import ClientConfig
from tests.support.fake_anthropic import Behaviour, FakeAnthropic, error_body

PNG = b"\x89PNG\r\n\x1a\nfake-image"
PNG2 = b"\x89PNG\r\n\x1a\nsecond-image"
KEY = "sk-test-SECRET-1234"  # made up; only ever sent to the local fake server

USAGE = {
    "input_tokens": 100,
    "output_tokens": 30,
    "cache_creation_input_tokens": 20,
    "cache_read_input_tokens": 64,
    "output_tokens_details": {"thinking_tokens": 12},
}


@pytest.fixture
def server() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(reply="go forward") as srv:
        yield srv


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    return KEY


def client_cfg(server: FakeAnthropic, **overrides: Any) -> ClientConfig:
    settings: dict[str, Any] = {
        "client_name": "anthropic",
        "model_id": "claude-test",
        "base_url": server.base_url,
        "max_retries": 2,
        "delay": 0.01,
        "timeout": 5.0,  # generous: a loaded machine must not time out a prompt answer
    }
    settings.update(overrides)
    return ClientConfig(**settings)


@pytest_asyncio.fixture
async def backend(server: FakeAnthropic) -> AsyncIterator[Backend]:
    b = create_backend(client_cfg(server))
    yield b
    await b.aclose()


async def complete_once(
    server: FakeAnthropic,
    messages: list[ChatMessage] | None = None,
    params: GenerateParams | None = None,
    **overrides: Any,
) -> Any:
    """One ``complete`` through a backend built by the registry for these settings."""
    b = create_backend(client_cfg(server, **overrides))
    try:
        return await b.complete(
            messages or [ChatMessage("user", "hi")], params or GenerateParams()
        )
    finally:
        await b.aclose()


def sent_key(headers: dict[str, str]) -> str | None:
    """The API key a request carried: ``x-api-key``, or the ``Authorization: Bearer`` token that
    anthropic SDK 2.x sends an ``api_key`` as."""
    if "x-api-key" in headers:
        return headers["x-api-key"]
    auth = headers.get("authorization", "")
    return auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None


def b64(png: bytes) -> str:
    return base64.b64encode(png).decode()


OBS_1_2 = "Observation 1: a wall ahead\n\nObservation 2: a door left"
CHAT = [
    ChatMessage("system", "You are playing BabyAI."),
    ChatMessage("system", "Answer with one action."),
    ChatMessage("user", "Observation 1: a wall ahead", [PNG]),
    ChatMessage("user", "Observation 2: a door left", [PNG2]),
    ChatMessage("assistant", "turn left"),
    ChatMessage("assistant", "   "),  # whitespace only: never sent
    ChatMessage("user", "Observation 3: a key"),
]


# -- request -------------------------------------------------------------------------------------


async def test_request_json_system_merging_images_and_headers(server: FakeAnthropic) -> None:
    params = GenerateParams(
        temperature=0.7, max_tokens=64, extra={"top_p": 0.9, "top_k": 5, "seed": 7}
    )
    out = await complete_once(server, CHAT, params)
    assert out.text == "go forward" and out.stop_reason == "stop"
    [req] = server.requests
    assert req.path == "/v1/messages"
    assert sent_key(req.headers) == KEY
    assert req.headers["anthropic-version"]
    body = req.json or {}
    assert body["model"] == "claude-test"
    assert body["max_tokens"] == 64
    assert body["temperature"] == 0.7
    assert (body["top_p"], body["top_k"]) == (0.9, 5)
    assert "seed" not in body and "stream" not in body and "thinking" not in body
    assert body["system"] == "You are playing BabyAI.\n\nAnswer with one action."
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png"}}
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {**image, "source": {**image["source"], "data": b64(PNG)}},
                {**image, "source": {**image["source"], "data": b64(PNG2)}},
                {"type": "text", "text": OBS_1_2},
            ],
        },
        {"role": "assistant", "content": "turn left"},
        {"role": "user", "content": "Observation 3: a key"},
    ]
    assert base64.b64decode(body["messages"][0]["content"][0]["source"]["data"]) == PNG


async def test_leading_assistant_gets_a_user_turn_and_prefill_is_stripped(
    server: FakeAnthropic,
) -> None:
    chat = [
        ChatMessage("system", "rules"),
        ChatMessage("assistant", "I will explore."),
        ChatMessage("user", ""),  # empty: dropped, so the assistant turns merge
        ChatMessage("assistant", "Ready."),
        ChatMessage("user", "obs"),
        ChatMessage("assistant", "The action is: "),
    ]
    await complete_once(server, chat, GenerateParams(temperature=None))
    body = server.requests[0].json or {}
    assert "temperature" not in body
    assert body["messages"] == [
        {"role": "user", "content": LEADING_USER_TURN},
        {"role": "assistant", "content": "I will explore.\n\nReady."},
        {"role": "user", "content": "obs"},
        {"role": "assistant", "content": "The action is:"},
    ]


async def test_system_only_chat_still_sends_a_user_turn(server: FakeAnthropic) -> None:
    await complete_once(server, [ChatMessage("system", "rules")])
    body = server.requests[0].json or {}
    assert body["system"] == "rules"
    assert body["messages"] == [{"role": "user", "content": LEADING_USER_TURN}]


async def test_fake_rejects_what_the_api_rejects(server: FakeAnthropic) -> None:
    """The fake's rule check is live: a raw SDK call that breaks alternation gets HTTP 400."""
    sdk = anthropic.AsyncAnthropic(api_key=KEY, base_url=server.base_url, max_retries=0)
    try:
        with pytest.raises(anthropic.BadRequestError, match="alternate"):
            await sdk.messages.create(
                model="claude-test",
                max_tokens=10,
                messages=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
            )
        with pytest.raises(anthropic.BadRequestError, match="non-whitespace"):
            await sdk.messages.create(
                model="claude-test",
                max_tokens=10,
                messages=[{"role": "user", "content": [{"type": "text", "text": " "}]}],
            )
    finally:
        await sdk.close()


async def test_thinking_budget_sets_thinking_and_omits_temperature(
    server: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="agent_server.backends.anthropic_backend")
    await complete_once(
        server,
        params=GenerateParams(temperature=0.3, max_tokens=500),
        thinking_budget=3000,
        reasoning_effort="high",  # thinking_budget wins
    )
    body = server.requests[0].json or {}
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 3000}
    assert body["max_tokens"] == 3500
    assert "temperature" not in body
    assert "temperature 0.3 not sent" in caplog.text


@pytest.mark.parametrize("effort", sorted(EFFORT_BUDGET))
async def test_reasoning_effort_maps_to_a_budget(server: FakeAnthropic, effort: str) -> None:
    await complete_once(
        server, params=GenerateParams(max_tokens=100), reasoning_effort=effort
    )
    body = server.requests[0].json or {}
    budget = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 24576}[effort]
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] == budget + 100


async def test_thinking_budget_zero_is_off_and_small_budgets_are_raised(
    server: FakeAnthropic,
) -> None:
    await complete_once(server, thinking_budget=0, reasoning_effort="high")
    await complete_once(server, params=GenerateParams(max_tokens=10), thinking_budget=100)
    off, small = (r.json or {} for r in server.requests)
    assert "thinking" not in off and off["temperature"] == 1.0
    assert small["thinking"] == {"type": "enabled", "budget_tokens": 1024}
    assert small["max_tokens"] == 1034


async def test_extra_keys_stop_mapped_openai_only_dropped(
    server: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    extra = {"stop": "\n", "presence_penalty": 0.5, "metadata": {"user_id": "u1"}, "seed": 1}
    await complete_once(server, params=GenerateParams(extra=extra))
    body = server.requests[0].json or {}
    assert body["stop_sequences"] == ["\n"]
    assert body["metadata"] == {"user_id": "u1"}
    assert "presence_penalty" not in body and "stop" not in body and "seed" not in body
    assert "'presence_penalty' is not an Anthropic parameter" in caplog.text
    assert "seed" not in caplog.text


# -- responses -----------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_response_text_thinking_and_usage(server: FakeAnthropic, stream: bool) -> None:
    server.script(
        Behaviour(
            reply="pick up the red ball",
            thinking="a ball is near; the door is shut",
            redacted_thinking=True,
            usage=USAGE,
        )
    )
    out = await complete_once(
        server, CHAT, GenerateParams(max_tokens=64), stream=stream, thinking_budget=2048
    )
    assert out.text == "pick up the red ball"
    assert out.reasoning == "a ball is near; the door is shut\n\n[redacted thinking]"
    assert out.stop_reason == "stop"
    assert out.usage.input_tokens == 100 + 20 + 64
    assert out.usage.cached_input_tokens == 64
    assert out.usage.output_tokens == 30
    assert out.usage.reasoning_tokens == 12
    assert out.attempts == 1 and out.latency_s > 0
    body = server.requests[0].json or {}
    assert body.get("stream", False) is stream


async def test_streaming_accumulates_many_deltas(server: FakeAnthropic) -> None:
    reply = " ".join(f"word{i}" for i in range(200))
    server.script(Behaviour(reply=reply, thinking="step one. step two. step three."))
    out = await complete_once(server, stream=True)
    assert out.text == reply
    assert out.reasoning == "step one. step two. step three."
    assert out.usage.reasoning_tokens == 0  # not reported by the server: left 0, not estimated
    assert out.usage.output_tokens == 200 + 6
    assert (server.requests[0].json or {})["stream"] is True


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("pause_turn", "other:pause_turn"),
        ("model_context_window_exceeded", "other:model_context_window_exceeded"),
    ],
)
async def test_stop_reason_normalised(
    server: FakeAnthropic, stream: bool, raw: str, normalised: str
) -> None:
    server.script(Behaviour(reply="go", stop_reason=raw))
    out = await complete_once(server, stream=stream)
    assert (out.text, out.stop_reason) == ("go", normalised)


@pytest.mark.parametrize("stream", [False, True])
async def test_refusal_is_blocked_with_empty_text(server: FakeAnthropic, stream: bool) -> None:
    server.script(
        Behaviour(reply="I can", stop_reason="refusal"), Behaviour(reply="", stop_reason="refusal")
    )
    partial = await complete_once(server, stream=stream)
    bare = await complete_once(server, stream=stream)
    for out in (partial, bare):
        assert (out.text, out.stop_reason) == ("", "blocked:refusal")
        assert out.withheld
    assert len(server.requests) == 2


@pytest.mark.parametrize("stream", [False, True])
async def test_empty_content_is_empty_not_a_crash(server: FakeAnthropic, stream: bool) -> None:
    server.script(Behaviour(empty_content=True), Behaviour(reply=""))
    empty = await complete_once(server, stream=stream)
    blank = await complete_once(server, stream=stream)
    assert (empty.text, empty.stop_reason) == ("", "empty") and empty.withheld
    assert (blank.text, blank.stop_reason) == ("", "stop") and not blank.withheld
    assert len(server.requests) == 2


# -- errors and retries --------------------------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_429_retry_after_is_honoured(
    server: FakeAnthropic, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="agent_server.backends.retry")
    server.script(
        Behaviour(
            status=429,
            headers={"retry-after": "0.3"},
            body=error_body(429, "Number of request tokens has exceeded your rate limit"),
        )
    )
    out = await complete_once(server, stream=stream)
    assert out.text == "go forward"
    assert out.attempts == 2
    assert len(server.requests) == 2
    # the wait tenacity chose is the server's retry-after, not the 0.01 s computed backoff
    assert "rate_limit_error: Number of request tokens" in caplog.text
    assert "retrying in 0.30s" in caplog.text


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("status", [500, 529])
async def test_5xx_and_overloaded_are_retried(
    server: FakeAnthropic, stream: bool, status: int
) -> None:
    server.script(Behaviour(status=status), Behaviour(status=status))
    out = await complete_once(server, stream=stream)
    assert out.text == "go forward"
    assert out.attempts == 3
    assert len(server.requests) == 3


async def test_in_stream_error_event_is_retried(server: FakeAnthropic) -> None:
    server.script(Behaviour(stream_error={"type": "overloaded_error", "message": "Overloaded"}))
    out = await complete_once(server, stream=True)
    assert (out.text, out.attempts) == ("go forward", 2)
    assert len(server.requests) == 2


async def test_in_stream_errors_exhaust_retries(server: FakeAnthropic) -> None:
    server.script(
        *[Behaviour(stream_error={"type": "overloaded_error", "message": "Overloaded"})] * 3
    )
    with pytest.raises(BackendError) as info:
        await complete_once(server, stream=True)
    assert info.value.retryable and info.value.status == 529
    assert "retries exhausted after 3 attempts" in str(info.value)
    assert "overloaded_error: Overloaded" in str(info.value)


@pytest.mark.parametrize("stream", [False, True])
async def test_timeouts_retried_then_backend_error(server: FakeAnthropic, stream: bool) -> None:
    server.script(*[Behaviour(delay=1.5)] * 3)
    with pytest.raises(BackendError) as info:
        await complete_once(server, stream=stream, timeout=0.3)
    assert info.value.retryable
    assert "retries exhausted after 3 attempts" in str(info.value)
    assert "timed out" in str(info.value)
    assert len(server.requests) == 3


async def test_connection_refused_is_retried_then_backend_error() -> None:
    with FakeAnthropic() as srv:
        cfg = client_cfg(srv)
    b = create_backend(cfg)  # the server is gone: nothing listens on its port
    with pytest.raises(BackendError) as info:
        await b.complete([ChatMessage("user", "hi")], GenerateParams())
    await b.aclose()
    assert info.value.retryable
    assert "retries exhausted after 3 attempts" in str(info.value)
    assert "connection error" in str(info.value)


@pytest.mark.parametrize("stream", [False, True])
async def test_400_fails_fast_with_provider_message(server: FakeAnthropic, stream: bool) -> None:
    message = f"max_tokens: 999999 > 64000, which is the maximum (key {KEY})"
    server.script(Behaviour(status=400, body=error_body(400, message)))
    with pytest.raises(BackendError) as info:
        await complete_once(
            server, params=GenerateParams(max_tokens=999999), stream=stream, max_retries=5
        )
    assert len(server.requests) == 1
    text = str(info.value)
    assert "max_tokens: 999999 > 64000, which is the maximum" in text
    assert "invalid_request_error" in text
    assert KEY not in text and "SECRET" not in text
    assert info.value.status == 400 and not info.value.retryable


@pytest.mark.parametrize("status", [401, 403])
async def test_bad_api_key_never_shows_the_key(server: FakeAnthropic, status: int) -> None:
    body = error_body(status, f"invalid authentication credentials: {KEY}")
    server.script(Behaviour(status=status, body=body))
    with pytest.raises(BackendError) as info:
        await complete_once(server)
    text = str(info.value)
    assert text.startswith(f"bad API key for anthropic (HTTP {status}; check ANTHROPIC_API_KEY)")
    assert "invalid authentication credentials" in text
    assert KEY not in text and "SECRET-1234" not in text
    assert len(server.requests) == 1 and not info.value.retryable
    assert sent_key(server.requests[0].headers) == KEY


# -- registry and construction -------------------------------------------------------------------


async def test_claude_alias_builds_the_anthropic_backend(server: FakeAnthropic) -> None:
    cfg = client_cfg(server, client_name="claude")
    assert cfg.client_name == "anthropic"
    b = create_backend(cfg)
    assert isinstance(b, AnthropicBackend)
    out = await b.complete([ChatMessage("user", "hi")], GenerateParams())
    await b.aclose()
    assert out.text == "go forward"
    assert sent_key(server.requests[0].headers) == KEY


async def test_base_url_with_v1_suffix_is_accepted(server: FakeAnthropic) -> None:
    out = await complete_once(server, base_url=server.base_url + "/v1/")
    assert out.text == "go forward"
    assert server.requests[0].path == "/v1/messages"


def test_model_id_required_and_key_required(
    server: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(BackendError, match=r"client\.model_id is required"):
        create_backend(client_cfg(server, model_id=None))
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert "ANTHROPIC_API_KEY" in (missing_api_key(client_cfg(server)) or "")
    with pytest.raises(BackendError, match="ANTHROPIC_API_KEY"):
        create_backend(client_cfg(server))


async def test_default_base_url_is_anthropic() -> None:
    b = create_backend(ClientConfig(client_name="anthropic", model_id="claude-test"))
    assert isinstance(b, AnthropicBackend)
    assert b.base_url.startswith("https://api.anthropic.com")
    await b.aclose()


async def test_concurrent_calls_share_one_backend() -> None:
    def echo(request: dict[str, Any]) -> str:
        return "echo " + request["messages"][-1]["content"]

    with FakeAnthropic(reply=echo, latency=0.05) as srv:
        b = create_backend(client_cfg(srv))
        outs = await asyncio.gather(
            *[b.complete([ChatMessage("user", f"n{i}")], GenerateParams()) for i in range(16)]
        )
        await b.aclose()
        assert [o.text for o in outs] == [f"echo n{i}" for i in range(16)]
        assert len(srv.requests) == 16
