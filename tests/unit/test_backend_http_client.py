"""``client.http_client``: which HTTP client the OpenAI-compatible backend sends with (``auto``
lean for self-hosted servers, the official SDK for hosted APIs) and where ``lean`` is refused."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest
from pydantic import ValidationError

from agent_server.backends import create_backend, probe_endpoint
from agent_server.backends.base import BackendError, ChatMessage, GenerateParams
from agent_server.backends.openai_compat import OpenAICompatBackend
from moria.backends import HTTP_CLIENT_CHOICES, http_client_for
from moria.config import ClientConfig
from tests.support.fake_openai import FakeOpenAI

URL = "http://127.0.0.1:8000/v1"
KEY = "fake-key-for-tests-0123456789"  # made up; nothing is sent


@pytest.fixture(autouse=True)
def _keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENROUTER_API_KEY"):
        monkeypatch.setenv(name, KEY)


@pytest.mark.parametrize(("settings", "expected"), [
    ({"client_name": "vllm", "base_url": URL}, "lean"),
    ({"client_name": "llamacpp", "base_url": URL}, "lean"),
    ({"client_name": "openai"}, "sdk"),
    ({"client_name": "openai", "base_url": URL}, "sdk"),  # auto: a provider's name keeps its SDK
    ({"client_name": "openrouter"}, "sdk"),
    ({"client_name": "vllm", "base_url": URL, "http_client": "sdk"}, "sdk"),
    ({"client_name": "llamacpp", "base_url": URL, "http_client": "sdk"}, "sdk"),
    ({"client_name": "openai", "base_url": URL, "http_client": "lean"}, "lean"),
    ({"client_name": "openrouter", "base_url": URL, "http_client": "lean"}, "lean"),
    ({"client_name": "vllm", "base_url": URL, "http_client": "lean"}, "lean"),
])
async def test_auto_is_lean_for_self_hosted_servers_and_the_sdk_for_hosted_apis(
        settings: dict[str, Any], expected: str) -> None:
    backend = create_backend(ClientConfig(model_id="m", **settings))
    try:
        assert isinstance(backend, OpenAICompatBackend)
        assert backend.transport == expected
    finally:
        await backend.aclose()


def test_the_default_is_auto() -> None:
    assert ClientConfig().http_client == "auto" and HTTP_CLIENT_CHOICES == ("auto", "sdk", "lean")


@pytest.mark.parametrize("client_name", ["openai", "openrouter"])
def test_lean_for_a_hosted_api_without_a_base_url_is_refused(client_name: str) -> None:
    with pytest.raises(ValidationError) as info:
        ClientConfig(client_name=client_name, model_id="m", http_client="lean")
    said = str(info.value)
    assert f"client.http_client='lean' needs client.base_url for client '{client_name}'" in said
    assert "allowed: 'auto', 'sdk', 'lean'" in said


@pytest.mark.parametrize("client_name", ["anthropic", "gemini", "local"])
def test_lean_for_a_backend_without_openai_s_wire_format_is_refused(client_name: str) -> None:
    with pytest.raises(ValidationError, match="does not apply to client"):
        ClientConfig(client_name=client_name, base_url=URL, http_client="lean")
    assert ClientConfig(client_name=client_name, http_client="sdk").http_client == "sdk"


def test_a_refused_choice_is_refused_on_assignment_too() -> None:
    client = ClientConfig(client_name="openai", model_id="m", base_url=URL, http_client="lean")
    with pytest.raises(ValidationError, match=r"needs client\.base_url"):
        client.base_url = None


def test_unknown_values_are_refused() -> None:
    with pytest.raises(ValidationError, match="'auto', 'sdk' or 'lean'"):
        ClientConfig(client_name="vllm", base_url=URL, http_client="httpx")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one of 'auto', 'sdk', 'lean'"):
        http_client_for("vllm", "httpx", URL)


def test_http_client_for_reads_the_records() -> None:
    assert http_client_for("vllm", "auto", None) == "lean"  # the llama.cpp child or the engine
    assert http_client_for("llamacpp", "lean", None) == "lean"
    assert http_client_for("anthropic", "auto", None) == "sdk"  # not applicable: its own SDK
    assert http_client_for("openai", "lean", URL) == "lean"


class _ForwardProxy(FakeOpenAI):
    """The fake server reached as an HTTP proxy: each request line names the absolute URL,
    kept in ``targets``; the request is then answered as the server's own."""

    def __init__(self, reply: str) -> None:
        super().__init__(reply)
        self.targets: list[str] = []

    def record(self, path: str, headers: dict[str, str], request: Any) -> Any:
        self.targets.append(path)
        return super().record(urlsplit(path).path, headers, request)


