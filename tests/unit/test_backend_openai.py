"""The OpenAI-compatible backend against a local fake server, through each of its HTTP clients:
every test runs twice, once through the real ``openai`` SDK (``client.http_client=sdk``) and once
through the lean aiohttp client (``lean``), so retries, retry-after, timeouts, classification,
redaction, usage, cached tokens, streaming and guided_choice are proven the same for both."""

from __future__ import annotations

import asyncio
import base64
import email.utils
import json
import socket
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
import pytest_asyncio

from agent_server.backends import FACTORIES, create_backend, default_params, missing_api_key
from agent_server.backends.base import (
    Backend,
    BackendError,
    ChatMessage,
    GenerateParams,
    choices_gbnf,
)
from agent_server.backends.openai_compat import OpenAICompatBackend
from agent_server.backends.retry import parse_retry_after
from agent_server.strategies import create_strategy
from agent_server.turn import EpisodeContext, TurnInput
from moria.config import AgentConfig, ClientConfig
from tests.support.fake_openai import Behaviour, FakeOpenAI

PNG = b"\x89PNG\r\n\x1a\nfake-image"
FAKE_KEY = "fake-key-for-tests-0123456789"  # made up; only ever sent to the local fake server

#: The HTTP clients every test runs through (``client.http_client``).
TRANSPORTS = ("sdk", "lean")
#: The HTTP client of the running test (set by the ``transport`` fixture, read by ``client_cfg``).
_RUNNING: dict[str, str] = {"http_client": "sdk"}


