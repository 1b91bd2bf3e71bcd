"""Model backends: the registry from ``client.client_name`` to a backend factory.

``create_backend(client)`` builds the backend for a ``ClientConfig``; ``missing_api_key(client)``
and ``image_input_problem(client, max_image_history)`` are the preflight checks run before any
episode starts (``client_problems`` runs both), and ``probe_endpoint(client)`` asks a remote
endpoint once (unreachable, bad key). Provider SDKs and llama.cpp are imported only
when their backend is built.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from agent_server.backends.base import (
    Backend,
    BackendError,
    ChatMessage,
    Completion,
    GenerateParams,
    TokenUsage,
)
from moria.backends import BACKENDS as BACKEND_RECORDS
from moria.config import API_KEY_ENV, DEFAULT_BASE_URL, ClientConfig

__all__ = [
    "FACTORIES",
    "IMAGE_INPUT",
    "Backend",
    "BackendError",
    "ChatMessage",
    "Completion",
    "GenerateParams",
    "TokenUsage",
    "api_key_for",
    "client_problems",
    "create_backend",
    "default_params",
    "image_input_problem",
    "missing_api_key",
    "probe_endpoint",
    "takes_images",
]

#: API key placeholder for servers that take none (vLLM, llama.cpp server).
NO_KEY = "EMPTY"

BackendFactory = Callable[[ClientConfig], Backend]


def api_key_for(client: ClientConfig) -> tuple[str | None, str | None]:
    """``(key, env_var)``: the first non-empty key among ``API_KEY_ENV[client_name]`` and the
    variable it came from; ``(None, first_var)`` when none is set; ``(None, None)`` for clients
    that take no key."""
    names = API_KEY_ENV.get(client.client_name, ())
    for name in names:
        value = os.environ.get(name, "").strip()
        if value:
            return value, name
    return None, (names[0] if names else None)


def missing_api_key(client: ClientConfig) -> str | None:
    """A message naming the environment variable(s) to set when ``client`` needs an API key that
    is not set (or empty); None when no key is needed or it is present. Never includes a key."""
    names = API_KEY_ENV.get(client.client_name, ())
    key, _ = api_key_for(client)
    if not names or key:
        return None
    wanted = " or ".join(names)
    return (
        f"client '{client.client_name}' needs an API key: set the environment variable {wanted} "
        "on the agent server"
    )


#: Whether each client's backend can take images (``ChatMessage.images``): False = never (the
#: embedded llama.cpp model reads text only, whatever its GGUF); None = it depends on the model
#: served (a hosted vision model, a vLLM or llama.cpp server with a multimodal model), which
#: only the provider can tell. ``takes_images`` refines this per client config. From the
#: records of ``moria.backends``.
IMAGE_INPUT: dict[str, bool | None] = {r.name: r.image_input for r in BACKEND_RECORDS}


def takes_images(client: ClientConfig) -> bool | None:
    """Whether ``client``'s backend can take images: False for the clients that run one of
    Moria's own GGUFs on llama.cpp (``models.py``: a built-in name or a ``.gguf`` path, loaded
    with no vision projector), i.e. ``local`` always and ``llamacpp`` without a ``base_url``
    (the ``llama_cpp.server`` child Moria starts); else ``IMAGE_INPUT`` (None: up to the model
    the endpoint serves)."""
    if client.client_name == "llamacpp" and not client.base_url:
        return False
    return IMAGE_INPUT.get(client.client_name)


def image_input_problem(client: ClientConfig, max_image_history: int) -> str | None:
    """A message when ``agent.max_image_history`` > 0 would send the env's frames to a client
    that takes no images (``takes_images`` False): the model, why it reads text only
    (``models.TEXT_ONLY_REASON``) and what to use instead; None when no frames are sent or the
    client may take them. Checked by the policy server's ``GetInfo`` (``check_agent``) and by
    every model-calling strategy's ``Begin``, so a run stops at its preflight."""
    if max_image_history <= 0 or takes_images(client) is not False:
        return None
    from agent_server.backends.models import DEFAULT_MODEL, TEXT_ONLY_REASON

    model = client.model_id or DEFAULT_MODEL
    how = ("the llama.cpp server Moria starts when client.base_url is unset"
           if client.client_name == "llamacpp" else "the embedded llama.cpp")
    return (
        f"client '{client.client_name}' model {model!r} takes no images (text only, run by "
        f"{how}), but agent.max_image_history={max_image_history} sends it the env's frames: "
        f"{TEXT_ONLY_REASON}. Use a vision-capable client and model (openai with gpt-4o, "
        "anthropic, gemini, openrouter, or a vllm or llamacpp server at client.base_url that "
        "serves a vision model) or agent.max_image_history=0 to play from text only"
    )


