"""In-process llama.cpp backend (``llama_cpp.Llama``), the embedded default.

A model is loaded once per process per (GGUF path, n_ctx) and shared by every backend instance.
``Llama`` is not thread-safe: calls run in worker threads (``asyncio.to_thread``) and are
serialized per model by a lock. ``client.local_contexts`` > 1 keeps several llama.cpp contexts
of the model, one per distinct first prompt message (each seat of a multi-agent game has its
own instruction), so alternating seats stop evicting each other's KV-cache prefix. Chat
prompts use the GGUF's own chat template; same-role messages are merged into one turn only when
``client.alternate_roles`` asks (``strict_alternation`` False), for templates that need strictly
alternating turns.

Speed and determinism: the sampler is seeded per call (``extra["seed"]``, default 0). By default
the model's KV cache is kept between calls and llama.cpp evaluates only the tokens after the
longest common prefix with the previous prompt, so consecutive turns of one episode cost only
their new tokens. Interleaved episodes (``eval.num_workers > 1``) break that reuse; an optional
RAM cache of saved states (``$MORIA_LLAMA_CACHE_MB``) can bring it back at a cost. Reusing a
prefix evaluates the same tokens in different batches, which can change the last bits of the
logits; ``extra["cache_prompt"] = False`` re-evaluates every prompt from
scratch for bit-exact repeatability, at several seconds per turn on 2 cores.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import hashlib
import inspect
import logging
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_server.backends.base import (
    Backend,
    BackendError,
    ChatMessage,
    Completion,
    GenerateParams,
    TokenUsage,
    choices_gbnf,
    merge_consecutive_roles,
)
from agent_server.backends.models import check_model_name, resolve_model_path
from moria.config import ClientConfig

if TYPE_CHECKING:
    from llama_cpp import Llama
    from llama_cpp.llama_grammar import LlamaGrammar

log = logging.getLogger(__name__)

DEFAULT_N_CTX = 8192


@dataclass
class _Loaded:
    """One model: its llama.cpp contexts (each with its own KV cache) and the lock that lets
    one call at a time run on it (generation is CPU-bound: parallel calls on one machine only
    fight over the cores). ``owners`` maps a prompt's first message (its sha256) to the context
    that last served it, most recent last."""

    path: Path
    n_ctx: int
    n_threads: int
    lock: threading.Lock
    contexts: list[Llama] = field(default_factory=list)
    owners: OrderedDict[str, int] = field(default_factory=OrderedDict)

    @property
    def llm(self) -> Llama:
        """The first context (loaded with the model)."""
        return self.contexts[0]

    def context_for(self, first_message: str, limit: int) -> Llama:
        """The context for a prompt opening with ``first_message``: the one that served the
        same opening last, else a new one while fewer than ``limit`` exist, else the least
        recently used one. Each seat or task of a run opens its prompts with its own
        instruction, so with enough contexts each keeps its KV-cache prefix across turns
        instead of evicting the others'. Call with ``lock`` held. Raises ``BackendError``."""
        key = hashlib.sha256(first_message.encode()).hexdigest()
        index = self.owners.get(key)
        if index is None:
            if len(self.contexts) < limit:
                self.contexts.append(_new_llama(self.path, self.n_ctx, self.n_threads))
                index = len(self.contexts) - 1
            else:
                used = list(self.owners.values())
                idle = [i for i in range(len(self.contexts)) if i not in used]
                index = idle[0] if idle else used[0]  # oldest owner's context
            for other in [k for k, i in self.owners.items() if i == index]:
                del self.owners[other]
        self.owners[key] = index
        self.owners.move_to_end(key)
        return self.contexts[index]


_models: dict[tuple[str, int], _Loaded] = {}
_models_lock = threading.Lock()


