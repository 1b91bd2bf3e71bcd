"""PolicyService servicer: one Play stream = one agent's episode with fresh strategy state.

Begin builds a new strategy (and reuses a shared backend for the same client settings, so a
local model is loaded once per process); Observe -> Act runs one decision; End returns the
episode's token totals. Model failures after retries are in-band (``Act.error``); the stream
stays usable so the orchestrator can end the episode cleanly.

A stream that sends nothing for ``idle_timeout_s`` (announced in ``Ready.idle_timeout_s``) is
ended with DEADLINE_EXCEEDED and its slot freed; ``ping`` keeps a begun stream alive while its
client waits on the env. CPU work that grows with the request (decoding the config,
re-encoding a raw frame as PNG) runs in worker threads, never on the event loop that serves
every stream, and a frame is not touched at all when the strategy keeps no images. Every error
message that quotes the request goes through ``moria.quoting`` and is cut to
``moria.server.MAX_ERROR_BYTES``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterable
from importlib import metadata
from typing import Any, NoReturn

import grpc
from pydantic import ValidationError

import moria
from agent_server.backends import (
    client_problems,
    create_backend,
    missing_api_key,
    probe_endpoint,
)
from agent_server.backends.base import (
    Backend,
    BackendError,
    ChatMessage,
    Completion,
    ConcurrencyLimited,
    GenerateParams,
    PromptCapped,
    TokenUsage,
)
from agent_server.backends.limits import (
    BudgetRefused,
    EndpointRateLimit,
    EpisodeLimits,
    Limited,
    TokenBound,
)
from agent_server.strategies import STRATEGIES, create_strategy, registry_facts
from agent_server.strategies.base import Strategy
from agent_server.turn import DemoEpisode, DemoStep, EpisodeContext, HumanConsole, TurnInput
from moria import gc_tuning
from moria.backends import BACKEND_NAMES
from moria.codecs import array_from_tensor, dict_from_struct, png_bytes
from moria.common.v1 import types_pb2
from moria.config import AgentConfig, ClientConfig
from moria.metrics import POLICY_SERVICE, Metrics
from moria.observations import text_channels
from moria.policy.v1 import policy_service_pb2 as pol_pb
from moria.policy.v1 import policy_service_pb2_grpc as pol_grpc
from moria.policy_config import request_config
from moria.prompting import protocol_message
from moria.quoting import quote, quote_names
from moria.server import (
    DEFAULT_IDLE_TIMEOUT_S,
    Drain,
    PeerSlots,
    RequestLimit,
    abort_call,
    bounded_message,
    default_peer_limit,
    method_path,
    peer_of,
)
from moria.server_files import INSTALLED, ServerFiles, names_a_model_file

#: Observes up to this size (serialized bytes, no image used) are converted on the event loop.
INLINE_OBSERVE_BYTES = 64 * 1024

_SERVICE = pol_pb.DESCRIPTOR.services_by_name["PolicyService"]
#: The most a Play Begin (the configs, the instruction, few-shot demonstrations) or an Observe
#: (an observation and its frame: a PNG unless the run asks RAW_RGB, which fits up to 5.5
#: megapixels) may weigh, in bytes. It is also the largest message the server reads
#: (``MoriaServer`` sets gRPC's receive limit to the largest request limit), so a larger one
#: is refused from its length prefix before it is read: receiving a 60 MB message held the
#: event loop for about 100 ms (in gRPC itself: a bare ``grpc.aio`` server held it as long),
#: and a healthy stream beside it then kept under half its step rate.
MAX_PLAY_MESSAGE_BYTES = 16 * 1024 * 1024
#: The largest request each method takes (bytes), checked before it is parsed
#: (``moria.server.RequestLimit``; larger: RESOURCE_EXHAUSTED): a Begin or an Observe at most
#: ``MAX_PLAY_MESSAGE_BYTES`` (the server's ``--max-message-mb`` when that is smaller); a
#: ping or an end, and a GetInfo's config to check, far less.
REQUEST_LIMITS: dict[str, RequestLimit] = {
    method_path(_SERVICE, "Play"): RequestLimit.for_oneof(
        pol_pb.PlayRequest, {"begin": MAX_PLAY_MESSAGE_BYTES, "observe": MAX_PLAY_MESSAGE_BYTES},
        default=64 * 1024),
    method_path(_SERVICE, "GetInfo"): RequestLimit(1024 * 1024),
}

log = logging.getLogger("moria.agent")



#: How many problems of one invalid config an error message lists.
MAX_CONFIG_PROBLEMS = 10
#: The most keys a config section (``agent``, ``client``) and ``client.generate_kwargs`` may
#: have: every field of both models is a few dozen, and a section with more is refused by its
#: count before it is validated (validating 100,000 unknown keys held the GIL for 0.4 s).
MAX_CONFIG_KEYS = 256


def parse_policy_config(raw: dict[str, Any]) -> tuple[AgentConfig, ClientConfig]:
    """Validate ``{"agent": {...}, "client": {...}}``. Raises ValueError naming the fields at
    fault: at most ``MAX_CONFIG_PROBLEMS``, each key and value quoted with ``moria.quoting``,
    then how many more there are; a section (or ``client.generate_kwargs``) of more than
    ``MAX_CONFIG_KEYS`` keys is refused by its count before anything is validated. Linear in
    the size of ``raw``: call it off the event loop for a request's config
    (``_parse_request_config``)."""
    if len(raw) > MAX_CONFIG_KEYS:
        raise ValueError(f"{len(raw):,} config sections given; allowed: agent, client")
    unknown = sorted(str(key) for key in raw if key not in ("agent", "client"))
    if unknown:
        raise ValueError(f"unknown config section(s) {quote_names(unknown, MAX_CONFIG_PROBLEMS)}"
                         "; allowed: agent, client")
    raw_client = raw.get("client")
    sections = {**raw, "client.generate_kwargs": (raw_client.get("generate_kwargs")
                                                  if isinstance(raw_client, dict) else None)}
    for name, section in sections.items():
        if isinstance(section, dict) and len(section) > MAX_CONFIG_KEYS:
            raise ValueError(f"{name}: {len(section):,} keys given; a config takes at most "
                             f"{MAX_CONFIG_KEYS}")
    problems = []
    try:
        agent = AgentConfig.model_validate(raw.get("agent", {}))
    except ValidationError as exc:
        problems.append(_describe_validation(exc, "agent"))
    try:
        client = ClientConfig.model_validate(raw.get("client", {}))
    except ValidationError as exc:
        problems.append(_describe_validation(exc, "client"))
    if problems:
        raise ValueError("; ".join(problems))
    return agent, client


def _describe_validation(exc: ValidationError, section: str) -> str:
    """The first ``MAX_CONFIG_PROBLEMS`` problems of ``exc`` (by key), each
    ``section.key: msg (got value)``, then how many more there are."""
    errors = sorted(exc.errors(include_url=False), key=lambda e: [str(p) for p in e["loc"]])
    parts = []
    for err in errors[:MAX_CONFIG_PROBLEMS]:
        loc = quote(".".join([section, *(str(p) for p in err["loc"])]), 64)
        parts.append(f"{loc}: {err['msg']} (got {quote(err.get('input'), 64)})")
    more = len(errors) - MAX_CONFIG_PROBLEMS
    return "; ".join(parts) + (f"; and {more} more problems" if more > 0 else "")


def _parse_request_config(message: Any, agent_field: str, client_field: str,
                          struct_field: str, files: ServerFiles,
                          ) -> tuple[AgentConfig, ClientConfig] | None:
    """``parse_policy_config`` of the config a request carries: its typed settings
    (``agent_field``, ``client_field``) when either is set, else its deprecated Struct
    (``struct_field``); None when it carries none. The fields naming server files are
    resolved by ``files`` (``with_server_files``). Raises ValueError (a non-finite number or a
    Struct with no JSON form included; ServerFileError for a server file not offered)."""
    if not (message.HasField(agent_field) or message.HasField(client_field)) \
            and message.HasField(struct_field):
        _check_struct_size(getattr(message, struct_field))  # before it becomes a dict
    raw = request_config(message, agent_field, client_field, struct_field)
    if raw is None:
        return None
    return with_server_files(*parse_policy_config(raw), files)


def _check_struct_size(config: Any) -> None:
    """Refuse a config Struct with more than ``MAX_CONFIG_KEYS`` sections, or a section with
    more keys, from its counts alone (as ``parse_policy_config`` would after converting it).
    Raises ValueError."""
    if len(config.fields) > MAX_CONFIG_KEYS:
        raise ValueError(f"{len(config.fields):,} config sections given; allowed: agent, client")
    for name in ("agent", "client"):
        if name in config.fields:
            section = config.fields[name].struct_value.fields
            if len(section) > MAX_CONFIG_KEYS:
                raise ValueError(f"{name}: {len(section):,} keys given; a config takes at "
                                 f"most {MAX_CONFIG_KEYS}")


def with_server_files(agent: AgentConfig, client: ClientConfig, files: ServerFiles,
                      ) -> tuple[AgentConfig, ClientConfig]:
    """``agent`` and ``client`` (changed in place) with the fields that name server files
    resolved by ``files`` (``moria.server_files``): ``agent.balrog_source`` (but
    ``installed``, the server's own package), ``agent.checkpoint``, and ``client.model_id``
    where it names a model file (``names_a_model_file``). Nothing a client names is imported,
    loaded or parsed unless the server offers it. Raises ServerFileError."""
    if agent.balrog_source and agent.balrog_source != INSTALLED:
        agent.balrog_source = files.resolve("balrog_source", agent.balrog_source,
                                            "agent.balrog_source")
    if agent.checkpoint:
        agent.checkpoint = files.resolve("checkpoint", agent.checkpoint, "agent.checkpoint")
    if names_a_model_file(client.client_name, client.model_id, client.base_url):
        assert client.model_id is not None
        client.model_id = files.resolve("model", client.model_id, "client.model_id")
    return agent, client


def _uses_backend(agent: AgentConfig) -> bool:
    """True for players that call a model: the strategy class's ``calls_model`` (the one owner
    of that fact; the orchestrator schedules model-call slots and ``moria prepare`` fetches
    weights by the same facts, read from the generated ``moria/strategies.json``). An
    unregistered type counts as calling one (``create_strategy`` refuses it anyway)."""
    cls = STRATEGIES.get(agent.type)
    return cls is None or cls.calls_model


class PolicyServicer(pol_grpc.PolicyServiceServicer):
    """Serves strategies over the backends; ``capacity`` bounds concurrent Play streams.
    ``idle_timeout_s``: a Play stream that sends nothing for this many seconds (> 0) is ended
    with DEADLINE_EXCEEDED and its slot freed. ``human_console``: where ``human`` players'
    moves come from (None: this server cannot seat a human, and such a Begin is rejected).
    ``metrics``: where streams, acts, model calls, retries and RPC errors are counted (default:
    a fresh ``Metrics`` with its own registry; serve ``servicer.metrics.registry`` with
    ``moria.metrics.start_metrics_http``). ``files``: the server files (BALROG checkouts,
    model files, RL checkpoints) a config may name (``moria.server_files``; default: none).
    ``max_streams_per_peer``: the most Play streams one client address may hold
    (``moria.server.peer_of``; None: ``default_peer_limit``, three quarters of the capacity).
    Raises ValueError for ``idle_timeout_s`` <= 0."""

    def __init__(self, *, drain: Drain, capacity: int = 256,
                 idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S,
                 human_console: HumanConsole | None = None, metrics: Metrics | None = None,
                 files: ServerFiles | None = None, max_streams_per_peer: int | None = None):
        if not idle_timeout_s > 0:
            raise ValueError(f"idle_timeout_s must be > 0, got {idle_timeout_s}")
        self.peers = PeerSlots(min(capacity, max_streams_per_peer or default_peer_limit(
            capacity)))
        self.files = files if files is not None else ServerFiles()
        self.drain = drain
        self.human_console = human_console
        self.metrics = metrics if metrics is not None else Metrics()
        self.capacity = capacity
        self.idle_timeout_s = idle_timeout_s
        self.active = 0
        self._backends: dict[str, Backend] = {}
        self._rate_limits: dict[tuple[str, float | None, float | None],
                                EndpointRateLimit] = {}
        #: held while a backend is built, so concurrent Begins build each one once
        self._building = asyncio.Lock()
        #: read once: package versions and the strategy registry cannot change under a
        #: running server, and reading the versions (importlib.metadata scans site-packages)
        #: took milliseconds of the event loop on every GetInfo, which clients send before
        #: each episode
        self._version = types_pb2.VersionInfo(api_version=moria.API_VERSION,
                                              package_version=moria.__version__,
                                              components=_component_versions())
        self._strategies = sorted(STRATEGIES)
        self._strategy_info = [pol_pb.StrategyInfo(name=f.name, calls_model=f.calls_model,
                                                   reads_tensors=f.reads_tensors,
                                                   keeps_images=f.keeps_images)
                               for f in registry_facts()]

    async def backend_for(self, client: ClientConfig) -> Backend:
        """The shared backend for these client settings (created on first use), limited to
        ``client.max_concurrency`` in-flight calls. Episodes with the same endpoint and model
        share it, so the limit is per endpoint (``client.max_prompt_bytes`` is applied per
        episode, by ``PromptCapped`` around it). Raises ``BackendError``."""
        key = _endpoint_key(client)
        backend = self._backends.get(key)
        if backend is not None:
            return backend
        async with self._building:
            backend = self._backends.get(key)
            if backend is None:
                # off the event loop: the first backend of a provider imports its SDK (about
                # 1 s of CPU for openai's), which held every other stream of this server
                inner = await asyncio.to_thread(create_backend, client)
                metered = _Metered(inner, self.metrics, client.client_name,
                                   client.model_id or "default")
                backend = ConcurrencyLimited(metered, client.max_concurrency)
                self._backends[key] = backend
                gc_tuning.freeze()  # a provider SDK imported for it is most of the heap
        return backend

    def rate_limit_for(self, client: ClientConfig) -> EndpointRateLimit | None:
        """The shared rate limit of ``client``'s endpoint and model under its
        ``max_requests_per_minute`` / ``max_tokens_per_minute`` (created on first use); None
        when neither is set."""
        if client.max_requests_per_minute is None and client.max_tokens_per_minute is None:
            return None
        key = (_endpoint_key(client), client.max_requests_per_minute,
               client.max_tokens_per_minute)
        limit = self._rate_limits.get(key)
        if limit is None:
            limit = self._rate_limits[key] = EndpointRateLimit(client.max_requests_per_minute,
                                                               client.max_tokens_per_minute)
        return limit

    async def aclose(self) -> None:
        """Release every backend."""
        for backend in self._backends.values():
            await backend.aclose()
        self._backends.clear()

    async def GetInfo(self, request: pol_pb.GetInfoRequest, context: Any,
                      ) -> pol_pb.GetInfoResponse:
        errors: list[str] = []
        try:
            checked = await asyncio.to_thread(_parse_request_config, request, "check_agent",
                                              "check_client", "check_config", self.files)
            if checked is not None:
                agent, client = checked
                if _uses_backend(agent):
                    errors.extend(client_problems(
                        client, max_image_history=agent.max_image_history))
                    if not errors:
                        problem = await probe_endpoint(client)
                        if problem:
                            errors.append(bounded_message(problem))
        except ValueError as exc:
            errors.append(bounded_message(str(exc)))
        return pol_pb.GetInfoResponse(
            version=self._version, strategies=self._strategies,
            strategy_info=self._strategy_info, backends=BACKEND_NAMES,
            capacity=self.capacity, active_streams=self.active, config_errors=errors,
            draining=self.drain.draining, peer_capacity=self.peers.limit,
            peer_streams=self.peers.held(peer_of(context)))

    async def Play(self, request_iterator: Any, context: Any) -> None:
        stream = _PlayStream(self, context)
        with self.metrics.rpc(POLICY_SERVICE, context):
            try:
                await stream.serve()
            except grpc.aio.AbortError:
                raise
            except Exception as exc:
                # What grpc.aio would send for it (UNKNOWN, "Unexpected <type>: <text>"), but
                # with the text bounded: a strategy's exception may quote the request.
                log.exception("Play stream failed")
                await stream.abort(grpc.StatusCode.UNKNOWN,
                                   f"Unexpected {type(exc)}: {exc}")


#: The packages whose installed versions ``GetInfo`` reports (model SDKs and gRPC).
VERSIONED_PACKAGES = ("llama_cpp_python", "openai", "anthropic", "google-genai", "vllm",
                      "grpcio")


def _endpoint_key(client: ClientConfig) -> str:
    """The settings that make one shared backend: all but the per-episode ones (generation
    settings, the prompt cap) and the rate limits (``PolicyServicer.rate_limit_for``)."""
    return json.dumps(client.model_dump(mode="json", exclude=PER_EPISODE_CLIENT_FIELDS),
                      sort_keys=True)


#: ``ClientConfig`` fields applied per episode or per limit, not per shared backend.
PER_EPISODE_CLIENT_FIELDS: set[str] = {"generate_kwargs", "max_prompt_bytes",
                                       "max_requests_per_minute", "max_tokens_per_minute"}


def _component_versions() -> dict[str, str]:
    """Each of ``VERSIONED_PACKAGES``' installed version, or "not installed"."""
    components = {}
    for pkg in VERSIONED_PACKAGES:
        try:
            components[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            components[pkg] = "not installed"
    return components


class _Metered(Backend):
    """A backend whose calls are timed into ``moria_model_latency_seconds`` (labels
    ``backend``/``model``) and whose retries are counted in ``moria_model_retries_total``."""

    def __init__(self, inner: Backend, metrics: Metrics, backend: str, model: str):
        self.inner = inner
        self.name = inner.name
        self.strict_alternation = inner.strict_alternation
        self._metrics = metrics
        self._labels = (backend, model)

    async def complete(self, messages: list[ChatMessage], params: GenerateParams) -> Completion:
        """``inner.complete``, metered. Raises what ``inner`` raises."""
        with self._metrics.model_call(*self._labels):
            return await self.inner.complete(messages, params)

    def can_create_as_sent(self) -> bool:
        """As the wrapped backend."""
        return self.inner.can_create_as_sent()

    async def create_as_sent(self, kwargs: dict[str, Any]) -> tuple[Any, Completion]:
        """``inner.create_as_sent``, metered."""
        with self._metrics.model_call(*self._labels):
            return await self.inner.create_as_sent(kwargs)

    async def aclose(self) -> None:
        """Close the wrapped backend."""
        await self.inner.aclose()


class _PlayStream:
    """State of one Play stream: its strategy, token totals and capacity slot."""

    def __init__(self, server: PolicyServicer, context: Any):
        self.server = server
        self.context = context
        self.strategy: Strategy | None = None
        self.total = TokenUsage()
        self.calls = 0
        self.uses_backend = False
        self.model = ""
        self.strategy_name = ""
        self.claimed = False
        self.peer = ""
        self.limits: EpisodeLimits | None = None
        #: one reservation round trip at a time (a strategy may call in parallel)
        self._reserving = asyncio.Lock()

    async def abort(self, code: grpc.StatusCode, message: str) -> NoReturn:
        """End the stream with ``code`` and ``message`` (cut by ``bounded_message``), its
        capacity slot given back first (a client that hears the status finds it free)."""
        self.release()
        await abort_call(self.context, code, message)

    def release(self) -> None:
        """Give back the capacity slot (once)."""
        if self.claimed:
            self.claimed = False
            self.server.active -= 1
            self.server.peers.release(self.peer)
            self.server.metrics.active_streams.dec()

    async def read(self) -> Any:
        """The next request, or ``grpc.aio.EOF``. Ends the stream with DEADLINE_EXCEEDED,
        having freed its slot, when nothing comes for ``idle_timeout_s``."""
        limit = self.server.idle_timeout_s
        try:
            async with asyncio.timeout(limit):  # no task per read, unlike wait_for
                return await self.context.read()
        except TimeoutError:
            log.info("Play stream sent nothing for %gs: ended", limit)
            await self.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                             f"Play stream sent nothing for {limit:g} s (the agent server's "
                             "--idle-timeout) and was ended; send 'ping' to keep a begun "
                             "stream alive while waiting")

    async def serve(self) -> None:
        """Begin, then turns until End or the client hangs up."""
        try:
            while True:
                request = await self.read()
                if request is grpc.aio.EOF:
                    return
                kind = request.WhichOneof("request")
                if kind == "begin":
                    if self.strategy is not None:
                        await self.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                         "'begin' sent twice on one Play stream")
                    if self.server.drain.draining:
                        await self.abort(grpc.StatusCode.UNAVAILABLE,
                                         "server is draining and accepts no new episodes")
                    if self.server.active >= self.server.capacity:
                        await self.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                         f"policy capacity reached ({self.server.capacity})")
                    self.peer = peer_of(self.context)
                    if not self.server.peers.claim(self.peer):
                        await self.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                         f"this client holds {self.server.peers.limit} Play "
                                         "streams, the most one client address may hold on this "
                                         "server (--max-streams-per-peer; capacity "
                                         f"{self.server.capacity}); end one, retry later or use "
                                         "another replica")
                    self.server.active += 1
                    self.server.metrics.active_streams.inc()
                    self.claimed = True
                    with self.server.drain.track():
                        await self.context.write(await self._begin(request.begin))
                        await self._turns()
                    return
                await self.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                 f"'{kind}' before 'begin': the first request must be begin")
        finally:
            self.release()

    async def _begin(self, begin: pol_pb.Begin) -> pol_pb.PlayResponse:
        try:
            parsed = await asyncio.to_thread(_parse_request_config, begin, "agent", "client",
                                             "agent_config", self.server.files)
            agent, client = parsed or parse_policy_config({})  # none sent: all defaults
        except ValueError as exc:
            await self.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad agent_config: {exc}")
        self.uses_backend = _uses_backend(agent)
        self.model = (f"{client.client_name}/{client.model_id or 'default'}"
                      if self.uses_backend else agent.type)
        backend: Backend | None = None
        if self.uses_backend:
            problem = missing_api_key(client)
            if problem:
                await self.abort(grpc.StatusCode.FAILED_PRECONDITION, problem)
            try:
                # the episode's prompts are checked against its cap before they wait for a
                # slot of the shared backend (never closed through this wrapper)
                capped = PromptCapped(await self.server.backend_for(client),
                                      client.max_prompt_bytes, provider=client.client_name)
                self.limits = EpisodeLimits(
                    client, self.model, rate_limit=self.server.rate_limit_for(client),
                    ask=self._reserve if begin.reserve_calls else None)
                backend = Limited(capped, self.limits)
            except BackendError as exc:
                await self.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        space = begin.action_space
        ctx = EpisodeContext(
            instruction=begin.instruction, action_names=[a.name for a in space.actions],
            default_action=space.default_action, agent=agent, client=client,
            seed=int(begin.seed), env_name=begin.env_name, task=begin.task,
            agent_id=begin.agent_id,
            demonstrations=demos_from_proto(begin.demonstrations),
            record_prompts=begin.record_prompts, human_console=self.server.human_console,
            first_info=_first_info(begin))
        try:
            # protocol=balrog imports BALROG's code the first time: off the event loop
            self.strategy = await asyncio.to_thread(create_strategy, ctx, backend)
        except ValueError as exc:
            await self.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        self.strategy_name = agent.type
        return pol_pb.PlayResponse(ready=pol_pb.Ready(
            strategy=agent.type, model=self.model, idle_timeout_s=self.server.idle_timeout_s,
            protocol=protocol_message(self.strategy.protocol())))

    async def _reserve(self, model: str, bound: TokenBound) -> tuple[bool, str]:
        """Ask the client to reserve a call's worst case (Begin.reserve_calls): send
        ``reserve``, answer pings meanwhile, return the grant's (granted, reason). A client
        that hangs up refuses; any other request ends the stream (FAILED_PRECONDITION)."""
        async with self._reserving:
            await self.context.write(pol_pb.PlayResponse(reserve=pol_pb.Reserve(
                model=model, input_tokens=bound.input_tokens,
                output_tokens=bound.output_tokens, rate_tokens=bound.rate_tokens)))
            while True:
                request = await self.read()
                if request is grpc.aio.EOF:
                    return False, "the client hung up before granting the model call"
                kind = request.WhichOneof("request")
                if kind == "grant":
                    return request.grant.granted, bounded_message(request.grant.reason)
                if kind == "ping":
                    await self.context.write(pol_pb.PlayResponse(pong=pol_pb.Pong()))
                    continue
                await self.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                 f"'{kind}' while a model call waited for its grant: "
                                 "expected grant or ping")

    def _waited(self) -> float:
        return self.limits.take_waited() if self.limits is not None else 0.0

    async def _turns(self) -> None:
        while True:
            request = await self.read()
            if request is grpc.aio.EOF:
                return
            kind = request.WhichOneof("request")
            if kind == "observe":
                act = await self._act(request.observe)
                self.server.metrics.act(self.strategy_name)
                await self.context.write(pol_pb.PlayResponse(act=act))
            elif kind == "ping":  # reading it restarted the idle clock
                await self.context.write(pol_pb.PlayResponse(pong=pol_pb.Pong()))
            elif kind == "end":
                usage = _usage_proto(self.total, self.calls)
                await self.context.write(pol_pb.PlayResponse(
                    ended=pol_pb.Ended(total_usage=usage)))
                return
            else:
                await self.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                 f"'{kind}' after 'begin': expected observe, ping or end")

    async def _act(self, observe: pol_pb.Observe) -> pol_pb.Act:
        assert self.strategy is not None
        try:
            # CPU that grows with the Observe (a frame re-encoded as PNG, a large info
            # Struct): in a worker thread, so other streams are answered meanwhile. A small
            # text-only Observe converts in microseconds, less than the thread hop costs.
            if self.strategy.uses_images or observe.ByteSize() > INLINE_OBSERVE_BYTES:
                turn = await asyncio.to_thread(turn_input, observe,
                                               keep_image=self.strategy.uses_images)
            else:
                turn = turn_input(observe, keep_image=False)
        except ValueError as exc:  # CodecError, or a Struct number with no JSON form
            await self.abort(grpc.StatusCode.INVALID_ARGUMENT, f"malformed observe: {exc}")
        started = time.perf_counter()
        try:
            decision = await self.strategy.act(turn)
        except BackendError as exc:
            status = (grpc.StatusCode.RESOURCE_EXHAUSTED if isinstance(exc, BudgetRefused)
                      else grpc.StatusCode.UNAVAILABLE if exc.retryable
                      else grpc.StatusCode.FAILED_PRECONDITION)
            log.warning("model call failed for good: %s", exc)
            return pol_pb.Act(error=types_pb2.Status(code=status.value[0],
                                                      message=bounded_message(str(exc))),
                              latency_s=time.perf_counter() - started, model=self.model,
                              rate_limit_wait_s=self._waited())
        calls = 1 if self.uses_backend else 0
        self.total.add(decision.usage)
        self.calls += calls
        return pol_pb.Act(action=types_pb2.Action(text=decision.action),
                          raw_completion=decision.raw_completion, reasoning=decision.reasoning,
                          usage=_usage_proto(decision.usage, calls),
                          latency_s=decision.latency_s or (time.perf_counter() - started),
                          stop_reason=decision.stop_reason, attempts=decision.attempts,
                          prompt_json=decision.prompt_json, model=self.model,
                          rate_limit_wait_s=self._waited())