def client_problems(client: ClientConfig, *, max_image_history: int = 0) -> list[str]:
    """Everything wrong with ``client`` for a model-calling player that shows itself before
    any call: a missing API key (``missing_api_key``) and frames sent to a model that takes
    none (``image_input_problem``). Empty when nothing is wrong."""
    problems = [missing_api_key(client), image_input_problem(client, max_image_history)]
    return [p for p in problems if p]


#: Clients whose backend calls a remote endpoint (probed before any episode); vllm and
#: llamacpp do so only with a ``base_url`` (without one they run the model themselves).
REMOTE_CLIENTS: frozenset[str] = frozenset(
    r.name for r in BACKEND_RECORDS if r.endpoint == "remote")
BASE_URL_CLIENTS: frozenset[str] = frozenset(
    r.name for r in BACKEND_RECORDS if r.endpoint == "remote_with_base_url")


async def probe_endpoint(client: ClientConfig) -> str | None:
    """Preflight of a remote model endpoint: one cheap request (``Backend.probe``, e.g. list
    models) with ``client``'s key; a message naming the endpoint and the provider's answer
    when it is unreachable or refuses the key, None when it answered or ``client`` runs its
    model in-process (nothing is started or loaded for those)."""
    remote = client.client_name in REMOTE_CLIENTS or (
        client.client_name in BASE_URL_CLIENTS and bool(client.base_url))
    if not remote:
        return None
    try:
        backend = create_backend(client)
    except BackendError as exc:
        return str(exc)
    try:
        return await backend.probe()
    finally:
        await backend.aclose()


def _require_key(client: ClientConfig) -> tuple[str, str | None]:
    problem = missing_api_key(client)
    if problem:
        raise BackendError(problem, provider=client.client_name)
    key, env = api_key_for(client)
    return (key or NO_KEY), env


def _openai_compat(client: ClientConfig) -> Backend:
    from agent_server.backends.openai_compat import OpenAICompatBackend

    api_key, env = _require_key(client)
    base_url = client.base_url or DEFAULT_BASE_URL.get(client.client_name)
    return OpenAICompatBackend(client, api_key=api_key, key_env=env, base_url=base_url)


def _anthropic(client: ClientConfig) -> Backend:
    from agent_server.backends.anthropic_backend import AnthropicBackend

    api_key, env = _require_key(client)
    return AnthropicBackend(client, api_key=api_key, key_env=env)


def _gemini(client: ClientConfig) -> Backend:
    from agent_server.backends.gemini_backend import GeminiBackend

    api_key, env = _require_key(client)
    return GeminiBackend(client, api_key=api_key, key_env=env)


def _vllm(client: ClientConfig) -> Backend:
    """A vLLM server at ``client.base_url``; without one, vLLM's in-process engine."""
    if client.base_url:
        return _openai_compat(client)
    from agent_server.backends.vllm_engine import VLLMEngineBackend

    return VLLMEngineBackend(client)


def _llamacpp(client: ClientConfig) -> Backend:
    """A llama.cpp server at ``client.base_url``; without one, Moria starts
    ``python -m llama_cpp.server`` as a child process for ``client.model_id``."""
    if client.base_url:
        return _openai_compat(client)
    from agent_server.backends.llamacpp_server import LlamaCppServerBackend

    return LlamaCppServerBackend(client)


def _local(client: ClientConfig) -> Backend:
    from agent_server.backends.local_llama import LocalLlamaBackend

    return LocalLlamaBackend(client)


#: client_name -> factory: one per record of ``moria.backends`` (a test checks they agree).
FACTORIES: dict[str, BackendFactory] = {
    "openai": _openai_compat,
    "openrouter": _openai_compat,
    "anthropic": _anthropic,
    "gemini": _gemini,
    "vllm": _vllm,
    "llamacpp": _llamacpp,
    "local": _local,
}


def create_backend(client: ClientConfig) -> Backend:
    """Build the backend for ``client``. Raises ``BackendError`` for an unknown client name, a
    missing API key, or an unknown local model name."""
    factory = FACTORIES.get(client.client_name)
    if factory is None:
        raise BackendError(
            f"unknown client_name {client.client_name!r}; known: {', '.join(sorted(FACTORIES))}",
            provider=client.client_name,
        )
    return factory(client)


def default_params(client: ClientConfig) -> GenerateParams:
    """``GenerateParams`` from ``client.generate_kwargs``: temperature, max_tokens, and every other
    key (top_p, seed, ...) in ``extra``. ``choices`` is left None (the strategy sets it)."""
    kwargs = client.generate_kwargs
    return GenerateParams(
        temperature=kwargs.temperature,
        max_tokens=kwargs.max_tokens,
        extra=dict(kwargs.model_extra or {}),
    )
