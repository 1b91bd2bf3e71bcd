"""Agent and client configuration shared by the orchestrator and the agent server.

These two sections travel in ``PolicyService.Play`` ``Begin.agent`` / ``Begin.client`` (and
``GetInfoRequest.check_agent`` / ``check_client``) as the typed messages ``AgentSettings`` /
``ClientSettings`` (``moria.policy_config`` maps them, field by field; the deprecated Struct
``Begin.agent_config``, ``{"agent": {...}, "client": {...}}``, is still accepted), so the policy
server can build a fresh strategy and backend for every episode. The models here are the
schema: a field added here needs its field in those messages (a unit test checks both ways).
Key names follow BALROG's ``config.yaml`` (``agent.*`` and ``client.*``);
``agent.max_history`` is accepted as an alias of ``agent.max_text_history``.

API keys are never part of this config: each backend reads them from the policy server's own
environment (see ``API_KEY_ENV``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from moria.backends import ALIASES, BACKEND_NAMES, BACKENDS, HttpClientChoice, http_client_for
from moria.strategies import strategy_facts

if TYPE_CHECKING:  # the names are data (registries): statically, a str
    AgentType = str
    ClientName = str
else:
    #: Strategy names accepted by ``agent.type``: the strategy registry's, read from the
    #: generated ``moria/strategies.json`` (``moria.strategies``).
    AgentType = Literal[tuple(sorted(strategy_facts()))]
    #: Backend names accepted by ``client.client_name`` (after ``CLIENT_ALIASES``): the
    #: records of ``moria.backends``.
    ClientName = Literal[BACKEND_NAMES]

#: The agent types BALROG itself has (those ``agent.protocol=balrog`` can play).
BALROG_AGENT_TYPES: tuple[str, ...] = ("naive", "cot", "robust_naive", "robust_cot", "few_shot")

#: Player types that call no model: their turns do not take a model-call slot. The owner of
#: this fact is each strategy class (``calls_model``), read here from the generated
#: ``moria/strategies.json`` (``moria.strategies``; ``python -m agent_server.strategies``).
NON_MODEL_AGENT_TYPES: frozenset[str] = frozenset(
    name for name, facts in strategy_facts().items() if not facts.calls_model)

#: Player types that read the env's tensor observation (``Observation.tensors``): sessions
#: with such a seat are opened with ``include_tensors``. Owned by the strategy classes
#: (``reads_tensors``), read from ``moria/strategies.json`` like ``NON_MODEL_AGENT_TYPES``.
TENSOR_AGENT_TYPES: frozenset[str] = frozenset(
    name for name, facts in strategy_facts().items() if facts.reads_tensors)

#: Other spellings of client names: BALROG writes ``claude``, MOSAIC writes ``google``.
CLIENT_ALIASES: dict[str, str] = ALIASES

#: Environment variables that may hold the API key for each client, in the order they are read
#: (empty: no key needed), from ``moria.backends``.
API_KEY_ENV: dict[str, tuple[str, ...]] = {r.name: r.key_env for r in BACKENDS}

#: Default base URL per client, used when ``client.base_url`` is not set. None means the SDK's
#: default for hosted APIs; for ``vllm`` and ``llamacpp`` it means "no server: run the model
#: here" (vLLM's in-process engine; llama.cpp's server started as a child process).
DEFAULT_BASE_URL: dict[str, str | None] = {r.name: r.default_base_url for r in BACKENDS}

#: ``client.reasoning_effort`` values (OpenAI reasoning models; mapped to budgets elsewhere).
ReasoningEffort = Literal["minimal", "low", "medium", "high"]

#: Upper bounds of the integer fields: what their wire fields (int32, int64) carry.
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_assignment=True)


class GenerateKwargs(BaseModel):
    """Sampling parameters sent with every completion request.

    ``temperature`` (None: provider default; BALROG default 1.0), ``max_tokens`` (upper bound of
    output tokens per call). Other keys (``top_p``, ``seed``, ...) are passed through unchanged.
    """

    model_config = ConfigDict(extra="allow")

    temperature: float | None = Field(default=1.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=4096, ge=1, le=INT32_MAX)


class ClientConfig(_Strict):
    """Which model backend to call and how (BALROG ``client`` section)."""

    client_name: ClientName = "local"
    model_id: str | None = Field(
        default=None,
        description="Model name; for 'local' a built-in name or a .gguf path (None: default).",
    )
    base_url: str | None = None
    generate_kwargs: GenerateKwargs = Field(default_factory=GenerateKwargs)
    timeout: float = Field(default=60.0, gt=0, description="Per-request timeout in seconds.")
    max_retries: int = Field(default=5, ge=0, le=INT32_MAX,
                             description="Retries after the first attempt.")
    delay: float = Field(default=2.0, ge=0, description="First backoff (s); doubles per retry.")
    alternate_roles: bool = False
    constrain_actions: bool = Field(
        default=False,
        description="Constrain output to the action list: a grammar for local and llamacpp, "
        "guided_choice for vllm (naive strategy only).",
    )
    stream: bool = Field(
        default=False,
        description="Use streaming responses where the backend supports it (accumulates deltas).",
    )
    reasoning_effort: ReasoningEffort | None = Field(
        default=None,
        description="Reasoning models: OpenAI/OpenRouter reasoning_effort; Anthropic and Gemini "
        "map it to a thinking budget when thinking_budget is not set.",
    )
    thinking_budget: int | None = Field(
        default=None,
        ge=0,
        le=INT32_MAX,
        description="Reasoning models: tokens the model may spend thinking (Anthropic "
        "budget_tokens, Gemini thinking_budget, OpenRouter reasoning.max_tokens).",
    )
    local_contexts: int = Field(
        default=1,
        ge=1,
        le=16,
        description="local: llama.cpp contexts kept per model; prompts with different first "
        "messages (the seats of a multi-agent game) get their own, so each keeps its KV-cache "
        "prefix instead of re-evaluating the whole prompt on every turn",
    )
    max_concurrency: int = Field(
        default=64,
        ge=1,
        le=INT32_MAX,
        description="In-flight model calls per endpoint on one agent server; more wait.",
    )
    max_prompt_bytes: int = Field(
        default=1_000_000,
        ge=1,
        le=INT64_MAX,
        description="Largest prompt one model call may send: the UTF-8 bytes of every "
        "message's text plus the PNG bytes of its images. A bigger prompt is never sent: the "
        "episode ends as agent_error saying so (lower agent.max_text_history / "
        "max_image_history, or raise this cap).",
    )
    max_requests_per_minute: float | None = Field(
        default=None,
        gt=0,
        description="Model calls per minute to this endpoint, shared by every episode on one "
        "agent server, and held for the run as a whole by the orchestrator across its agent "
        "servers; a 429 pauses every call to the endpoint for its retry-after. None: no limit.",
    )
    max_tokens_per_minute: float | None = Field(
        default=None,
        gt=0,
        description="Tokens per minute to this endpoint, counted before each call as "
        "providers count them (the prompt's estimate, a quarter of its text bytes, plus "
        "max_tokens), shared as max_requests_per_minute. None: no limit.",
    )
    http_client: HttpClientChoice = Field(
        default="auto",
        description="The HTTP client of OpenAI-compatible calls: 'sdk' the official openai "
        "SDK; 'lean' Moria's aiohttp client (less CPU per call; the same retries, timeouts, "
        "errors and usage); 'auto' lean for vllm and llamacpp servers, the SDK for openai and "
        "openrouter. 'lean' with openai or openrouter needs base_url (a self-hosted server); "
        "anthropic, gemini and local refuse it.",
    )

    @field_validator("client_name", mode="before")
    @classmethod
    def _alias(cls, value: object) -> object:
        """Accept ``claude`` and ``google`` (BALROG's and MOSAIC's spellings)."""
        if isinstance(value, str):
            return CLIENT_ALIASES.get(value.strip().lower(), value)
        return value

    @model_validator(mode="after")
    def _http_client_applies(self) -> ClientConfig:
        """``http_client='lean'`` only where the lean client can serve (``http_client_for``)."""
        http_client_for(self.client_name, self.http_client, self.base_url)
        return self


class AgentConfig(_Strict):
    """How the policy builds prompts and reads actions (BALROG ``agent`` section)."""

    type: AgentType = "naive"
    protocol: Literal["moria", "balrog"] = Field(
        default="moria",
        description="moria: Moria's own prompts and answer reading; balrog: BALROG's own agent, "
        "prompt-builder, instruction and validity code, loaded from agent.balrog_source at run "
        "time (docs/balrog-protocol.md)",
    )
    balrog_source: str | None = Field(
        default=None,
        description="protocol=balrog: path of a BALROG checkout (or its balrog/ package "
        "directory), or 'installed' for a pip-installed balrog package",
    )
    remember_cot: bool = True
    max_text_history: int = Field(
        default=16, ge=0, le=INT32_MAX,
        validation_alias=AliasChoices("max_text_history", "max_history"),
    )
    max_image_history: int = Field(default=0, ge=0, le=INT32_MAX)
    max_cot_history: int = Field(default=1, ge=0, le=INT32_MAX)
    max_icl_history: int = Field(
        default=1000,
        ge=0,
        le=INT32_MAX,
        description="few_shot: at most this many demonstration steps are shown (newest demos "
        "are cut first, whole steps only).",
    )
    checkpoint: str | None = Field(
        default=None,
        description="rl: path of the policy checkpoint file (.npz, see docs/rl-checkpoints.md)",
    )
    sample: bool = Field(
        default=False,
        description="rl: draw the action from the softmax over the legal actions' logits "
        "(seeded by the episode seed) instead of playing the argmax",
    )

    @model_validator(mode="after")
    def _rl_needs_checkpoint(self) -> AgentConfig:
        if self.type == "rl" and not self.checkpoint:
            raise ValueError("agent.type=rl needs agent.checkpoint=<path of a .npz checkpoint>")
        return self

    @model_validator(mode="after")
    def _balrog_protocol_needs_source(self) -> AgentConfig:
        if self.protocol != "balrog":
            return self
        if self.type not in BALROG_AGENT_TYPES:
            raise ValueError(f"agent.protocol=balrog plays BALROG's own agents: agent.type must be "
                             f"one of {', '.join(BALROG_AGENT_TYPES)}, not {self.type!r}")
        if not self.balrog_source:
            raise ValueError(
                "agent.protocol=balrog needs agent.balrog_source=<path of a BALROG checkout> "
                "(git clone https://github.com/balrog-ai/BALROG; any commit from 2024-11 on), or "
                "'installed' for a pip-installed balrog package: Moria takes BALROG's prompts "
                "and agent code from there at run time")
        return self


def policy_config_dict(agent: AgentConfig, client: ClientConfig) -> dict[str, Any]:
    """The JSON-able ``{"agent": ..., "client": ...}`` mapping of a seat's config, the form of
    the deprecated ``Begin.agent_config`` Struct: only the fields the run spec set (the policy
    server fills in the defaults, so its parsed configs' ``model_fields_set`` still tell which
    values were chosen; ``agent.protocol=balrog`` lets only those override the BALROG
    checkout's config). Moria's own clients send the typed ``moria.policy_config`` form, which
    carries the same fields."""
    return {"agent": agent.model_dump(mode="json", exclude_unset=True),
            "client": client.model_dump(mode="json", exclude_unset=True)}
