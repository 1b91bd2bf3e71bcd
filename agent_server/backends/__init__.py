"""Model backends: the registry from ``client.client_name`` to a backend factory.

``create_backend(client)`` builds the backend for a ``ClientConfig``; ``missing_api_key(client)``
is the preflight check run before any episode starts. Provider SDKs and llama.cpp are imported
only when their backend is built.
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
from moria.config import API_KEY_ENV, DEFAULT_BASE_URL, ClientConfig

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendError",
    "ChatMessage",
    "Completion",
    "GenerateParams",
    "TokenUsage",
    "api_key_for",
    "create_backend",
    "default_params",
    "missing_api_key",
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


#: client_name -> factory. Add a provider by adding an entry.
BACKENDS: dict[str, BackendFactory] = {
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
    factory = BACKENDS.get(client.client_name)
    if factory is None:
        raise BackendError(
            f"unknown client_name {client.client_name!r}; known: {', '.join(sorted(BACKENDS))}",
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
