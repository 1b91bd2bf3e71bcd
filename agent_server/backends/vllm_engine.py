"""vLLM's offline engine (``vllm.LLM``) in the agent server process, batched across episodes.

``client_name: vllm`` without a ``base_url`` runs ``client.model_id`` (a Hugging Face model id
or a local model folder) on this machine's GPU. Concurrent ``complete`` calls from all episodes
in flight are collected by a ``Batcher`` (``batching.py``) and generated together in one
``llm.chat(conversations, sampling_params=[...], use_tqdm=False)`` call, in the batcher's one
worker thread, which also creates the engine on first use (``import vllm`` happens there).

One engine per (model, engine settings) per process, shared by every backend instance.
Engine settings come from environment variables of the agent server:

- ``MORIA_VLLM_GPU_MEMORY_UTILIZATION``: fraction of GPU memory vLLM may take (default 0.85);
- ``MORIA_VLLM_MAX_MODEL_LEN``: context length in tokens (default 8192);
- ``MORIA_VLLM_MAX_BATCH``: most requests per ``llm.chat`` call (default 256).

Per call: ``temperature``, ``max_tokens``, and from ``params.extra`` ``seed``, ``top_p``,
``top_k``, ``min_p``, ``stop`` and other ``SamplingParams`` keys (``SAMPLING_KEYS``); the model's
own ``generation_config`` defaults apply underneath, as in vLLM's server. ``params.choices``
constrains the output to one of the strings through vLLM's structured outputs
(``StructuredOutputsParams(choice=...)``, or ``GuidedDecodingParams`` on older releases). Images
are sent as OpenAI-style ``image_url`` PNG data URL parts, which ``llm.chat`` accepts for
multimodal models. Same-role messages are merged into one turn only when
``client.alternate_roles`` asks (``strict_alternation`` False: the model's chat template
decides what it accepts).

vLLM releases 0.8 to 0.10.1 refuse to create an engine outside the main thread; use vLLM 0.10.2
or later (or a vLLM server through ``client.base_url``).
"""

from __future__ import annotations

import atexit
import importlib.util
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from agent_server.backends.base import (
    STOP_EMPTY,
    STOP_OTHER,
    Backend,
    BackendError,
    ChatMessage,
    Completion,
    GenerateParams,
    TokenUsage,
    merge_consecutive_roles,
)
from agent_server.backends.batching import Batcher, BatcherClosed, BatchStats
from agent_server.backends.openai_compat import normalise_finish, to_openai_messages
from moria.config import ClientConfig

log = logging.getLogger(__name__)

PROVIDER = "vllm"
UNAVAILABLE = (
    "the vllm engine needs the vllm package and a GPU; set client.base_url to use a vLLM "
    "server instead"
)

ENV_GPU_MEMORY_UTILIZATION = "MORIA_VLLM_GPU_MEMORY_UTILIZATION"
ENV_MAX_MODEL_LEN = "MORIA_VLLM_MAX_MODEL_LEN"
ENV_MAX_BATCH = "MORIA_VLLM_MAX_BATCH"
DEFAULT_GPU_MEMORY_UTILIZATION = 0.85
DEFAULT_MAX_MODEL_LEN = 8192
DEFAULT_MAX_BATCH = 256
#: Seconds the batcher keeps collecting after the first request of a batch.
MAX_WAIT_S = 0.005

#: ``params.extra`` keys passed to ``SamplingParams``; other keys are ignored (logged).
SAMPLING_KEYS = frozenset({
    "seed", "top_p", "top_k", "min_p", "stop", "stop_token_ids", "presence_penalty",
    "frequency_penalty", "repetition_penalty", "min_tokens", "ignore_eos", "bad_words",
    "logit_bias", "include_stop_str_in_output", "skip_special_tokens",
})


