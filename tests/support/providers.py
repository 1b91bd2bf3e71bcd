"""The provider matrix for cross-provider tests: how to start each provider's local test server
(speaking that provider's real wire format), point a run spec at it, make it fail, and read
images and text back out of the requests it recorded.

Used by the VLM test (frames reach every provider in its image format) and the agent-error test
(retries exhausted end every provider's episodes the same way)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.support import fake_anthropic, fake_gemini, fake_openai

TEST_KEY = "test-key-not-a-secret"


@dataclass(frozen=True)
class Provider:
    """One provider's test server and how to read its requests.

    ``start(reply)`` returns an unstarted server (use ``with``); ``overrides(base_url)`` the run
    spec overrides that point the agent at it; ``key_env`` the variable its backend needs;
    ``server_error()`` a scripted 500 for that server; ``images(request)`` the PNG bytes of every
    message, one list per message; ``last_text(request)`` the text of the last message.
    """

    name: str
    start: Callable[[str], Any]
    overrides: Callable[[str], list[str]]
    key_env: str | None
    server_error: Callable[[], Any]
    images: Callable[[dict[str, Any]], list[list[bytes]]]
    last_text: Callable[[dict[str, Any]], str]


def _b64(data: str) -> bytes:
    return base64.b64decode(data.replace("-", "+").replace("_", "/"))


def _openai_images(request: dict[str, Any]) -> list[list[bytes]]:
    out = []
    for msg in request["messages"]:
        parts = msg["content"] if isinstance(msg["content"], list) else []
        urls = [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]
        assert all(u.startswith("data:image/png;base64,") for u in urls)
        out.append([_b64(u.split(",", 1)[1]) for u in urls])
    return out


def _openai_text(request: dict[str, Any]) -> str:
    content = request["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(p["text"] for p in content if p.get("type") == "text")


def _anthropic_blocks(msg: dict[str, Any]) -> list[dict[str, Any]]:
    content = msg["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _anthropic_images(request: dict[str, Any]) -> list[list[bytes]]:
    out = []
    for msg in request["messages"]:
        blocks = [b for b in _anthropic_blocks(msg) if b.get("type") == "image"]
        assert all(b["source"]["media_type"] == "image/png" for b in blocks)
        out.append([_b64(b["source"]["data"]) for b in blocks])
    return out


def _anthropic_text(request: dict[str, Any]) -> str:
    blocks = _anthropic_blocks(request["messages"][-1])
    return "\n".join(b["text"] for b in blocks if b.get("type") == "text")


def _gemini_images(request: dict[str, Any]) -> list[list[bytes]]:
    out = []
    for content in request["contents"]:
        inline = [p["inlineData"] for p in content["parts"] if "inlineData" in p]
        assert all(i.get("mime_type", i.get("mimeType")) == "image/png" for i in inline)
        out.append([_b64(i["data"]) for i in inline])
    return out


def _gemini_text(request: dict[str, Any]) -> str:
    parts = request["contents"][-1]["parts"]
    return "\n".join(p["text"] for p in parts if "text" in p)


OPENAI = Provider(
    name="openai-compatible",
    start=lambda reply: fake_openai.FakeOpenAI(reply),
    overrides=lambda url: ["client.client_name=vllm", f"client.base_url={url}",
                           "client.model_id=fake-vlm"],
    key_env=None,
    server_error=lambda: fake_openai.Behaviour(status=500),
    images=_openai_images,
    last_text=_openai_text,
)
ANTHROPIC = Provider(
    name="anthropic",
    start=lambda reply: fake_anthropic.FakeAnthropic(reply),
    overrides=lambda url: ["client.client_name=claude", f"client.base_url={url}",
                           "client.model_id=claude-test"],
    key_env="ANTHROPIC_API_KEY",
    server_error=lambda: fake_anthropic.Behaviour(status=500),
    images=_anthropic_images,
    last_text=_anthropic_text,
)
GEMINI = Provider(
    name="gemini",
    start=lambda reply: fake_gemini.FakeGemini(reply),
    overrides=lambda url: ["client.client_name=google", f"client.base_url={url}",
                           "client.model_id=gemini-test"],
    key_env="GOOGLE_API_KEY",
    server_error=lambda: fake_gemini.Behaviour(status=500),
    images=_gemini_images,
    last_text=_gemini_text,
)

#: Every provider with a wire-format test server.
PROVIDERS: tuple[Provider, ...] = (OPENAI, ANTHROPIC, GEMINI)
