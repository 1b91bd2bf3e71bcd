"""``client.http_client``: which HTTP client the OpenAI-compatible backend sends with (``auto``
lean for self-hosted servers, the official SDK for hosted APIs) and where ``lean`` is refused."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from agent_server.backends import create_backend
from agent_server.backends.openai_compat import OpenAICompatBackend
from moria.backends import HTTP_CLIENT_CHOICES, http_client_for
from moria.config import ClientConfig

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