@dataclass(frozen=True)
class EngineSettings:
    """What identifies one shared engine: model and engine options."""

    model: str
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION
    max_model_len: int = DEFAULT_MAX_MODEL_LEN
    max_batch: int = DEFAULT_MAX_BATCH

    @classmethod
    def from_env(cls, model: str) -> EngineSettings:
        """Settings for ``model`` from the ``MORIA_VLLM_*`` variables. Raises ``BackendError``
        naming the variable when a value is not a number in range."""
        return cls(
            model=model,
            gpu_memory_utilization=_env_number(
                ENV_GPU_MEMORY_UTILIZATION, DEFAULT_GPU_MEMORY_UTILIZATION, float, 0.01, 1.0
            ),
            max_model_len=int(_env_number(ENV_MAX_MODEL_LEN, DEFAULT_MAX_MODEL_LEN, int, 16)),
            max_batch=int(_env_number(ENV_MAX_BATCH, DEFAULT_MAX_BATCH, int, 1)),
        )


def _env_number(name: str, default: float, kind: type, low: float,
                high: float | None = None) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or value < low or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise BackendError(f"{name}={raw!r}: expected a number {bounds}", provider=PROVIDER)
    return float(value)


def unavailable_reason() -> str | None:
    """Why the engine cannot run here (no vllm package, or torch sees no CUDA device), or None
    when it can. Imports torch when present (seconds)."""
    if importlib.util.find_spec("vllm") is None:
        return "the vllm package is not installed"
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


def completion_from(output: Any) -> Completion:
    """One vLLM ``RequestOutput`` -> ``Completion`` (latency is set by the caller).

    Usage: prompt tokens = ``len(output.prompt_token_ids)``, output tokens =
    ``len(output.outputs[0].token_ids)``, cached = ``output.num_cached_tokens`` when reported.
    A request output without completions is returned as an empty ``STOP_EMPTY`` completion.
    """
    prompt_ids = getattr(output, "prompt_token_ids", None) or []
    cached = int(getattr(output, "num_cached_tokens", 0) or 0)
    outputs = getattr(output, "outputs", None) or []
    if not outputs:
        return Completion(
            text="", usage=TokenUsage(input_tokens=len(prompt_ids), cached_input_tokens=cached),
            stop_reason=STOP_EMPTY,
        )
    first = outputs[0]
    return Completion(
        text=first.text or "",
        usage=TokenUsage(
            input_tokens=len(prompt_ids),
            output_tokens=len(first.token_ids or []),
            cached_input_tokens=cached,
        ),
        stop_reason=normalise_finish(first.finish_reason) or f"{STOP_OTHER}:none",
    )


def _choice_constraint(choices: list[str]) -> dict[str, Any]:
    """``SamplingParams`` keyword for a choice constraint, in the installed vLLM's spelling."""
    try:
        from vllm.sampling_params import StructuredOutputsParams

        return {"structured_outputs": StructuredOutputsParams(choice=list(choices))}
    except ImportError:
        from vllm.sampling_params import GuidedDecodingParams

        return {"guided_decoding": GuidedDecodingParams(choice=list(choices))}


@dataclass
class _Request:
    conversation: list[dict[str, Any]]
    params: GenerateParams


#: A request's outcome: its completion, or the error for it alone.
_Outcome = Completion | BackendError