def _new_llama(path: Path, n_ctx: int, n_threads: int) -> Llama:
    """A new llama.cpp context for ``path`` (weights are memory-mapped, so extra contexts of
    one model share them). Raises ``BackendError``."""
    try:
        from llama_cpp import Llama
    except ImportError as exc:
        raise BackendError(
            "the local backend needs llama-cpp-python (build it with "
            'CMAKE_ARGS="-DGGML_NATIVE=OFF")',
            provider="local",
        ) from exc
    start = time.perf_counter()
    try:
        llm = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, verbose=False)
    except (ValueError, RuntimeError, OSError) as exc:
        raise BackendError(f"cannot load local model {path}: {exc}", provider="local") from exc
    _attach_prompt_cache(llm)
    log.info(
        "loaded %s (n_ctx=%d, %d threads) in %.2fs",
        path.name,
        n_ctx,
        n_threads,
        time.perf_counter() - start,
    )
    return llm


def _load(path: Path, n_ctx: int, n_threads: int) -> _Loaded:
    """The shared model for (path, n_ctx), loading it on first use. Raises ``BackendError``."""
    key = (str(path), n_ctx)
    with _models_lock:
        loaded = _models.get(key)
        if loaded is not None:
            return loaded
        llm = _new_llama(path, n_ctx, n_threads)
        if not _models:
            atexit.register(unload_all)  # free before interpreter teardown (no noisy __del__)
        loaded = _models[key] = _Loaded(path, n_ctx, n_threads, threading.Lock(), [llm])
        return loaded


def prompt_cache_bytes() -> int:
    """Size of the in-RAM prompt-state cache: ``$MORIA_LLAMA_CACHE_MB`` (default 0: off).

    Measured with Qwen 0.5B on 2 cores: restoring a saved state takes about 1.9 s (its large
    vocabulary makes llama-cpp-python's saved logits big), more than re-evaluating a short
    prompt, so the cache only pays off for very long shared prefixes."""
    env = os.environ.get("MORIA_LLAMA_CACHE_MB", "").strip()
    megabytes = int(env) if env.isdigit() else 0
    return megabytes * 1024 * 1024


def _attach_prompt_cache(llm: Any) -> None:
    """Keep the KV state of recent prompts in RAM, keyed by their tokens.

    Consecutive turns of one episode share a long prompt prefix (instruction + history). With
    several episodes in flight their calls interleave on the one model; without this cache each
    switch would re-evaluate the whole prompt (about 115 prompt tokens/s for Qwen 0.5B on 2
    cores). llama.cpp restores the state with the longest common prefix and evaluates only the
    rest.
    """
    capacity = prompt_cache_bytes()
    if capacity <= 0:
        return
    from llama_cpp import LlamaRAMCache

    llm.set_cache(LlamaRAMCache(capacity_bytes=capacity))


def unload_all() -> None:
    """Drop every shared model (frees memory once no call is using them)."""
    with _models_lock:
        for loaded in _models.values():
            with loaded.lock:
                for llm in loaded.contexts:
                    llm.close()
        _models.clear()


@functools.lru_cache(maxsize=256)
def choices_grammar(choices: tuple[str, ...]) -> LlamaGrammar:
    """A ``LlamaGrammar`` accepting exactly one of ``choices`` (cached per choice tuple)."""
    from llama_cpp.llama_grammar import LlamaGrammar

    return LlamaGrammar.from_string(choices_gbnf(list(choices)), verbose=False)


@functools.cache
def _sampling_keys() -> frozenset[str]:
    from llama_cpp import Llama

    skip = {"self", "messages", "stream", "grammar", "seed", "max_tokens", "temperature"}
    return frozenset(inspect.signature(Llama.create_chat_completion).parameters) - skip


