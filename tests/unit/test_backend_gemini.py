"""The Gemini backend through the real ``google-genai`` SDK against a local fake Gemini API."""

from __future__ import annotations

import asyncio
import base64
import logging
import socket
import struct
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from agent_server.backends import create_backend, missing_api_key
from agent_server.backends.base import Backend, BackendError, ChatMessage, GenerateParams
from agent_server.backends.gemini_backend import (
    EFFORT_BUDGET,
    GeminiBackend,
    thinking_budget_for,
    to_gemini_contents,
)
from moria.config import ClientConfig
from tests.support.fake_gemini import (
    Behaviour,
    FakeGemini,
    error_body,
    rate_limit_body,
)

FAKE_KEY = "sk-test-SECRET-1234"  # made up; only ever sent to the local fake server
KEY_VARS = ("GOOGLE_API_KEY", "GEMINI_API_KEY")


def tiny_png(rgb: tuple[int, int, int] = (255, 251, 191)) -> bytes:
    """A valid 1x1 RGB PNG (its base64 has characters where the two alphabets differ)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00" + bytes(rgb))
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


PNG = tiny_png()


def b64_bytes(data: str) -> bytes:
    """Decode proto-JSON bytes, which may use the standard or the URL-safe base64 alphabet."""
    return base64.urlsafe_b64decode(data.replace("+", "-").replace("/", "_"))


@pytest.fixture
def google_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", FAKE_KEY)


@pytest.fixture
def server() -> Iterator[FakeGemini]:
    with FakeGemini(reply="go forward") as srv:
        yield srv


def client_cfg(server: FakeGemini, **overrides: Any) -> ClientConfig:
    settings: dict[str, Any] = {
        "client_name": "gemini",
        "model_id": "gemini-test",
        "base_url": server.base_url,
        "max_retries": 2,
        "delay": 0.01,
        "timeout": 5.0,  # generous: a loaded machine must not time out a prompt answer
    }
    settings.update(overrides)
    return ClientConfig(**settings)


@pytest_asyncio.fixture
async def backend(server: FakeGemini, google_key: None) -> AsyncIterator[Backend]:
    b = create_backend(client_cfg(server))
    yield b
    await b.aclose()


async def complete_once(
    server: FakeGemini,
    messages: list[ChatMessage] | None = None,
    params: GenerateParams | None = None,
    **overrides: Any,
) -> Any:
    """Build a backend from ``client_cfg(server, **overrides)``, make one call, close it."""
    b = create_backend(client_cfg(server, **overrides))
    try:
        return await b.complete(messages or [ChatMessage("user", "hi")], params or GenerateParams())
    finally:
        await b.aclose()


CHAT = [
    ChatMessage("system", "You are playing BabyAI."),
    ChatMessage("user", "Observation: a wall ahead", [PNG]),
    ChatMessage("assistant", "turn left"),
    ChatMessage("assistant", "go forward"),
    ChatMessage("user", "Observation: a door"),
    ChatMessage("user", "What now?"),
]
PARAMS = GenerateParams(
    temperature=0.7,
    max_tokens=32,
    extra={"seed": 7, "top_p": 0.9, "top_k": 20, "stop_sequences": ["END"], "logit_bias": {}},
)
USAGE = {
    "promptTokenCount": 120,
    "candidatesTokenCount": 7,
    "totalTokenCount": 132,
    "cachedContentTokenCount": 64,
    "thoughtsTokenCount": 5,
}


def check_generate_request(body: dict[str, Any]) -> None:
    """The exact JSON the SDK sends for ``CHAT`` / ``PARAMS`` (camelCase where the SDK
    converts, snake_case where it passes a nested model through)."""
    assert body["systemInstruction"]["parts"] == [{"text": "You are playing BabyAI."}]
    contents = body["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    first = contents[0]["parts"]
    assert first[0] == {"text": "Observation: a wall ahead"}
    inline = first[1]["inlineData"]
    assert inline["mime_type"] == "image/png"
    assert b64_bytes(inline["data"]) == PNG
    assert contents[1]["parts"] == [{"text": "turn left\n\ngo forward"}]
    assert contents[2]["parts"] == [{"text": "Observation: a door\n\nWhat now?"}]
    config = body["generationConfig"]
    assert config["temperature"] == 0.7
    assert config["maxOutputTokens"] == 32
    assert config["seed"] == 7
    assert config["topP"] == 0.9
    assert config["topK"] == 20
    assert config["stopSequences"] == ["END"]
    assert not {"logitBias", "logit_bias", "automaticContinuation"} & set(config)
    assert set(body) == {"contents", "systemInstruction", "generationConfig"}


@pytest.mark.asyncio
async def test_request_json_and_response_parsing(server: FakeGemini, backend: Backend) -> None:
    server.script(Behaviour(reply="turn right", thought="the wall blocks me", usage=USAGE))
    out = await backend.complete(CHAT, PARAMS)
    assert out.text == "turn right"
    assert out.reasoning == "the wall blocks me"
    assert out.stop_reason == "stop" and not out.withheld
    assert (out.usage.input_tokens, out.usage.cached_input_tokens) == (120, 64)
    assert (out.usage.output_tokens, out.usage.reasoning_tokens) == (7 + 5, 5)
    assert out.attempts == 1 and out.latency_s > 0
    [req] = server.requests
    assert req.method == "POST"
    assert req.path == "/v1beta/models/gemini-test:generateContent"
    assert (req.model, req.api_method) == ("gemini-test", "generateContent")
    assert req.headers["x-goog-api-key"] == FAKE_KEY
    assert "authorization" not in req.headers
    assert FAKE_KEY not in req.path
    check_generate_request(req.json or {})
    assert "thinkingConfig" not in (req.json or {})["generationConfig"]


@pytest.mark.asyncio
async def test_streaming_accumulates_chunks(server: FakeGemini, google_key: None) -> None:
    server.script(
        Behaviour(
            reply="pick up the red ball",
            thought="a ball is near me",
            usage=USAGE,
            finish_reason="MAX_TOKENS",
        )
    )
    out = await complete_once(server, CHAT, PARAMS, stream=True)
    assert out.text == "pick up the red ball"
    assert out.reasoning == "a ball is near me"
    assert out.stop_reason == "length"
    assert (out.usage.input_tokens, out.usage.output_tokens) == (120, 12)
    assert (out.usage.cached_input_tokens, out.usage.reasoning_tokens) == (64, 5)
    [req] = server.requests
    assert req.path == "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"
    assert req.api_method == "streamGenerateContent"
    check_generate_request(req.json or {})


@pytest.mark.asyncio
async def test_thinking_config_from_budget_or_effort(server: FakeGemini, google_key: None) -> None:
    await complete_once(server, thinking_budget=2048, reasoning_effort="high")
    await complete_once(server, reasoning_effort="medium")
    await complete_once(server, thinking_budget=0)
    budget, effort, off = ((r.json or {})["generationConfig"] for r in server.requests)
    assert budget["thinkingConfig"] == {"thinking_budget": 2048, "include_thoughts": True}
    assert effort["thinkingConfig"] == {"thinking_budget": 8192, "include_thoughts": True}
    assert off["thinkingConfig"] == {"thinking_budget": 0, "include_thoughts": False}
    assert EFFORT_BUDGET == {"minimal": 512, "low": 1024, "medium": 8192, "high": 24576}
    assert thinking_budget_for(ClientConfig(client_name="gemini")) is None


@pytest.mark.asyncio
async def test_temperature_none_and_defaults_are_omitted(
    server: FakeGemini, backend: Backend
) -> None:
    await backend.complete([ChatMessage("user", "hi")], GenerateParams(temperature=None))
    body = server.requests[0].json or {}
    assert body["generationConfig"] == {"maxOutputTokens": 4096}
    assert "systemInstruction" not in body
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
async def test_429_retry_after_header_is_honoured(
    server: FakeGemini, google_key: None, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    server.script(Behaviour(status=429, body=rate_limit_body(), headers={"retry-after": "0.3"}))
    with caplog.at_level(logging.WARNING):
        out = await complete_once(server, stream=stream)
    assert out.text == "go forward"
    assert out.attempts == 2 and len(server.requests) == 2
    # the server's wait replaced the 0.01 s backoff (tenacity logs the chosen wait)
    assert "HTTP 429 RESOURCE_EXHAUSTED" in caplog.text
    assert "retrying in 0.30s" in caplog.text
    assert FAKE_KEY not in caplog.text


@pytest.mark.asyncio
async def test_429_retry_info_delay_is_honoured(
    server: FakeGemini, google_key: None, caplog: pytest.LogCaptureFixture
) -> None:
    server.script(Behaviour(status=429, body=rate_limit_body(retry_delay="0.25s")))
    with caplog.at_level(logging.WARNING):
        out = await complete_once(server)
    assert out.attempts == 2
    assert "retrying in 0.25s" in caplog.text


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
async def test_5xx_is_retried(server: FakeGemini, google_key: None, stream: bool) -> None:
    server.script(Behaviour(status=500), Behaviour(status=503))
    out = await complete_once(server, stream=stream, max_retries=3)
    assert out.text == "go forward"
    assert out.attempts == 3 and len(server.requests) == 3


@pytest.mark.asyncio
async def test_error_event_inside_a_stream_is_retried(server: FakeGemini, google_key: None) -> None:
    server.script(
        Behaviour(reply="half an answer", stream_error=error_body(503, "The model is overloaded."))
    )
    out = await complete_once(server, stream=True)
    assert (out.text, out.stop_reason, out.attempts) == ("go forward", "stop", 2)
    assert len(server.requests) == 2


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
async def test_timeouts_retried_then_backend_error(
    server: FakeGemini, google_key: None, stream: bool
) -> None:
    server.script(*[Behaviour(delay=1.5)] * 3)
    with pytest.raises(BackendError) as info:
        await complete_once(server, stream=stream, timeout=0.3, max_retries=2)
    assert info.value.retryable
    assert "retries exhausted after 3 attempts" in str(info.value)
    assert "timed out" in str(info.value)
    assert len(server.requests) == 3


@pytest.mark.asyncio
async def test_connection_refused_is_retried_then_backend_error(google_key: None) -> None:
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cfg = ClientConfig(
        client_name="gemini",
        model_id="gemini-test",
        base_url=f"http://127.0.0.1:{port}",
        max_retries=1,
        delay=0.01,
        timeout=1.0,
    )
    backend = create_backend(cfg)
    with pytest.raises(BackendError) as info:
        await backend.complete([ChatMessage("user", "hi")], GenerateParams())
    await backend.aclose()
    assert info.value.retryable
    assert "retries exhausted after 2 attempts" in str(info.value)
    assert "connection error" in str(info.value)


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
async def test_400_fails_fast_with_provider_message(
    server: FakeGemini, google_key: None, stream: bool
) -> None:
    message = "* GenerateContentRequest.generation_config.max_output_tokens: must be positive"
    server.script(Behaviour(status=400, body=error_body(400, message)))
    with pytest.raises(BackendError) as info:
        await complete_once(server, stream=stream, max_retries=5)
    assert len(server.requests) == 1
    assert message in str(info.value)
    assert "HTTP 400 INVALID_ARGUMENT" in str(info.value)
    assert info.value.status == 400 and not info.value.retryable


@pytest.mark.asyncio
async def test_401_bad_api_key_never_shows_the_key(
    server: FakeGemini, google_key: None, caplog: pytest.LogCaptureFixture
) -> None:
    body = error_body(401, f"Request had invalid authentication credentials: {FAKE_KEY}")
    server.script(Behaviour(status=401, body=body))
    with pytest.raises(BackendError) as info:
        await complete_once(server)
    message = str(info.value)
    assert message.startswith("bad API key for gemini (HTTP 401; check GOOGLE_API_KEY)")
    assert "invalid authentication credentials" in message
    assert FAKE_KEY not in message and "SECRET-1234" not in message
    assert FAKE_KEY not in caplog.text
    assert info.value.status == 401 and not info.value.retryable
    assert len(server.requests) == 1


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
async def test_invalid_key_400_with_only_gemini_api_key(
    monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)
    # the fake accepts one other key and answers the real 400 API_KEY_INVALID otherwise
    with FakeGemini(api_key="the-right-key") as srv:
        with pytest.raises(BackendError) as info:
            await complete_once(srv, stream=stream, max_retries=5)
        [req] = srv.requests
    message = str(info.value)
    assert message.startswith("bad API key for gemini (HTTP 400; check GEMINI_API_KEY)")
    assert "API key not valid" in message
    assert FAKE_KEY not in message
    assert req.headers["x-goog-api-key"] == FAKE_KEY
    assert not info.value.retryable


@pytest.mark.asyncio
async def test_google_alias_builds_the_gemini_backend(server: FakeGemini, google_key: None) -> None:
    backend = create_backend(client_cfg(server, client_name="google"))
    assert isinstance(backend, GeminiBackend)
    out = await backend.complete([ChatMessage("user", "hi")], GenerateParams())
    await backend.aclose()
    assert out.text == "go forward"
    assert server.requests[0].headers["x-goog-api-key"] == FAKE_KEY


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
async def test_blocked_prompt_is_classified(
    server: FakeGemini, google_key: None, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    server.script(Behaviour(block_reason="SAFETY"))
    with caplog.at_level(logging.WARNING):
        out = await complete_once(server, stream=stream)
    assert (out.text, out.reasoning, out.stop_reason) == ("", "", "blocked:SAFETY")
    assert out.withheld
    assert out.usage.input_tokens > 0 and out.usage.output_tokens == 0
    assert "blocked:SAFETY" in caplog.text
    assert len(server.requests) == 1  # classified, not retried


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("reason", ["SAFETY", "RECITATION", "PROHIBITED_CONTENT"])
async def test_candidate_safety_finish_is_blocked(
    server: FakeGemini, google_key: None, stream: bool, reason: str
) -> None:
    # partial text sent before the filter stopped the answer is withheld too
    server.script(Behaviour(finish_reason=reason, reply="partial text", thought="hmm"))
    out = await complete_once(server, stream=stream)
    assert (out.text, out.reasoning, out.stop_reason) == ("", "", f"blocked:{reason}")
    assert out.withheld


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
async def test_no_candidates_is_empty(
    server: FakeGemini, google_key: None, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    server.script(Behaviour(empty_candidates=True))
    with caplog.at_level(logging.WARNING):
        out = await complete_once(server, stream=stream)
    assert (out.text, out.stop_reason) == ("", "empty")
    assert out.withheld
    assert "(empty)" in caplog.text
    assert len(server.requests) == 1


@pytest.mark.asyncio
async def test_other_finish_reasons_keep_the_raw_reason(
    server: FakeGemini, google_key: None
) -> None:
    server.script(
        Behaviour(finish_reason="MALFORMED_FUNCTION_CALL", reply=""),
        Behaviour(finish_reason="MAX_TOKENS", reply="go for"),
    )
    other = await complete_once(server)
    length = await complete_once(server)
    assert (other.text, other.stop_reason, other.withheld) == (
        "",
        "other:MALFORMED_FUNCTION_CALL",
        False,
    )
    assert (length.text, length.stop_reason) == ("go for", "length")


@pytest.mark.asyncio
async def test_concurrent_calls_share_one_backend(google_key: None) -> None:
    def echo(request: dict[str, Any]) -> str:
        return "echo " + request["contents"][-1]["parts"][0]["text"]

    with FakeGemini(reply=echo, latency=0.05) as srv:
        backend = create_backend(client_cfg(srv))
        outs = await asyncio.gather(
            *[backend.complete([ChatMessage("user", f"n{i}")], GenerateParams()) for i in range(8)]
        )
        await backend.aclose()
        assert [o.text for o in outs] == [f"echo n{i}" for i in range(8)]
        assert len(srv.requests) == 8


def test_missing_key_and_model(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in KEY_VARS:
        monkeypatch.delenv(name, raising=False)
    cfg = ClientConfig(client_name="gemini", model_id="gemini-test")
    message = missing_api_key(cfg) or ""
    assert "GOOGLE_API_KEY or GEMINI_API_KEY" in message
    with pytest.raises(BackendError, match="GOOGLE_API_KEY or GEMINI_API_KEY"):
        create_backend(cfg)
    monkeypatch.setenv("GEMINI_API_KEY", FAKE_KEY)
    with pytest.raises(BackendError, match="model_id is required"):
        create_backend(ClientConfig(client_name="gemini"))


def test_contents_conversion_edge_cases() -> None:
    contents, system = to_gemini_contents(
        [
            ChatMessage("system", "rules"),
            ChatMessage("user", "", [PNG]),
            ChatMessage("system", "more rules"),
            ChatMessage("user", "obs"),
            ChatMessage("assistant", ""),
        ]
    )
    assert system == "rules\n\nmore rules"
    assert len(contents) == 1  # the two user turns merged; the blank assistant turn dropped
    parts = contents[0].parts or []
    assert contents[0].role == "user"
    assert parts[0].text == "obs"  # merged text first, then the run's images
    assert parts[1].inline_data is not None and parts[1].inline_data.data == PNG