class _Engine:
    """One ``vllm.LLM`` and the batcher feeding it. The LLM is created in the worker thread."""

    def __init__(self, settings: EngineSettings):
        self.settings = settings
        self.llm: Any = None
        self._defaults: dict[str, Any] = {}
        self._load_error: BackendError | None = None
        self.batcher: Batcher[_Request, _Outcome] = Batcher(
            self._generate_batch, max_batch=settings.max_batch, max_wait_s=MAX_WAIT_S,
            name=f"vllm:{settings.model}",
        )

    def _load(self) -> Any:
        """The engine, created on first use (worker thread). Raises ``BackendError``."""
        if self.llm is not None:
            return self.llm
        if self._load_error is not None:
            raise self._load_error
        try:
            self.llm = self._create()
        except BackendError as exc:
            self._load_error = exc
            raise
        return self.llm

    def _create(self) -> Any:
        reason = unavailable_reason()
        if reason is not None:
            raise BackendError(f"{UNAVAILABLE} ({reason})", provider=PROVIDER)
        try:
            import vllm
        except ImportError as exc:
            raise BackendError(f"{UNAVAILABLE} ({exc})", provider=PROVIDER) from exc
        s = self.settings
        start = time.perf_counter()
        try:
            llm = vllm.LLM(
                model=s.model, gpu_memory_utilization=s.gpu_memory_utilization,
                max_model_len=s.max_model_len,
            )
        except Exception as exc:  # any failure to build the engine ends every call for it
            hint = ""
            if "main thread" in str(exc):
                hint = " (this vLLM release needs its engine in the main thread: use vllm>=0.10.2)"
            raise BackendError(
                f"{PROVIDER}: cannot start the engine for {s.model!r}: "
                f"{type(exc).__name__}: {exc}{hint}",
                provider=PROVIDER,
            ) from exc
        self._defaults = _generation_defaults(llm)
        log.info("vllm: engine for %s ready in %.1fs (gpu_memory_utilization=%.2f, "
                 "max_model_len=%d)", s.model, time.perf_counter() - start,
                 s.gpu_memory_utilization, s.max_model_len)
        return llm

    def sampling_params(self, params: GenerateParams) -> Any:
        """``vllm.SamplingParams`` for one call: the model's defaults, then ``params``.
        Raises ``BackendError`` for values vLLM refuses."""
        from vllm import SamplingParams

        kwargs = dict(self._defaults)
        unknown = sorted(set(params.extra) - SAMPLING_KEYS)
        if unknown:
            log.debug("vllm: ignoring unsupported generation keys %s", unknown)
        kwargs.update({k: v for k, v in params.extra.items() if k in SAMPLING_KEYS})
        if params.temperature is not None:
            kwargs["temperature"] = params.temperature
        kwargs["max_tokens"] = params.max_tokens
        if params.choices:
            kwargs.update(_choice_constraint(params.choices))
        try:
            return SamplingParams(**kwargs)
        except (TypeError, ValueError) as exc:
            raise BackendError(f"{PROVIDER}: bad generation settings: {exc}",
                               provider=PROVIDER) from exc

    def _generate_batch(self, requests: list[_Request]) -> list[_Outcome]:
        """Worker thread: one ``llm.chat`` for the batch. A request whose settings are refused
        gets its own error; when the whole call fails, each request is tried alone so that one
        bad request (say, a prompt longer than max_model_len) fails only itself."""
        llm = self._load()
        outcomes: list[_Outcome | None] = [None] * len(requests)
        ready: list[tuple[int, list[dict[str, Any]], Any]] = []
        for i, req in enumerate(requests):
            try:
                ready.append((i, req.conversation, self.sampling_params(req.params)))
            except BackendError as exc:
                outcomes[i] = exc
        if ready:
            results: list[_Outcome]
            try:
                results = self._chat(llm, ready)
            except BackendError as whole:
                if len(ready) == 1:
                    results = [whole]
                else:
                    results = []
                    for item in ready:
                        try:
                            results.extend(self._chat(llm, [item]))
                        except BackendError as exc:
                            results.append(exc)
            for (i, _, _), result in zip(ready, results, strict=True):
                outcomes[i] = result
        return [o if o is not None else BackendError("vllm: no result", provider=PROVIDER)
                for o in outcomes]

    def _chat(self, llm: Any, items: list[tuple[int, list[dict[str, Any]], Any]]
              ) -> list[_Outcome]:
        try:
            outputs = llm.chat(
                [conv for _, conv, _ in items],
                sampling_params=[sp for _, _, sp in items],
                use_tqdm=False,
            )
        except Exception as exc:  # vLLM raises ValueError/RuntimeError/... per bad input
            raise BackendError(f"{PROVIDER}: {type(exc).__name__}: {exc}",
                               provider=PROVIDER) from exc
        if len(outputs) != len(items):
            raise BackendError(
                f"{PROVIDER}: engine returned {len(outputs)} outputs for {len(items)} requests",
                provider=PROVIDER,
            )
        return [completion_from(out) for out in outputs]

    def close(self) -> None:
        self.batcher.close()
        self.llm = None