def _first_info(begin: pol_pb.Begin) -> dict[str, Any]:
    """The ``info`` of ``Begin.observation`` ({} when absent or not JSON-able)."""
    if not begin.HasField("observation"):
        return {}
    try:
        return dict_from_struct(begin.observation.info)
    except ValueError:
        return {}


def turn_input(observe: pol_pb.Observe, *, keep_image: bool) -> TurnInput:
    """The strategy's view of one Observe. CPU-bound for a large frame (PNG encoding of a
    RAW_RGB frame): the Play handler calls it in a worker thread.

    ``keep_image``: whether the strategy reads frames (``Strategy.uses_images``). When False
    the observation's image is ignored (``image_png`` None, its bytes never looked at, so an
    undecodable one is no error); when True it becomes PNG bytes (``moria.codecs.png_bytes``:
    a RAW_RGB frame re-encoded, a PNG's header checked).

    Raises ValueError (``CodecError`` among them) for a kept image or a tensor whose bytes
    disagree with its header, or an ``info`` Struct with no JSON form (an infinite or NaN
    number).
    """
    obs = observe.observation
    image_png = None
    if keep_image and obs.HasField("image") and obs.image.data:
        image_png = png_bytes(obs.image)
    last = observe.last_action_result
    has_last = observe.HasField("last_action_result")
    long_term, short_term = text_channels(obs)
    return TurnInput(
        step=int(observe.step),
        long_term_context=long_term,
        short_term_context=short_term,
        image_png=image_png,
        legal_actions=list(obs.legal_actions),
        info=dict_from_struct(obs.info),
        last_valid=last.valid if has_last else True,
        last_applied_action=last.applied_action.text if has_last else "",
        last_feedback=last.feedback if has_last else "",
        tensors={name: array_from_tensor(t) for name, t in obs.tensors.items()},
        action_mask=list(obs.action_mask),
    )


def demos_from_proto(messages: Iterable[pol_pb.Demonstration]) -> tuple[DemoEpisode, ...]:
    """``Begin.demonstrations`` as ``DemoEpisode`` values, in order (for
    ``EpisodeContext.demonstrations``)."""
    return tuple(
        DemoEpisode(task=demo.task, seed=int(demo.seed), instruction=demo.instruction,
                    source=demo.source,
                    steps=tuple(DemoStep(s.observation, s.action, float(s.reward))
                                for s in demo.steps))
        for demo in messages)


def _usage_proto(usage: TokenUsage, calls: int) -> types_pb2.Usage:
    return types_pb2.Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
                           cached_input_tokens=usage.cached_input_tokens,
                           reasoning_tokens=usage.reasoning_tokens, calls=calls)
