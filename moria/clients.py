"""Typed async clients for the Env and Policy services.

One channel per target, reused (``channel_for``). Streams are driven in lockstep: every request
gets exactly one response. RPC failures surface as ``grpc.aio.AioRpcError`` with the server's
status code (NOT_FOUND, FAILED_PRECONDITION, RESOURCE_EXHAUSTED, UNAVAILABLE, INTERNAL,
UNAUTHENTICATED, ...).

Transport security (TLS, mTLS, bearer token, message limit) comes from ``configure_transport``,
set once per process (e.g. by the orchestrator from its run spec's ``endpoints``), for every
target or for listed ones; a client may also pass a ``TransportSecurity`` explicitly.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from moria.codecs import struct_from_dict
from moria.common.v1 import types_pb2
from moria.config import AgentConfig, ClientConfig
from moria.env.v1 import env_service_pb2 as env_pb
from moria.env.v1 import env_service_pb2_grpc as env_grpc
from moria.policy.v1 import policy_service_pb2 as pol_pb
from moria.policy.v1 import policy_service_pb2_grpc as pol_grpc
from moria.policy_config import agent_settings, client_settings
from moria.security import (
    SecurityConfigError,
    TlsConfig,
    TransportSecurity,
    is_local_target,
    open_channel,
    transport_security,
)

# grpc.aio channels belong to the event loop that created them: key by (loop, target, settings).
_CHANNELS: dict[tuple[int, str, tuple[Any, ...]], grpc.aio.Channel] = {}

# Process-wide transport settings: per target, then the default for every other target.
_TRANSPORT_BY_TARGET: dict[str, TransportSecurity] = {}
_DEFAULT_TRANSPORT: TransportSecurity | None = None


def configure_transport(tls: TlsConfig | None = None, token_env: str | None = None, *,
                        targets: Iterable[str] | None = None,
                        max_message_mb: int | None = None) -> TransportSecurity:
    """Set how this process's clients reach servers: TLS settings ``tls`` (None: plaintext),
    the bearer token held by environment variable ``token_env`` (read now; None: no token) and
    the message limit ``max_message_mb`` (None: 64 MiB). With ``targets`` the settings apply
    to those targets only, else to every target without its own. Channels opened later use
    them (open channels keep theirs). Returns the settings.

    Raises SecurityConfigError when the variable is unset (naming it, never the value), or
    when a token without TLS is set for a listed target that is not loopback or a unix socket.
    """
    global _DEFAULT_TRANSPORT
    kwargs = {} if max_message_mb is None else {"max_message_mb": max_message_mb}
    security = transport_security(tls, token_env, **kwargs)
    targets = None if targets is None else list(targets)
    if security.token is not None and security.tls is None:
        remote = [t for t in targets or () if not is_local_target(t)]
        if remote:
            raise SecurityConfigError(
                f"refusing to send the bearer token over plaintext to {remote[0]!r}: configure "
                "TLS (endpoints.tls) for non-loopback targets")
    if targets is None:
        _DEFAULT_TRANSPORT = security
    else:
        for target in targets:
            _TRANSPORT_BY_TARGET[target] = security
    return security


def reset_transport() -> None:
    """Forget every setting made by ``configure_transport`` (back to plaintext, no token)."""
    global _DEFAULT_TRANSPORT
    _DEFAULT_TRANSPORT = None
    _TRANSPORT_BY_TARGET.clear()


def transport_for(target: str) -> TransportSecurity | None:
    """The settings ``configure_transport`` made for ``target`` (None: plaintext, no token)."""
    return _TRANSPORT_BY_TARGET.get(target, _DEFAULT_TRANSPORT)


def channel_for(target: str, security: TransportSecurity | None = None) -> grpc.aio.Channel:
    """The shared channel for ``target`` (host:port, unix:///path or dns:///name) on the
    running event loop, created on first use with Moria's message limits and keepalive, under
    ``security`` (None: ``transport_for(target)``).

    Raises SecurityConfigError when a token would go in clear text to a non-loopback target or
    a TLS file cannot be read.
    """
    settings = security if security is not None else transport_for(target)
    fingerprint = settings.fingerprint() if settings is not None else ()
    key = (id(asyncio.get_running_loop()), target, fingerprint)
    channel = _CHANNELS.get(key)
    if channel is None:
        channel = open_channel(target, settings)
        _CHANNELS[key] = channel
    return channel


async def close_channels() -> None:
    """Close the shared channels of the running event loop (call before the loop ends)."""
    loop_id = id(asyncio.get_running_loop())
    for key in [k for k in _CHANNELS if k[0] == loop_id]:
        await _CHANNELS.pop(key).close()


async def check_health(target: str, service: str = "", timeout: float = 2.0,
                       security: TransportSecurity | None = None) -> bool:
    """True when ``grpc.health.v1`` reports SERVING for ``service`` at ``target`` (False on
    any RPC error, a failed TLS handshake included)."""
    stub = health_pb2_grpc.HealthStub(channel_for(target, security))
    try:
        resp = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    except grpc.aio.AioRpcError:
        return False
    return bool(resp.status == health_pb2.HealthCheckResponse.SERVING)


class StreamClosedError(RuntimeError):
    """The server ended a stream without answering a request."""


#: ``interim(response)`` -> the request that answers it, or None when ``response`` is the
#: answer itself (see ``_Lockstep.request``).
Interim = Callable[[Any], Awaitable[Any | None]]


class _Lockstep:
    """A bidi call where each write is answered by exactly one read (and any interim
    exchanges the server starts before that answer: ``request``'s ``interim``)."""

    def __init__(self, call: Any):
        self._call = call
        self.closed = False

    async def request(self, message: Any, interim: Interim | None = None) -> Any:
        """Write ``message`` and return its answer. With ``interim``, each response read is
        first given to it: when it returns a request, that request is written and the next
        response read (a Play stream's ``reserve`` answered by a ``grant``)."""
        response = await self._exchange(message)
        if interim is not None:
            while (reply := await interim(response)) is not None:
                response = await self._exchange(reply)
        return response

    async def _exchange(self, message: Any) -> Any:
        try:
            await self._call.write(message)
        except asyncio.InvalidStateError:
            # The server already ended the call (e.g. the idle reaper): surface its status.
            self.closed = True
            code = await self._call.code()
            raise grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(),
                                       details=await self._call.details()) from None
        response = await self._call.read()
        if response is grpc.aio.EOF:
            self.closed = True
            raise StreamClosedError("stream closed by the server")
        return response

    async def aclose(self, grace_s: float = 2.0) -> None:
        """Half-close, give the server up to ``grace_s`` seconds to finish the call with its
        own status (so a polite end is not seen as a client cancellation), then cancel."""
        if not self.closed:
            self.closed = True
            with contextlib.suppress(grpc.aio.AioRpcError, grpc.aio.UsageError, RuntimeError):
                await self._call.done_writing()
            try:
                # a timeout scope, not wait_for: no task per close (0.18 ms of client CPU per
                # episode's open and close, 2.60 against 2.42 ms, measured 2026-11-28)
                async with asyncio.timeout(grace_s):
                    await self._call.code()
            except (TimeoutError, grpc.aio.AioRpcError):
                pass
            finally:
                self._call.cancel()


_log = logging.getLogger("moria.clients")

#: A stream is pinged once it has been silent for this fraction of the idle timeout its server
#: announced (``OpenResponse.idle_timeout_s``, ``Ready.idle_timeout_s``).
PING_FRACTION = 0.25


class KeptAlive(_Lockstep):
    """The lockstep of one stream (an ``EnvSession`` or a ``PlayStream``, whose ``_stream`` it
    replaces) with its requests taken one at a time and a ``ping`` sent whenever the stream has
    been silent for ``interval`` seconds, until ``stop`` or the stream closes.

    Every request of the client object goes through ``request``, the pings included, so a ping
    never interleaves with the episode's own requests (or the llm-worker's renders). A ping
    that fails stops the pinging: the episode's next request meets the same failure and
    reports it.
    """

    def __init__(self, owner: EnvSession | PlayStream, ping: Any, interval: float) -> None:
        super().__init__(owner._stream._call)
        owner._stream = self
        self._ping = ping
        self._interval = interval
        self._lock = asyncio.Lock()
        self._last = time.monotonic()
        self._task: asyncio.Task[None] | None = asyncio.create_task(self._beat())

    async def request(self, message: Any, interim: Interim | None = None) -> Any:
        """Send ``message`` when no other request is in flight; returns its answer (the
        interim exchanges, see ``_Lockstep.request``, inside the same turn)."""
        async with self._lock:
            try:
                return await super().request(message, interim)
            finally:
                self._last = time.monotonic()

    async def _beat(self) -> None:
        while not self.closed:
            wait = self._last + self._interval - time.monotonic()
            if self._lock.locked():  # a request in flight: its end restarts the clock
                wait = max(wait, self._interval)
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            try:
                await self.request(self._ping)
            except (grpc.RpcError, StreamClosedError):  # gone: its next request reports why
                _log.debug("ping failed; no more pings on this stream", exc_info=True)
                return

    async def stop(self, grace_s: float = 10.0) -> None:
        """Stop pinging. A ping in flight is given up to ``grace_s`` seconds to be answered
        first, so that its answer is not left for the next request to read."""
        task, self._task = self._task, None
        if task is None or task.done():
            return
        try:
            async with asyncio.timeout(grace_s):
                await self._lock.acquire()
        except TimeoutError:
            task.cancel()
        else:
            task.cancel()
            self._lock.release()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def aclose(self, grace_s: float = 2.0) -> None:
        """Stop pinging, then close as ``_Lockstep.aclose``."""
        await self.stop()
        await super().aclose(grace_s)


def keep_alive(owner: EnvSession | PlayStream, idle_timeout_s: float) -> KeptAlive | None:
    """From now on, ping ``owner`` (an opened env session or a begun Play stream) whenever it
    has been silent for ``PING_FRACTION`` of ``idle_timeout_s``, the seconds its server
    announced (``OpenResponse.idle_timeout_s`` / ``Ready.idle_timeout_s``), until the stream is
    closed or ``KeptAlive.stop``. Returns None, pinging nothing, when the server announced
    none (0: a server from before ``ping``). Call it on the event loop that uses ``owner``."""
    if not idle_timeout_s > 0:
        return None
    ping = _ENV_PING if isinstance(owner, EnvSession) else pol_pb.PlayRequest(ping=pol_pb.Ping())
    return KeptAlive(owner, ping, idle_timeout_s * PING_FRACTION)


#: The request that keeps an env session alive (answered with ``pong``, no game work).
_ENV_PING = env_pb.SessionRequest(ping=env_pb.PingRequest())


class EnvSession:
    """One game instance on an env server (one ``Session`` stream)."""

    def __init__(self, call: Any):
        self._stream = _Lockstep(call)

    async def open(self, request: env_pb.OpenRequest) -> env_pb.OpenResponse:
        """Open the game. Raises AioRpcError (NOT_FOUND, RESOURCE_EXHAUSTED, UNAVAILABLE...)."""
        resp = await self._stream.request(env_pb.SessionRequest(open=request))
        return resp.opened

    async def step(self, actions: dict[str, types_pb2.Action]) -> env_pb.StepResponse:
        """Apply one action per acting agent."""
        resp = await self._stream.request(
            env_pb.SessionRequest(step=env_pb.StepRequest(actions=actions)))
        return resp.step

    async def reset(self, seed: int = 0) -> env_pb.ResetResponse:
        """Restart the game (seed 0: the Open seed)."""
        resp = await self._stream.request(
            env_pb.SessionRequest(reset=env_pb.ResetRequest(seed=seed)))
        return resp.reset

    async def ping(self) -> env_pb.PingResponse:
        """One round trip with no game work; the server's idle clock restarts (an opened
        session only: a ping before ``open`` ends the stream with FAILED_PRECONDITION)."""
        resp = await self._stream.request(_ENV_PING)
        return resp.pong

    async def render(self, encoding: Any = types_pb2.IMAGE_ENCODING_PNG) -> types_pb2.Image:
        """A full-state RGB frame."""
        resp = await self._stream.request(
            env_pb.SessionRequest(render=env_pb.RenderRequest(encoding=encoding)))
        return resp.render.image

    async def close(self) -> env_pb.CloseResponse | None:
        """Close politely; returns the final word, or None if the stream was already gone."""
        if self._stream.closed:
            return None
        try:
            resp = await self._stream.request(env_pb.SessionRequest(close=env_pb.CloseRequest()))
            return resp.closed
        except (grpc.aio.AioRpcError, StreamClosedError):
            return None
        finally:
            await self._stream.aclose()

    async def __aenter__(self) -> EnvSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class EnvClient:
    """Client of ``moria.env.v1.EnvService`` at ``target`` (``security``: None uses
    ``transport_for(target)``)."""

    def __init__(self, target: str, security: TransportSecurity | None = None):
        self.target = target
        self._stub = env_grpc.EnvServiceStub(channel_for(target, security))

    async def get_info(self, timeout: float = 10.0) -> env_pb.GetInfoResponse:
        """Versions, families, capacity and load."""
        return await self._stub.GetInfo(env_pb.GetInfoRequest(), timeout=timeout)

    async def list_tasks(self, family: str = "", timeout: float = 30.0,
                         ) -> list[env_pb.TaskInfo]:
        """Tasks of one family (or all)."""
        resp = await self._stub.ListTasks(env_pb.ListTasksRequest(family=family), timeout=timeout)
        return list(resp.tasks)

    def session(self) -> EnvSession:
        """A new Session stream (call ``open`` next)."""
        return EnvSession(self._stub.Session())


class PlayStream:
    """One agent's episode on a policy server (one ``Play`` stream)."""

    def __init__(self, call: Any):
        self._stream = _Lockstep(call)
        #: the server's idle timeout, from its Ready (0: none announced)
        self.idle_timeout_s = 0.0

    async def begin(self, begin: pol_pb.Begin) -> pol_pb.Ready:
        """Start the episode. Raises AioRpcError INVALID_ARGUMENT on a bad config."""
        resp = await self._stream.request(pol_pb.PlayRequest(begin=begin))
        self.idle_timeout_s = resp.ready.idle_timeout_s
        return resp.ready

    async def observe(self, observe: pol_pb.Observe,
                      grant: Callable[[pol_pb.Reserve], Awaitable[pol_pb.Grant]] | None = None,
                      ) -> pol_pb.Act:
        """One turn: observation in, decision out (check ``Act.error``). ``grant`` answers
        each ``reserve`` the server sends before a model call (``Begin.reserve_calls``); a
        server that sends one to a client without ``grant`` is refused. While ``grant`` is
        still deciding (waiting for a rate limit), the stream is pinged at ``PING_FRACTION`` of
        the server's idle timeout, so a long wait never ends it."""
        pending: asyncio.Future[pol_pb.Grant] | None = None
        interval = self.idle_timeout_s * PING_FRACTION

        async def interim(response: pol_pb.PlayResponse) -> pol_pb.PlayRequest | None:
            nonlocal pending
            kind = response.WhichOneof("response")
            if kind == "reserve":
                if grant is None:
                    return pol_pb.PlayRequest(grant=pol_pb.Grant(
                        granted=False,
                        reason="this client keeps no cost ledger (reserve_calls unset)"))
                pending = asyncio.ensure_future(grant(response.reserve))
            elif kind != "pong" or pending is None:
                return None
            if interval > 0:
                await asyncio.wait({pending}, timeout=interval)
            if not pending.done() and interval > 0:
                return pol_pb.PlayRequest(ping=pol_pb.Ping())  # answered by a pong
            answer, pending = await pending, None
            return pol_pb.PlayRequest(grant=answer)

        try:
            resp = await self._stream.request(pol_pb.PlayRequest(observe=observe), interim)
        finally:
            if pending is not None:
                pending.cancel()
        return resp.act

    async def end(self, episode_end: types_pb2.EpisodeEnd) -> pol_pb.Ended | None:
        """End the episode; None if the stream was already gone."""
        if self._stream.closed:
            return None
        try:
            resp = await self._stream.request(
                pol_pb.PlayRequest(end=pol_pb.End(episode_end=episode_end)))
            return resp.ended
        except (grpc.aio.AioRpcError, StreamClosedError):
            return None
        finally:
            await self._stream.aclose()

    async def aclose(self) -> None:
        """Abandon the stream without End."""
        await self._stream.aclose()


#: The target prefix of players a client plays itself, in its own process (``inproc:<name>``).
IN_PROCESS_PREFIX = "inproc:"


class InProcessPlayer(Protocol):
    """A player a client hosts itself, without a policy server (the MOSAIC worker's human
    seat): it answers what ``PolicyClient`` asks of a server, with the same messages."""

    def play(self) -> PlayStream:
        """A new stream for one seat's episode (``begin``, then ``observe`` per turn, ``end``)."""
        ...

    async def get_info(self, check: tuple[AgentConfig, ClientConfig] | None,
                       ) -> pol_pb.GetInfoResponse:
        """What ``PolicyService.GetInfo`` answers, ``config_errors`` judging ``check``."""
        ...


_IN_PROCESS: dict[str, InProcessPlayer] = {}


def serve_in_process(name: str, player: InProcessPlayer) -> str:
    """Make ``player`` reachable as the target ``inproc:<name>`` (by ``PolicyClient``, hence by
    episode plans and preflight checks) and return that target. Raises ValueError when the
    name is taken."""
    target = IN_PROCESS_PREFIX + name
    if target in _IN_PROCESS:
        raise ValueError(f"an in-process player is already served as {target!r}")
    _IN_PROCESS[target] = player
    return target


def stop_in_process(target: str) -> None:
    """Forget the in-process player at ``target`` (no error when there is none)."""
    _IN_PROCESS.pop(target, None)


class PolicyClient:
    """Client of ``moria.policy.v1.PolicyService`` at ``target`` (``security``: None uses
    ``transport_for(target)``), or of a player served in this process (``inproc:<name>``,
    ``serve_in_process``). Raises ValueError for an ``inproc:`` target nobody serves."""

    def __init__(self, target: str, security: TransportSecurity | None = None):
        self.target = target
        self._local: InProcessPlayer | None = None
        if target.startswith(IN_PROCESS_PREFIX):
            if target not in _IN_PROCESS:
                raise ValueError(f"no in-process player is served as {target!r}")
            self._local = _IN_PROCESS[target]
            return
        self._stub = pol_grpc.PolicyServiceStub(channel_for(target, security))

    async def get_info(self, check_config: dict[str, Any] | None = None,
                       timeout: float = 60.0, *,
                       check: tuple[AgentConfig, ClientConfig] | None = None,
                       ) -> pol_pb.GetInfoResponse:
        """Versions and capacity; with ``check`` (an agent and a client config) the server
        validates that config (``GetInfoRequest.check_agent`` / ``check_client``; only their
        set fields are sent). ``check_config`` sends a ``{"agent", "client"}`` dict in the
        deprecated Struct form instead, as clients before the typed settings did."""
        if self._local is not None:
            return await self._local.get_info(check)
        request = pol_pb.GetInfoRequest()
        if check is not None:
            agent, client = check
            request.check_agent.CopyFrom(agent_settings(agent))
            request.check_client.CopyFrom(client_settings(client))
        elif check_config is not None:
            request.check_config.CopyFrom(struct_from_dict(check_config))
        return await self._stub.GetInfo(request, timeout=timeout)

    def play(self) -> PlayStream:
        """A new Play stream (call ``begin`` next)."""
        if self._local is not None:
            return self._local.play()
        return PlayStream(self._stub.Play())