def _generation_defaults(llm: Any) -> dict[str, Any]:
    """The model's ``generation_config`` sampling defaults as ``SamplingParams`` keywords
    (empty when this vLLM release does not expose them)."""
    try:
        diff = llm.llm_engine.model_config.get_diff_sampling_param()
    except (AttributeError, TypeError, ValueError):
        return {}
    return {k: v for k, v in dict(diff or {}).items() if k != "max_tokens"}


_engines: dict[EngineSettings, _Engine] = {}
_engines_lock = threading.Lock()


def shared_engine(settings: EngineSettings) -> _Engine:
    """The process-wide engine for ``settings`` (its model is loaded on first use)."""
    with _engines_lock:
        engine = _engines.get(settings)
        if engine is None:
            if not _engines:
                atexit.register(shutdown_engines)
            engine = _engines[settings] = _Engine(settings)
        return engine


def shutdown_engines() -> None:
    """Close every shared engine: waiting calls fail with ``BackendError``; the models are
    released once their current batch ends."""
    with _engines_lock:
        engines = list(_engines.values())
        _engines.clear()
    for engine in engines:
        engine.close()


class VLLMEngineBackend(Backend):
    """``client.model_id`` on vLLM's in-process engine; instances share one engine per model."""

    name = PROVIDER

    def __init__(self, client: ClientConfig):
        """Raises ``BackendError`` when the vllm package is not installed (the GPU itself is
        checked when the engine starts), when ``client.model_id`` is missing, or when a
        ``MORIA_VLLM_*`` variable is invalid. No model is loaded here."""
        if importlib.util.find_spec("vllm") is None:
            raise BackendError(f"{UNAVAILABLE} (the vllm package is not installed)",
                               provider=PROVIDER)
        if not client.model_id:
            raise BackendError(f"{PROVIDER}: client.model_id is required (a Hugging Face "
                               "model id or a local model folder)", provider=PROVIDER)
        self._client_cfg = client
        self.settings = EngineSettings.from_env(client.model_id)
        self._engine = shared_engine(self.settings)

    @property
    def stats(self) -> BatchStats:
        """Batching counters of the shared engine (batches, requests, max batch size)."""
        return self._engine.batcher.stats

    async def load(self) -> None:
        """Create the engine now (in its worker thread). Raises ``BackendError``."""
        await self.complete([ChatMessage("user", "Hi")], GenerateParams(max_tokens=1))

    async def complete(self, messages: list[ChatMessage], params: GenerateParams) -> Completion:
        """One chat completion, generated in a batch with the other calls in flight.

        ``latency_s`` includes the wait for the batch. Raises ``BackendError``: engine
        unavailable (no vllm or no GPU: ``UNAVAILABLE``), engine failed to start, settings or
        prompt refused for this request (for example longer than max_model_len), engine shut
        down. Not retried: engine errors are not transient.
        """
        start = time.perf_counter()
        if self._client_cfg.alternate_roles:
            messages = merge_consecutive_roles(messages)
        request = _Request(to_openai_messages(messages), params)
        try:
            outcome = await self._engine.batcher.submit(request)
        except BackendError:
            raise
        except BatcherClosed as exc:
            raise BackendError(f"{PROVIDER}: the engine was shut down", provider=PROVIDER) from exc
        except Exception as exc:
            raise BackendError(f"{PROVIDER}: {type(exc).__name__}: {exc}",
                               provider=PROVIDER) from exc
        if isinstance(outcome, BackendError):
            raise outcome
        outcome.latency_s = time.perf_counter() - start
        return outcome

    async def aclose(self) -> None:
        """Nothing per instance: the engine is shared by the process (``shutdown_engines``)."""