def _proxy_env(monkeypatch: pytest.MonkeyPatch, proxy: str, no_proxy: str = "") -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy)
    if no_proxy:
        monkeypatch.setenv("NO_PROXY", no_proxy)


async def _ask(base_url: str) -> str:
    backend = create_backend(ClientConfig(client_name="vllm", model_id="m", base_url=base_url,
                                          timeout=10.0, max_retries=0))
    try:
        assert isinstance(backend, OpenAICompatBackend) and backend.transport == "lean"
        return (await backend.complete([ChatMessage("user", "hi")], GenerateParams())).text
    finally:
        await backend.aclose()


async def test_lean_sends_through_the_proxy_the_environment_names(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the model's host does not resolve: only a request sent to the proxy is answered
    with _ForwardProxy("through the proxy") as proxy:
        _proxy_env(monkeypatch, proxy.base_url)
        assert await _ask("http://model.invalid:9/v1") == "through the proxy"
        assert proxy.targets == ["http://model.invalid:9/v1/chat/completions"]


async def test_lean_goes_direct_to_a_host_in_no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    with _ForwardProxy("through the proxy") as proxy, FakeOpenAI("direct") as direct:
        _proxy_env(monkeypatch, proxy.base_url, no_proxy="127.0.0.1")
        assert await _ask(direct.base_url) == "direct"
        assert proxy.targets == [] and len(direct.requests) == 1


@pytest.mark.parametrize(("proxy", "said"), [
    ("socks5://user:secret-proxy-pw@127.0.0.1:1080", "names a proxy of scheme 'socks5'"),
    ("https://user:secret-proxy-pw@proxy.invalid:443", "names a proxy of scheme 'https'"),
    ("secret-proxy-pw", "names a value that is not a proxy URL"),
    ("http://user:secret-proxy-pw@[::1", "is not a URL (Invalid IPv6 URL)"),
])
async def test_a_proxy_the_lean_client_cannot_use_is_refused_by_name(
        monkeypatch: pytest.MonkeyPatch, proxy: str, said: str) -> None:
    # aiohttp would send to a socks or ftp proxy as to an HTTP one, and go direct instead of
    # through an https:// one; the call fails at once, naming the variable, not the password
    with FakeOpenAI("direct") as direct:
        _proxy_env(monkeypatch, proxy)
        with pytest.raises(BackendError) as info:
            await _ask(direct.base_url)
    message = str(info.value)
    assert said in message and "HTTP_PROXY" in message and "NO_PROXY" in message
    assert "secret-proxy-pw" not in message
    assert not info.value.retryable and direct.requests == []


async def test_a_proxy_the_lean_client_cannot_use_fails_the_preflight(
        monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAI("direct") as direct:
        _proxy_env(monkeypatch, "socks5://127.0.0.1:1080")
        problem = await probe_endpoint(ClientConfig(client_name="vllm", model_id="m",
                                                    base_url=direct.base_url))
    assert problem is not None
    assert problem.startswith(f"vllm endpoint {direct.base_url}")
    assert "cannot be used: vllm: HTTP_PROXY names a proxy of scheme 'socks5'" in problem
    assert direct.requests == []