def default_threads() -> int:
    """llama.cpp threads: ``$MORIA_LLAMA_THREADS`` if set (> 0), else ``os.cpu_count()``.

    On a small machine shared with other CPU-heavy processes (another llama.cpp process above
    all), fewer threads than cores avoids llama.cpp's spin-wait collapse.
    """
    env = os.environ.get("MORIA_LLAMA_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    return os.cpu_count() or 1


class LocalLlamaBackend(Backend):
    """A built-in model name or .gguf path served in-process; safe to share across episodes."""

    name = "local"

    def __init__(
        self, client: ClientConfig, *, n_ctx: int = DEFAULT_N_CTX, n_threads: int | None = None
    ):
        """Validates the model name now (raises ``BackendError`` listing built-ins when unknown);
        the file is resolved and the model loaded on first use (or ``await load()``)."""
        self._client_cfg = client
        self.model_name = check_model_name(client.model_id)
        self.n_ctx = n_ctx
        self.n_threads = n_threads or default_threads()
        self._path: Path | None = None

    def _model(self) -> _Loaded:
        if self._path is None:
            self._path = resolve_model_path(self.model_name)
        return _load(self._path, self.n_ctx, self.n_threads)

    async def load(self) -> None:
        """Resolve and load the model now (off the event loop). Raises ``BackendError``."""
        await asyncio.to_thread(self._model)

    async def complete(self, messages: list[ChatMessage], params: GenerateParams) -> Completion:
        """One chat completion with the GGUF's chat template.

        ``params.choices`` constrains the output to exactly one choice (GBNF grammar);
        ``params.extra``: ``seed`` (default 0), ``cache_prompt`` (default True: reuse the KV
        state of the longest cached prompt prefix; False re-evaluates the whole prompt) and
        llama.cpp sampling keys (top_p, top_k, min_p, stop, repeat_penalty, ...); other keys
        are ignored.
        Same-role neighbours are merged first when ``client.alternate_roles``.
        ``latency_s`` includes waiting for the model lock. Raises ``BackendError`` (images given,
        prompt longer than n_ctx, model missing or failing to load).
        """
        if any(m.images for m in messages):
            raise BackendError(
                f"local model {self.model_name!r} takes no images; set agent.max_image_history=0",
                provider=self.name,
            )
        start = time.perf_counter()
        if self._client_cfg.alternate_roles:
            messages = merge_consecutive_roles(messages)
        wire: list[Any] = [{"role": m.role, "content": m.content} for m in messages]
        result = await asyncio.to_thread(self._run, wire, params)
        result.latency_s = time.perf_counter() - start
        return result

    def _run(self, wire: list[Any], params: GenerateParams) -> Completion:
        extra = dict(params.extra)
        seed = int(extra.pop("seed", 0))
        cache_prompt = bool(extra.pop("cache_prompt", True))
        unknown = set(extra) - _sampling_keys()
        if unknown:
            log.debug("local: ignoring unsupported generation keys %s", sorted(unknown))
        kwargs: dict[str, Any] = {k: v for k, v in extra.items() if k not in unknown}
        if params.temperature is not None:
            kwargs["temperature"] = params.temperature
        if params.choices:
            kwargs["grammar"] = choices_grammar(tuple(params.choices))
        loaded = self._model()
        with loaded.lock:
            llm = loaded.context_for(str(wire[0]["content"]) if wire else "",
                                     self._client_cfg.local_contexts)
            if not cache_prompt:
                llm.reset()
            try:
                response: Any = llm.create_chat_completion(
                    messages=wire, max_tokens=params.max_tokens, seed=seed, **kwargs
                )
            except ValueError as exc:  # e.g. "Requested tokens (...) exceed context window"
                raise BackendError(f"local: {exc}", provider=self.name) from exc
            except RuntimeError as exc:
                raise BackendError(f"local: llama.cpp failed: {exc}", provider=self.name) from exc
        choice = (response.get("choices") or [{}])[0]
        usage = response.get("usage") or {}
        return Completion(
            text=(choice.get("message") or {}).get("content") or "",
            usage=TokenUsage(
                input_tokens=int(usage.get("prompt_tokens", 0)),
                output_tokens=int(usage.get("completion_tokens", 0)),
            ),
            stop_reason=choice.get("finish_reason") or "",
        )
