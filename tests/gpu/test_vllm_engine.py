"""vLLM's in-process engine (``client_name: vllm`` without base_url) on a real GPU.

On a machine without the vllm package or a CUDA GPU the engine tests skip ("no GPU here: ...")
and ``test_engine_unavailable_is_a_clear_error`` checks the error instead.

The model is ``$MORIA_VLLM_TEST_MODEL`` (default ``Qwen/Qwen2.5-0.5B-Instruct``): a Hugging Face
id that must already be in the local Hugging Face cache (GPU machines may have no internet), or
a local model folder. Run with ``-s`` to see the throughput figures.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from agent_server.backends import create_backend
from agent_server.backends.base import BackendError, ChatMessage, GenerateParams
from agent_server.backends.vllm_engine import UNAVAILABLE, unavailable_reason
from moria.config import ClientConfig

DEFAULT_TEST_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
ACTIONS = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle", "done"]
OBJECTS = ["red ball", "blue key", "green box", "yellow door", "purple ball", "grey key",
           "red box", "blue door"]

_UNAVAILABLE = unavailable_reason()
needs_gpu = pytest.mark.skipif(_UNAVAILABLE is not None, reason=f"no GPU here: {_UNAVAILABLE}")


def _test_model() -> tuple[str | None, str]:
    """``(model, "")`` when the test model is usable offline, else ``(None, why not)``."""
    model = os.environ.get("MORIA_VLLM_TEST_MODEL", DEFAULT_TEST_MODEL)
    if Path(model).expanduser().is_dir():
        return str(Path(model).expanduser()), ""
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(model, "config.json")
    if isinstance(cached, str):
        return model, ""
    return None, (
        f"model {model!r} is not in the Hugging Face cache and this machine may have no "
        "internet; set MORIA_VLLM_TEST_MODEL to a cached model id or a local model folder"
    )


def chat(i: int) -> list[ChatMessage]:
    thing = OBJECTS[i % len(OBJECTS)]
    return [
        ChatMessage("system", "You play BabyAI. Answer with one action from: "
                    + ", ".join(ACTIONS) + "."),
        ChatMessage("user", f"Step {i}: the {thing} is {i % 5 + 1} steps ahead. What now?"),
    ]


async def test_engine_unavailable_is_a_clear_error() -> None:
    if _UNAVAILABLE is None:
        pytest.skip("vllm and a GPU are present: the engine tests below run instead")
    client = ClientConfig(client_name="vllm", model_id=DEFAULT_TEST_MODEL)
    with pytest.raises(BackendError) as info:
        backend = create_backend(client)  # raises here when vllm is not installed
        await backend.complete(chat(0), GenerateParams(max_tokens=4))  # or here: no GPU
    message = str(info.value)
    assert UNAVAILABLE in message
    assert "set client.base_url" in message
    assert info.value.provider == "vllm"


@needs_gpu
async def test_concurrent_calls_are_batched_on_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    model, why_not = _test_model()
    if model is None:
        pytest.skip(why_not)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # never wait on a hub the machine cannot reach
    from agent_server.backends.vllm_engine import VLLMEngineBackend

    backend = create_backend(ClientConfig(client_name="vllm", model_id=model))
    assert isinstance(backend, VLLMEngineBackend)
    await backend.load()
    before = backend.stats.batches

    n = 64
    params = [
        GenerateParams(temperature=0.7, max_tokens=32, extra={"seed": i, "top_p": 0.95})
        if i % 2 == 0 else
        GenerateParams(temperature=1.0, max_tokens=8, choices=ACTIONS, extra={"seed": i})
        for i in range(n)
    ]
    start = time.perf_counter()
    results = await asyncio.gather(*(backend.complete(chat(i), params[i]) for i in range(n)))
    elapsed = time.perf_counter() - start

    for i, out in enumerate(results):
        assert out.text.strip(), f"request {i} got an empty answer ({out.stop_reason})"
        assert out.usage.input_tokens > 20
        assert out.usage.output_tokens > 0
        assert out.stop_reason in ("stop", "length")
        if params[i].choices:
            assert out.text in ACTIONS, out.text
    stats = backend.stats
    assert stats.requests >= n
    assert stats.max_batch_size > 1, f"nothing was batched: {stats}"
    assert stats.batches - before < n  # fewer engine calls than requests

    tokens = sum(r.usage.output_tokens for r in results)
    print(f"\nvllm engine, {model}: {n} concurrent completions in {elapsed:.2f}s: "
          f"{n / elapsed:.1f} completions/s, {tokens / elapsed:.0f} output tokens/s; "
          f"{stats.batches - before} batches, largest {stats.max_batch_size}")


@needs_gpu
async def test_too_long_prompt_fails_only_its_own_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model, why_not = _test_model()
    if model is None:
        pytest.skip(why_not)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    backend = create_backend(ClientConfig(client_name="vllm", model_id=model))
    huge = [ChatMessage("user", "word " * 20_000)]  # beyond MORIA_VLLM_MAX_MODEL_LEN (8192)
    outcomes = await asyncio.gather(
        backend.complete(chat(1), GenerateParams(max_tokens=8, choices=ACTIONS)),
        backend.complete(huge, GenerateParams(max_tokens=8)),
        backend.complete(chat(2), GenerateParams(max_tokens=8, choices=ACTIONS)),
        return_exceptions=True,
    )
    assert isinstance(outcomes[1], BackendError)
    for ok in (outcomes[0], outcomes[2]):
        assert not isinstance(ok, BaseException), ok
        assert ok.text in ACTIONS