@pytest.fixture(autouse=True, params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> Iterator[str]:
    """Runs each test once per HTTP client: ``client_cfg`` asks for it."""
    _RUNNING["http_client"] = request.param
    yield request.param
    _RUNNING["http_client"] = "sdk"


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(reply="go forward") as srv:
        yield srv


def client_cfg(server: FakeOpenAI, **overrides: Any) -> ClientConfig:
    settings: dict[str, Any] = {
        "client_name": "vllm",
        "model_id": "test-model",
        "base_url": server.base_url,
        "delay": 0.01,
        "timeout": 5.0,  # generous: a loaded machine must not time out a prompt answer
        "max_retries": 2,
        "http_client": _RUNNING["http_client"],
    }
    settings.update(overrides)
    return ClientConfig(**settings)


def sent_through(backend: Backend, transport: str) -> Backend:
    """``backend``, checked to send through ``transport`` (the test's HTTP client)."""
    assert isinstance(backend, OpenAICompatBackend) and backend.transport == transport
    return backend


@pytest_asyncio.fixture
async def backend(server: FakeOpenAI, transport: str) -> AsyncIterator[Backend]:
    b = sent_through(create_backend(client_cfg(server)), transport)
    yield b
    await b.aclose()


@pytest_asyncio.fixture
async def stream_backend(server: FakeOpenAI, transport: str) -> AsyncIterator[Backend]:
    b = sent_through(create_backend(client_cfg(server, stream=True)), transport)
    yield b
    await b.aclose()


CHAT = [
    ChatMessage("system", "You are playing BabyAI."),
    ChatMessage("user", "Observation: a wall ahead", [PNG]),
]
USAGE = {
    "prompt_tokens": 120,
    "completion_tokens": 7,
    "total_tokens": 127,
    "prompt_tokens_details": {"cached_tokens": 64},
    "completion_tokens_details": {"reasoning_tokens": 5},
}


def check_chat_request(req: dict[str, Any]) -> None:
    assert req["model"] == "test-model"
    assert req["temperature"] == 0.7
    assert req["max_tokens"] == 32
    assert req["messages"][0] == {"role": "system", "content": "You are playing BabyAI."}
    parts = req["messages"][1]["content"]
    assert req["messages"][1]["role"] == "user"
    assert parts[0] == {"type": "text", "text": "Observation: a wall ahead"}
    assert parts[1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64," + base64.b64encode(PNG).decode()},
    }


@pytest.mark.asyncio
async def test_non_streaming_request_and_usage(server: FakeOpenAI, backend: Backend) -> None:
    server.script(Behaviour(reply="turn left", reasoning="the wall blocks me", usage=USAGE))
    out = await backend.complete(CHAT, GenerateParams(temperature=0.7, max_tokens=32))
    assert out.text == "turn left"
    assert out.reasoning == "the wall blocks me"
    assert out.stop_reason == "stop"
    assert (out.usage.input_tokens, out.usage.output_tokens) == (120, 7)
    assert (out.usage.cached_input_tokens, out.usage.reasoning_tokens) == (64, 5)
    assert out.attempts == 1 and out.latency_s > 0
    [req] = server.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer EMPTY"
    check_chat_request(req.json or {})
    assert "stream" not in (req.json or {})


@pytest.mark.asyncio
async def test_streaming_accumulates_deltas(server: FakeOpenAI, stream_backend: Backend) -> None:
    server.script(
        Behaviour(
            reply="pick up the red ball",
            reasoning="a ball is near",
            usage=USAGE,
            finish_reason="length",
        )
    )
    out = await stream_backend.complete(CHAT, GenerateParams(temperature=0.7, max_tokens=32))
    assert out.text == "pick up the red ball"
    assert out.reasoning == "a ball is near"
    assert out.stop_reason == "length"
    assert (out.usage.input_tokens, out.usage.output_tokens) == (120, 7)
    assert (out.usage.cached_input_tokens, out.usage.reasoning_tokens) == (64, 5)
    [req] = server.requests
    body = req.json or {}
    check_chat_request(body)
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
async def test_retry_after_429_honours_retry_after(server: FakeOpenAI, stream: bool) -> None:
    backend = create_backend(client_cfg(server, stream=stream))
    server.script(Behaviour(status=429, headers={"retry-after": "0.3"}))
    start = time.perf_counter()
    out = await backend.complete([ChatMessage("user", "hi")], GenerateParams())
    elapsed = time.perf_counter() - start
    await backend.aclose()
    assert out.text == "go forward"
    assert out.attempts == 2
    assert len(server.requests) == 2
    assert elapsed >= 0.3  # waited the server's retry-after, not the 0.01 s backoff


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
async def test_retry_after_500(server: FakeOpenAI, stream: bool) -> None:
    backend = create_backend(client_cfg(server, stream=stream, max_retries=3))
    server.script(Behaviour(status=500), Behaviour(status=503))
    out = await backend.complete([ChatMessage("user", "hi")], GenerateParams())
    await backend.aclose()
    assert out.text == "go forward"
    assert out.attempts == 3
    assert len(server.requests) == 3


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
async def test_timeouts_retried_then_backend_error(server: FakeOpenAI, stream: bool) -> None:
    backend = create_backend(client_cfg(server, stream=stream, timeout=0.3, max_retries=2))
    server.script(*[Behaviour(delay=1.5)] * 3)
    with pytest.raises(BackendError) as info:
        await backend.complete([ChatMessage("user", "hi")], GenerateParams())
    await backend.aclose()
    assert info.value.retryable
    assert "retries exhausted after 3 attempts" in str(info.value)
    assert "timed out" in str(info.value)
    assert len(server.requests) == 3


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
async def test_400_fails_fast_with_provider_message(server: FakeOpenAI, stream: bool) -> None:
    backend = create_backend(client_cfg(server, stream=stream, max_retries=5))
    body = {
        "error": {
            "message": "max_tokens is too large: 999999",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": None,
        }
    }
    server.script(Behaviour(status=400, body=body))
    with pytest.raises(BackendError) as info:
        await backend.complete([ChatMessage("user", "hi")], GenerateParams(max_tokens=999999))
    await backend.aclose()
    assert len(server.requests) == 1
    assert "max_tokens is too large: 999999" in str(info.value)
    assert info.value.status == 400 and not info.value.retryable


@pytest.mark.asyncio
async def test_401_bad_api_key_never_shows_the_key(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, transport: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    backend = sent_through(
        create_backend(client_cfg(server, client_name="openai", model_id="gpt-4o")), transport)
    body = {
        "error": {
            "message": f"Incorrect API key provided: {FAKE_KEY}.",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    }
    server.script(Behaviour(status=401, body=body))
    with pytest.raises(BackendError) as info:
        await backend.complete([ChatMessage("user", "hi")], GenerateParams())
    await backend.aclose()
    message = str(info.value)
    assert message.startswith("bad API key for openai")
    assert "OPENAI_API_KEY" in message
    assert FAKE_KEY not in message and "0123456789" not in message
    assert len(server.requests) == 1
    assert server.requests[0].headers["authorization"] == f"Bearer {FAKE_KEY}"


@pytest.mark.asyncio
async def test_alternate_roles_merges_same_role_runs(server: FakeOpenAI) -> None:
    backend = create_backend(client_cfg(server, alternate_roles=True))
    chat = [
        ChatMessage("system", "rules"),
        ChatMessage("user", "obs 1"),
        ChatMessage("user", "obs 2"),
        ChatMessage("assistant", "a"),
        ChatMessage("assistant", "b"),
        ChatMessage("user", "obs 3"),
    ]
    await backend.complete(chat, GenerateParams())
    await backend.aclose()
    sent = (server.requests[0].json or {})["messages"]
    assert sent == [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "obs 1\n\nobs 2"},
        {"role": "assistant", "content": "a\n\nb"},
        {"role": "user", "content": "obs 3"},
    ]


@pytest.mark.asyncio
@pytest.mark.parametrize("alternate_roles", [False, True])
async def test_the_backend_alone_merges_a_strategys_chat(
    server: FakeOpenAI, alternate_roles: bool
) -> None:
    """The history hands over an unmerged chat; with ``alternate_roles`` the backend merges the
    user-role instruction into the first observation on the wire, else sends it as built."""
    client = client_cfg(server, alternate_roles=alternate_roles)
    backend = create_backend(client)
    ctx = EpisodeContext(instruction="RULES", action_names=["go forward"],
                         default_action="go forward", agent=AgentConfig(max_text_history=2),
                         client=client, seed=1, env_name="babyai", task="t",
                         agent_id="agent_0", record_prompts=True)
    strategy = create_strategy(ctx, backend)
    turn = TurnInput(step=0, long_term_context="a wall", short_term_context="",
                     image_png=None, legal_actions=[], info={})
    decision = await strategy.act(turn)
    await backend.aclose()
    built = json.loads(decision.prompt_json)
    sent = (server.requests[0].json or {})["messages"]
    assert [m["role"] for m in built] == ["user" if alternate_roles else "system", "user"]
    if alternate_roles:
        assert sent == [{"role": "user",
                         "content": f"{built[0]['content']}\n\n{built[1]['content']}"}]
    else:
        assert sent == [{"role": m["role"], "content": m["content"]} for m in built]


@pytest.mark.asyncio
async def test_without_alternate_roles_messages_are_kept(
    server: FakeOpenAI, backend: Backend
) -> None:
    chat = [ChatMessage("user", "obs 1"), ChatMessage("user", "obs 2")]
    await backend.complete(chat, GenerateParams())
    assert len((server.requests[0].json or {})["messages"]) == 2


@pytest.mark.asyncio
@pytest.mark.parametrize("stream", [False, True])
async def test_empty_choices_is_empty_text_not_a_crash(server: FakeOpenAI, stream: bool) -> None:
    backend = create_backend(client_cfg(server, stream=stream))
    server.script(Behaviour(empty_choices=True), Behaviour(reply=""))
    empty = await backend.complete([ChatMessage("user", "hi")], GenerateParams())
    blank = await backend.complete([ChatMessage("user", "hi")], GenerateParams())
    await backend.aclose()
    assert (empty.text, empty.stop_reason) == ("", "empty")
    assert (blank.text, blank.stop_reason) == ("", "stop")
    assert len(server.requests) == 2


@pytest.mark.asyncio
async def test_choices_become_guided_choice_or_grammar(server: FakeOpenAI,
                                                      transport: str) -> None:
    choices = ["go forward", 'say "hi"']
    for name in ("vllm", "llamacpp", "openai"):
        backend = OpenAICompatBackend(
            client_cfg(server, client_name=name), api_key="EMPTY", base_url=server.base_url
        )
        assert backend.transport == transport
        await backend.complete(
            [ChatMessage("user", "hi")],
            GenerateParams(choices=choices, extra={"top_p": 0.5, "seed": 3}),
        )
        await backend.aclose()
    vllm, llamacpp, openai_req = (r.json or {} for r in server.requests)
    assert vllm["guided_choice"] == choices
    assert llamacpp["grammar"] == choices_gbnf(choices)
    assert llamacpp["grammar"] == 'root ::= "go forward" | "say \\"hi\\""\n'
    assert "guided_choice" not in openai_req and "grammar" not in openai_req
    assert all(r["top_p"] == 0.5 and r["seed"] == 3 for r in (vllm, llamacpp, openai_req))


@pytest.mark.asyncio
async def test_temperature_none_is_omitted(server: FakeOpenAI, backend: Backend) -> None:
    await backend.complete([ChatMessage("user", "hi")], GenerateParams(temperature=None))
    assert "temperature" not in (server.requests[0].json or {})


@pytest.mark.asyncio
async def test_callable_reply_and_concurrent_calls() -> None:
    def echo(request: dict[str, Any]) -> str:
        return "echo " + request["messages"][-1]["content"]

    with FakeOpenAI(reply=echo, latency=0.1) as srv:
        # a generous timeout: 16 calls at once on a busy machine must not time out and retry
        backend = create_backend(client_cfg(srv, timeout=60.0))
        outs = await asyncio.gather(
            *[backend.complete([ChatMessage("user", f"n{i}")], GenerateParams()) for i in range(16)]
        )
        await backend.aclose()
        assert [o.text for o in outs] == [f"echo n{i}" for i in range(16)]
        assert len(srv.requests) == 16


def test_missing_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    message = missing_api_key(ClientConfig(client_name="openai", model_id="gpt-4o"))
    assert message is not None and "OPENAI_API_KEY" in message
    with pytest.raises(BackendError, match="OPENAI_API_KEY"):
        create_backend(ClientConfig(client_name="openai", model_id="gpt-4o"))
    monkeypatch.setenv("OPENROUTER_API_KEY", "")
    assert "OPENROUTER_API_KEY" in (missing_api_key(ClientConfig(client_name="openrouter")) or "")
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    assert missing_api_key(ClientConfig(client_name="openai")) is None
    for keyless in ("vllm", "llamacpp", "local"):
        assert missing_api_key(ClientConfig(client_name=keyless)) is None


def test_registry_and_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    assert set(FACTORIES) == {
        "openai", "openrouter", "anthropic", "gemini", "vllm", "llamacpp", "local"
    }
    monkeypatch.setenv("OPENROUTER_API_KEY", FAKE_KEY)
    router = create_backend(ClientConfig(client_name="openrouter", model_id="x/y"))
    assert isinstance(router, OpenAICompatBackend)
    assert router.base_url.startswith("https://openrouter.ai/api/v1")
    server = create_backend(
        ClientConfig(client_name="llamacpp", base_url="http://localhost:8080/v1")
    )
    assert isinstance(server, OpenAICompatBackend)
    assert server.base_url.startswith("http://localhost:8080/v1")
    assert server.api_key == "EMPTY"
    assert (router.transport, server.transport) == ("sdk", "lean")  # http_client=auto
    with pytest.raises(BackendError, match="model_id is required"):
        create_backend(ClientConfig(client_name="vllm", base_url="http://localhost:8000/v1"))
    params = default_params(
        ClientConfig.model_validate(
            {"generate_kwargs": {"temperature": 0.2, "max_tokens": 50, "top_p": 0.9}}
        )
    )
    assert (params.temperature, params.max_tokens, params.extra) == (0.2, 50, {"top_p": 0.9})


def test_parse_retry_after() -> None:
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None
    future = email.utils.formatdate(time.time() + 30, usegmt=True)
    value = parse_retry_after({"retry-after": future})
    assert value is not None and 25 <= value <= 31


@pytest.mark.parametrize(
    ("client_name", "settings", "expected"),
    [
        ("openai", {"reasoning_effort": "high"},
         {"reasoning_effort": "high", "max_completion_tokens": 64}),
        ("openrouter", {"thinking_budget": 2048}, {"reasoning": {"max_tokens": 2048},
                                                    "max_tokens": 64}),
        ("openrouter", {"reasoning_effort": "minimal"}, {"reasoning": {"effort": "low"},
                                                         "max_tokens": 64}),
        ("vllm", {"reasoning_effort": "low"}, {"reasoning_effort": "low", "max_tokens": 64}),
    ],
)
async def test_reasoning_settings_reach_the_request_and_reasoning_is_recorded(
        server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, client_name: str,
        settings: dict[str, Any], expected: dict[str, Any]) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    monkeypatch.setenv("OPENROUTER_API_KEY", FAKE_KEY)
    server.script(Behaviour(reasoning="think first", usage={
        "prompt_tokens": 9, "completion_tokens": 40, "total_tokens": 49,
        "completion_tokens_details": {"reasoning_tokens": 35}}))
    b = create_backend(client_cfg(server, client_name=client_name, **settings))
    try:
        out = await b.complete([ChatMessage("user", "hi")], GenerateParams(max_tokens=64))
    finally:
        await b.aclose()
    body = server.requests[-1].json or {}
    for key, value in expected.items():
        assert body[key] == value
    if client_name == "openai":
        assert "max_tokens" not in body
    assert (out.reasoning, out.usage.reasoning_tokens, out.usage.output_tokens) == (
        "think first", 35, 40)


async def test_content_filter_is_classified_as_blocked(server: FakeOpenAI,
                                                       backend: Backend) -> None:
    server.script(Behaviour(reply="", finish_reason="content_filter"))
    out = await backend.complete([ChatMessage("user", "hi")], GenerateParams())
    assert (out.text, out.stop_reason, out.withheld) == ("", "blocked:content_filter", True)


async def test_openrouter_free_tier_model_id_is_sent_unchanged(
        server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", FAKE_KEY)
    model = "meta-llama/llama-3.3-70b-instruct:free"
    b = create_backend(client_cfg(server, client_name="openrouter", model_id=model))
    try:
        out = await b.complete([ChatMessage("user", "hi")], GenerateParams())
    finally:
        await b.aclose()
    request = server.requests[-1]
    assert (request.json or {})["model"] == model and out.text == "go forward"
    assert request.headers["authorization"] == f"Bearer {FAKE_KEY}"


def test_a_reply_that_is_not_a_json_object_is_a_backend_error() -> None:
    """A 200 whose body decodes to a list or a string (not a chat-completions server) is an
    error naming the endpoint, not an empty completion; a dict reply still parses."""

    backend = OpenAICompatBackend(
        ClientConfig(client_name="vllm", model_id="m", http_client=_RUNNING["http_client"]),
        api_key="EMPTY", base_url="http://127.0.0.1:9/v1")
    for body in ([], "hello"):
        with pytest.raises(BackendError, match="not a JSON object"):
            backend._parse(body)
    ok = backend._parse({"choices": [{"message": {"content": "go"}, "finish_reason": "stop"}],
                         "usage": {"prompt_tokens": 7, "completion_tokens": 1,
                                   "prompt_tokens_details": {"cached_tokens": 5}}})
    assert (ok.text, ok.stop_reason, ok.usage.input_tokens, ok.usage.cached_input_tokens) == (
        "go", "stop", 7, 5)


def closed_port_url() -> tuple[socket.socket, str]:
    """A bound socket that never listens (connections to it are refused) and its base URL."""
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    return closed, f"http://127.0.0.1:{closed.getsockname()[1]}/v1"


@pytest.mark.parametrize("stream", [False, True])
async def test_connection_refused_is_retried_and_said_as_such(stream: bool) -> None:
    closed, url = closed_port_url()
    with closed:
        backend = OpenAICompatBackend(
            ClientConfig(client_name="vllm", model_id="m", base_url=url, delay=0.01,
                         max_retries=1, stream=stream, http_client=_RUNNING["http_client"]),
            api_key="EMPTY", base_url=url)
        with pytest.raises(BackendError) as info:
            await backend.complete([ChatMessage("user", "hi")], GenerateParams())
        await backend.aclose()
    message = str(info.value)
    assert info.value.retryable and message.startswith(
        "vllm: retries exhausted after 2 attempts: connection error")
    assert f"({url}/): connection refused (ConnectionRefusedError" in message


class _ErrorEventOpenAI(FakeOpenAI):
    """Streams one SSE event that carries an error (with the key in its text), then answers."""

    def chunks(self, behaviour: Behaviour, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
        if len(self.requests) == 1:
            yield {"error": {"message": f"model overloaded (key {FAKE_KEY})"}}
            return
        yield from super().chunks(behaviour, request)


async def test_an_error_event_in_a_stream_is_retried_without_the_key() -> None:
    with _ErrorEventOpenAI(reply="go forward") as srv:
        backend = create_backend(client_cfg(srv, stream=True))
        out = await backend.complete([ChatMessage("user", "hi")], GenerateParams())
        failing = create_backend(client_cfg(srv, stream=True, max_retries=0))
        srv.clear()
        with pytest.raises(BackendError) as info:
            await failing.complete([ChatMessage("user", "hi")], GenerateParams())
        await backend.aclose()
        await failing.aclose()
    assert (out.text, out.attempts) == ("go forward", 2)
    assert str(info.value) == ("vllm: retries exhausted after 1 attempts: "  # key-shaped: hidden
                               "API error: model overloaded (key fake-***)")


class _ProxyErrorOpenAI(FakeOpenAI):
    """The first request is answered 502 with an HTML page (a proxy in front of the server)."""

    def respond(self, out: Any, behaviour: Behaviour, record: Any, request: Any) -> None:
        if len(self.requests) > 1:
            super().respond(out, behaviour, record, request)
            return
        page = b"<html><body>502 Bad Gateway</body></html>"
        out.send_response(502)
        out.send_header("content-type", "text/html")
        out.send_header("content-length", str(len(page)))
        out.end_headers()
        out.wfile.write(page)


@pytest.mark.parametrize("stream", [False, True])
async def test_an_error_answer_that_is_not_json_is_classified_by_its_status(
        stream: bool) -> None:
    with _ProxyErrorOpenAI(reply="go forward") as srv:
        backend = create_backend(client_cfg(srv, stream=stream, max_retries=0))
        with pytest.raises(BackendError) as info:
            await backend.complete([ChatMessage("user", "hi")], GenerateParams())
        out = await backend.complete([ChatMessage("user", "hi")], GenerateParams())
        await backend.aclose()
    assert str(info.value) == "vllm: retries exhausted after 1 attempts: HTTP 502: Error code: 502"
    assert info.value.status == 502 and out.text == "go forward"


async def test_exact_messages_of_a_refused_request_and_a_bad_key(
        server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    """The words of a failure are the same whichever client sent the call."""
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    backend = create_backend(client_cfg(server, client_name="openai", model_id="gpt-4o"))
    server.script(Behaviour(status=400, body={"error": {"message": "bad max_tokens",
                                                        "type": "invalid_request_error"}}),
                  Behaviour(status=403, body={"error": "forbidden"}))
    messages = []
    for _ in range(2):
        with pytest.raises(BackendError) as info:
            await backend.complete([ChatMessage("user", "hi")], GenerateParams())
        messages.append(str(info.value))
    await backend.aclose()
    assert messages == ["openai: HTTP 400: bad max_tokens",
                        "bad API key for openai (HTTP 403; check OPENAI_API_KEY): "
                        "Error code: 403"]


class _KeyRefusingOpenAI(FakeOpenAI):
    """Every GET (the probe's list of models) is answered 401, naming the key."""

    def handle_get(self, out: Any) -> None:
        out.send_json(401, self.error_json(401, f"Incorrect API key provided: {FAKE_KEY}"))


async def test_the_probe_lists_models_and_names_an_unusable_endpoint(
        server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    backend = create_backend(client_cfg(server))
    assert await backend.probe() is None
    await backend.aclose()
    closed, url = closed_port_url()
    with closed:
        unreachable = create_backend(client_cfg(server, base_url=url))
        said = await unreachable.probe()
        await unreachable.aclose()
    assert said is not None and said.startswith(
        f"vllm endpoint {url}/ cannot be used: connection error: connection refused")
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    with _KeyRefusingOpenAI() as refusing:
        keyed = create_backend(client_cfg(refusing, client_name="openai", model_id="m"))
        said = await keyed.probe()
        await keyed.aclose()
    assert said is not None and said.startswith(
        f"openai endpoint {refusing.base_url}/ refused the key: bad API key for openai "
        "(HTTP 401; check OPENAI_API_KEY)")
    assert FAKE_KEY not in said


async def test_create_as_sent_goes_through_the_sdk_with_either_client(
        server: FakeOpenAI, transport: str) -> None:
    """BALROG's wire-format path needs the SDK's own request building and response object: a
    lean backend makes its SDK client for it, and still sends ``complete`` lean."""
    backend = sent_through(create_backend(client_cfg(server)), transport)
    assert backend.can_create_as_sent()
    server.script(Behaviour(reply="turn left", usage=USAGE))
    response, out = await backend.create_as_sent(
        {"model": "test-model", "messages": [{"role": "user", "content": "hi"}],
         "max_tokens": 16})
    plain = await backend.complete([ChatMessage("user", "hi")], GenerateParams())
    await backend.aclose()
    assert response.choices[0].message.content == "turn left" == out.text
    assert (out.usage.input_tokens, out.usage.cached_input_tokens) == (120, 64)
    assert plain.text == "go forward"
    assert "x-stainless-lang" in server.requests[0].headers  # the SDK sent it
    assert ("x-stainless-lang" in server.requests[1].headers) == (transport == "sdk")
