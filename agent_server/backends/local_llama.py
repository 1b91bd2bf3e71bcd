"""In-process llama.cpp backend (``llama_cpp.Llama``), the embedded default.

A model is loaded once per process per (GGUF path, n_ctx) and shared by every backend instance.
``Llama`` is not thread-safe: calls run in worker threads (``asyncio.to_thread``) and are
serialized per model by a lock. Chat prompts use the GGUF's own chat template; same-role
messages are merged into one turn only when ``client.alternate_roles`` asks
(``strict_alternation`` False), for templates that need strictly alternating turns.

KV-cache reuse (exact prefix reuse only). Each llama.cpp context keeps its KV state between
calls; a call evaluates only the prompt tokens after the longest common token prefix with what
the context holds (llama-cpp-python's own prefix match), so consecutive turns of one episode
cost only their new tokens while the history grows. Under a sliding history window (BALROG's
16 steps) the oldest past step leaves the prompt once the window is full, so from then on
only the tokens before the first changed message (the instruction) can be reused; nothing is
shifted or approximated. ``client.local_contexts`` > 1 keeps several contexts of the model,
chosen per call by the tokens they hold (``choose_context``): the one holding this
conversation's history (the longest common prefix covering its first two messages), else one
holding its instruction that the previous call did not use, else an empty or new context while
fewer than the limit exist, else the least recently used one. So the seats of a multi-agent
game, or interleaved episodes with as many contexts as episodes in flight, stop evicting each
other's prefix.

Accounting: every completion reports ``input_tokens`` = all prompt tokens and
``cached_input_tokens`` = those whose KV state was reused from the context, read from
llama.cpp's state at the moment the prompt is evaluated (the context's token count when its
first decode of the call starts), never estimated; ``input_tokens - cached_input_tokens``
tokens were evaluated.

Speed and determinism: the sampler is seeded per call (``extra["seed"]``, default 0). Reusing a
prefix evaluates the same tokens in different batches, which can change the last bits of the
logits; ``extra["cache_prompt"] = False`` re-evaluates every prompt from scratch for bit-exact
repeatability (its ``cached_input_tokens`` is 0). An optional RAM cache of saved states
(``$MORIA_LLAMA_CACHE_MB``) can restore an evicted prefix, at a cost.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import inspect
import logging
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

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
from agent_server.backends.models import (
    TEXT_ONLY_REASON,
    check_model_name,
    resolve_model_path,
)
from moria.config import ClientConfig

if TYPE_CHECKING:
    from llama_cpp import Llama
    from llama_cpp.llama_grammar import LlamaGrammar

log = logging.getLogger(__name__)

DEFAULT_N_CTX = 8192


#: Token ids: a list, or a 1-D integer array (``Llama._input_ids``).
Tokens = Sequence[int] | np.ndarray


def common_prefix(held: Tokens, prompt: Tokens) -> int:
    """Length (tokens) of the longest common prefix of two token-id sequences (lists or 1-D
    integer arrays); 0 when either is empty."""
    n = min(len(held), len(prompt))
    if n == 0:
        return 0
    differ = np.flatnonzero(np.asarray(held[:n]) != np.asarray(prompt[:n]))
    return int(differ[0]) if differ.size else n


def choose_context(
    held: Sequence[Tokens],
    last_used: Sequence[int],
    prompt: Tokens,
    opening: int,
    anchor: int,
    limit: int,
) -> int | None:
    """Which llama.cpp context should serve ``prompt``: an index into ``held``, or None for
    "create a new context".

    Args:
        held: per existing context, the token ids its KV cache holds.
        last_used: per existing context, a counter value of its last use (larger = later).
        prompt: the prompt's token ids.
        opening: how many leading tokens of ``prompt`` belong to its first message (the
            instruction of a seat or episode).
        anchor: how many leading tokens belong to its first two messages (the instruction and
            the oldest remembered observation); ``anchor >= opening``.
        limit: the most contexts there may be (``client.local_contexts``).

    The order of preference:

    1. the context sharing at least ``anchor`` tokens (this conversation's history), the one
       sharing the longest prefix;
    2. a context holding the instruction (least recently used first), except the one the
       previous call used: with the history window full, or at an episode's first turn, the
       prompt shares only its instruction with any context, and the previous call's context
       most likely belongs to another conversation still in flight;
    3. an empty context; else None while fewer than ``limit`` contexts exist; else the least
       recently used context.
    """
    if not held:
        return None
    order = sorted(range(len(held)), key=lambda i: last_used[i])  # least recent first
    shared = {i: common_prefix(held[i], prompt) for i in order}
    best = max(order, key=lambda i: shared[i])  # max keeps the first (least recent) of ties
    if shared[best] > 0 and shared[best] >= anchor:
        return best
    previous = order[-1]
    holders = [i for i in order if i != previous and shared[i] > 0 and shared[i] >= opening]
    if holders:
        return holders[0]
    empty = [i for i in order if len(held[i]) == 0]
    if empty:
        return empty[0]
    if len(held) < limit:
        return None
    return order[0]


@dataclass
class _Loaded:
    """One model: its llama.cpp contexts (each with its own KV cache) and the lock that lets
    one call at a time run on it (generation is CPU-bound: parallel calls on one machine only
    fight over the cores). ``last_used[i]`` is the call counter at context ``i``'s last use.
    ``formatter`` renders chats with the GGUF's template (None when the model has none): the
    contexts answer through it, and ``prompt_tokens`` tokenizes with it, so context choice sees
    exactly the tokens llama.cpp will evaluate."""

    path: Path
    n_ctx: int
    n_threads: int
    lock: threading.Lock
    contexts: list[Llama] = field(default_factory=list)
    last_used: list[int] = field(default_factory=list)
    calls: int = 0
    formatter: Any = None

    @property
    def llm(self) -> Llama:
        """The first context (loaded with the model)."""
        return self.contexts[0]

    def prompt_tokens(self, wire: list[Any]) -> list[int] | None:
        """The token ids the chat handler will evaluate for ``wire`` (role/content dicts), or
        None without a GGUF chat template."""
        if self.formatter is None or not wire:
            return None
        rendered = self.formatter(messages=wire)
        return list(self.llm.tokenize(rendered.prompt.encode("utf-8"),
                                      add_bos=not rendered.added_special, special=True))

    def context_for(self, wire: list[Any], limit: int) -> Llama:
        """The context to serve chat ``wire`` (see ``choose_context``), created when chosen so.
        With ``limit`` 1 (the default) this is the one context, without tokenizing; without a
        GGUF chat template (no tokens to compare) the most recently used one. Call with
        ``lock`` held. Raises ``BackendError`` (a new context fails to load)."""
        self.calls += 1
        if len(self.last_used) < len(self.contexts):
            self.last_used += [0] * (len(self.contexts) - len(self.last_used))
        index: int | None = 0
        if limit > 1 and self.formatter is None:  # no tokens to compare: the latest context
            index = max(range(len(self.contexts)), key=lambda i: self.last_used[i])
        elif limit > 1:
            prompt = self.prompt_tokens(wire) or []
            opening, anchor = (common_prefix(self.prompt_tokens(wire[:n]) or [], prompt)
                               for n in (1, 2))
            held = [llm._input_ids for llm in self.contexts]
            index = choose_context(held, self.last_used, prompt, opening,
                                   max(anchor, opening), limit)
        if index is None:
            self.contexts.append(_new_llama(self.path, self.n_ctx, self.n_threads,
                                             self.formatter))
            self.last_used.append(0)
            index = len(self.contexts) - 1
        self.last_used[index] = self.calls
        return self.contexts[index]


_models: dict[tuple[str, int], _Loaded] = {}
_models_lock = threading.Lock()


@functools.cache
def _llama_class() -> type[Llama]:
    """``llama_cpp.Llama`` extended to record how each call's prompt split between reused KV
    state and evaluated tokens. Raises ``BackendError`` when llama-cpp-python is missing."""
    try:
        from llama_cpp import Llama
    except ImportError as exc:
        raise BackendError(
            "the local backend needs llama-cpp-python (build it with "
            'CMAKE_ARGS="-DGGML_NATIVE=OFF")',
            provider="local",
        ) from exc

    class AccountedLlama(Llama):
        """``prompt_split``: (tokens reused, tokens evaluated) of the current call's prompt,
        recorded by its first decode (the prompt's; later ones decode sampled tokens); set it
        to None before a call."""

        prompt_split: tuple[int, int] | None = None

        def eval(self, tokens: Sequence[int]) -> None:
            if self.prompt_split is None:
                # llama-cpp-python has just cut the context to the reused prefix: n_tokens
                # tokens keep their KV state, ``tokens`` are evaluated now.
                self.prompt_split = (int(self.n_tokens), len(tokens))
            super().eval(tokens)

    return AccountedLlama


def _chat_formatter(llm: Any) -> Any:
    """A ``Jinja2ChatFormatter`` for the GGUF's own chat template, built as llama-cpp-python
    builds its default one, or None when the model uses another chat format."""
    template = llm.metadata.get("tokenizer.chat_template")
    if not template or llm.chat_handler is not None or llm.chat_format != "chat_template.default":
        return None
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    eos, bos = llm.token_eos(), llm.token_bos()
    return Jinja2ChatFormatter(
        template=template,
        eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
        bos_token=llm._model.token_get_text(bos) if bos != -1 else "",
        stop_token_ids=[eos],
    )


def _new_llama(path: Path, n_ctx: int, n_threads: int, formatter: Any = None) -> Llama:
    """A new llama.cpp context for ``path`` (weights are memory-mapped, so extra contexts of
    one model share them); it answers chats through ``formatter`` when given. Raises
    ``BackendError``."""
    cls = _llama_class()
    start = time.perf_counter()
    try:
        llm = cls(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, verbose=False)
    except (ValueError, RuntimeError, OSError) as exc:
        raise BackendError(f"cannot load local model {path}: {exc}", provider="local") from exc
    if formatter is not None:
        llm.chat_handler = formatter.to_chat_handler()
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
        formatter = _chat_formatter(llm)
        if formatter is not None:
            llm.chat_handler = formatter.to_chat_handler()
        if not _models:
            atexit.register(unload_all)  # free before interpreter teardown (no noisy __del__)
        loaded = _models[key] = _Loaded(path, n_ctx, n_threads, threading.Lock(), [llm], [0],
                                        formatter=formatter)
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
        ``latency_s`` includes waiting for the model lock. Raises ``BackendError`` (images given:
        no local model reads them, ``models.TEXT_ONLY_REASON``; prompt longer than n_ctx, model
        missing or failing to load).
        """
        if any(m.images for m in messages):
            raise BackendError(
                f"local model {self.model_name!r} takes no images: {TEXT_ONLY_REASON}; set "
                "agent.max_image_history=0",
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
            llm: Any = loaded.context_for(wire, self._client_cfg.local_contexts)
            if not cache_prompt:
                llm.reset()
            llm.prompt_split = None
            try:
                response: Any = llm.create_chat_completion(
                    messages=wire, max_tokens=params.max_tokens, seed=seed, **kwargs
                )
            except ValueError as exc:  # e.g. "Requested tokens (...) exceed context window"
                raise BackendError(f"local: {exc}", provider=self.name) from exc
            except RuntimeError as exc:
                raise BackendError(f"local: llama.cpp failed: {exc}", provider=self.name) from exc
            split = llm.prompt_split
        choice = (response.get("choices") or [{}])[0]
        usage = response.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens", 0))
        reused = split[0] if split is not None else 0
        if split is not None and sum(split) != prompt_tokens:
            log.warning("local: prompt of %d tokens split as %d reused + %d evaluated",
                        prompt_tokens, *split)
        return Completion(
            text=(choice.get("message") or {}).get("content") or "",
            usage=TokenUsage(
                input_tokens=prompt_tokens,
                output_tokens=int(usage.get("completion_tokens", 0)),
                cached_input_tokens=min(reused, prompt_tokens),
            ),
            stop_reason=choice.get("finish_reason") or "",
        )
