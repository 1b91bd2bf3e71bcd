"""Server bootstrap shared by every Moria gRPC server.

Every server gets: ``grpc.health.v1`` health checking, server reflection, an explicit message
limit (64 MiB unless ``--max-message-mb``), HTTP/2 keepalive, and a graceful drain on
SIGTERM/SIGINT: health turns NOT_SERVING, new sessions are refused with UNAVAILABLE (servicers ask
``Drain.draining``), and running sessions get ``grace_s`` seconds to finish before the server
stops.

Optional transport security (``moria.security``): TLS or mTLS (``--tls-cert``, ``--tls-key``,
``--tls-client-ca``) and a bearer token (``--auth-token-env``); health and reflection share the
port and its credentials, and the health service stays open without a token (for probes).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import logging
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

import grpc
from google.protobuf.message import DecodeError
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from moria import aio, gc_tuning, malloc_tuning
from moria.grpc_defaults import DEFAULT_MAX_MESSAGE_MB, MAX_MESSAGE_BYTES, grpc_options
from moria.security import (
    SecurityConfigError,
    ServerSecurity,
    is_local_target,
    server_security_from_args,
)

log = logging.getLogger("moria.server")

#: Channel/server options with the default message limit (message limits and keepalive).
GRPC_OPTIONS: list[tuple[str, int]] = grpc_options()

#: Default idle timeout of an env Session and of a policy Play stream (seconds): one that sends
#: nothing for this long is ended with DEADLINE_EXCEEDED and its slot is freed, so a client that
#: opens streams and walks away holds a server for a minute at most. Clients that wait on
#: something else while a stream is open (the orchestrator while a model thinks) send the
#: protocol's ``ping`` at a fraction of the timeout the server announces.
DEFAULT_IDLE_TIMEOUT_S = 60.0

#: Longest error text a server sends (UTF-8 bytes), as a gRPC status message or an in-band
#: ``google.rpc.Status``: below 2 KiB, far below the transport's limit on trailing metadata.
MAX_ERROR_BYTES = 2000


def bounded_message(message: str, limit: int = MAX_ERROR_BYTES) -> str:
    """``message`` cut to at most ``limit`` UTF-8 bytes, ending ``… (+N bytes)`` when cut.

    The last guard behind ``moria.quoting``: quoted client input is already bounded there, and
    this keeps any other text (an exception from game or model code that echoes its input)
    from making a status too large for the transport. Never splits a character."""
    encoded = message.encode("utf-8", "replace")
    if len(encoded) <= limit:
        return message
    kept = encoded[: max(0, limit - 32)].decode("utf-8", "ignore")
    return f"{kept}… (+{len(encoded) - len(kept.encode('utf-8'))} bytes)"


class CallEnded(BaseException):
    """Raised by ``abort_call`` once the call's status is set on its context: it unwinds the
    handler (``finally`` blocks run; ``except Exception`` does not catch it) up to the
    ``RequestCheckInterceptor``, which ends the call there, normally, with that status.

    Why not ``context.abort``: grpc.aio keeps the ``AbortError`` it raises on the call's
    state (``RPCState.abort_exception``) and the error's traceback leads back to that state, a
    reference cycle that only a garbage collection frees. Until then the call stays alive in
    gRPC's core, with the requests it never read: a client that sends two 16 MiB Begins on one
    stream, the second refused, left an agent server holding 300 MB and more between two
    collections (the Play fuzzer, tests/fuzz)."""

    def __init__(self, code: grpc.StatusCode):
        super().__init__(code)
        self.code = code


async def abort_call(context: Any, code: grpc.StatusCode, message: str) -> NoReturn:
    """End a call with ``code`` and ``message`` (cut by ``bounded_message``), as
    ``context.abort`` would, but without its reference cycle (``CallEnded``): the status is set
    on the context and ``CallEnded`` is raised for the interceptor to end the call. When the
    call already ended under the server (the client hung up while the server was about to
    answer, e.g. a session reaped for idleness as its client went away), there is no one to
    tell: the handler ends as cancelled, with a log line instead of gRPC's traceback of the
    failed send. Handlers served without the interceptor must use ``context.abort``."""
    if context.done():
        log.info("call already ended (%s not sent): %s", code.name, message[:200])
        raise asyncio.CancelledError
    context.set_code(code)
    context.set_details(bounded_message(message))
    raise CallEnded(code)


def peer_of(context: Any) -> str:
    """The peer a call comes from, for per-peer limits: its address without the port
    (``ipv4:10.0.0.7``, ``ipv6:[::1]``); every unix-socket client is one peer (``unix:``): a
    socket's file permissions say who may connect."""
    peer = str(context.peer() or "")
    if peer.startswith("unix"):
        return "unix:"
    host, sep, port = peer.rpartition(":")  # the port is last, also after an IPv6 address
    return host if sep and port.isdigit() and ":" in host else peer


def default_peer_limit(capacity: int) -> int:
    """The most sessions or streams one peer may hold when the server sets no limit of its
    own: three quarters of ``capacity`` (at least 1), so one client cannot take every slot."""
    return max(1, capacity - capacity // 4)


class PeerSlots:
    """Capacity slots held per peer (``peer_of``), at most ``limit`` each."""

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError(f"a per-peer limit must be >= 1, got {limit}")
        self.limit = limit
        self._held: dict[str, int] = {}

    def claim(self, peer: str) -> bool:
        """Take a slot for ``peer``; False when it holds ``limit`` already."""
        held = self._held.get(peer, 0)
        if held >= self.limit:
            return False
        self._held[peer] = held + 1
        return True

    def release(self, peer: str) -> None:
        """Give back one of ``peer``'s slots."""
        held = self._held.get(peer, 0) - 1
        if held > 0:
            self._held[peer] = held
        else:
            self._held.pop(peer, None)

    def held(self, peer: str) -> int:
        """The slots ``peer`` holds now."""
        return self._held.get(peer, 0)


def add_peer_limit_argument(parser: Any, *, flag: str, what: str) -> None:
    """``flag N``: the most ``what`` one peer may hold (default: three quarters of the
    capacity, ``default_peer_limit``; 0: the whole capacity)."""
    parser.add_argument(flag, type=int, default=None, metavar="N",
                        help=f"the most {what} one client address may hold at once (default: "
                        "three quarters of --capacity, so one client cannot take every slot; "
                        "0: the whole capacity)")


def peer_limit_from_args(value: int | None, capacity: int) -> int:
    """The per-peer limit of a ``add_peer_limit_argument`` flag's value. Raises SystemExit
    for a negative one."""
    if value is None:
        return default_peer_limit(capacity)
    if value < 0:
        raise SystemExit(f"a per-peer limit must be >= 0 (0: the whole capacity), got {value}")
    return value or capacity


@dataclass
class Drain:
    """Shared drain state. ``draining`` flips to True when shutdown starts; ``active`` counts
    running sessions/streams (servicers increment/decrement it via ``track``)."""

    draining: bool = False
    active: int = 0
    _idle: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self._idle.set()

    @contextlib.contextmanager
    def track(self):  # type: ignore[no-untyped-def]
        """Context manager counting one active session."""
        self.active += 1
        self._idle.clear()
        try:
            yield
        finally:
            self.active -= 1
            if self.active == 0:
                self._idle.set()

    async def wait_idle(self, timeout: float) -> bool:
        """Wait until no session is active; False on timeout."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
            return True
        except TimeoutError:
            return False


@dataclass(frozen=True)
class RequestLimit:
    """The largest request message one method takes, in bytes, checked before the message is
    parsed. ``default``: for any message (None: the server's message limit). ``by_field``:
    for a request that is a oneof (a stream's ``PlayRequest``), the limit of each member by
    field number (None: the server's message limit); ``names``: their names, for messages.
    A message's limit is the smallest of the limits of its top-level fields (a well-formed
    oneof message has one; a hostile one with several gets the strictest), ``default`` for a
    field not listed. Build a oneof's with :meth:`for_oneof`."""

    default: int | None
    by_field: Mapping[int, int | None] = field(default_factory=dict)
    names: Mapping[int, str] = field(default_factory=dict)

    @classmethod
    def for_oneof(cls, message: Any, limits: Mapping[str, int | None],
                  default: int | None) -> RequestLimit:
        """The limit of a request message class whose members are named in ``limits``
        (member name -> bytes, None: the server's message limit); other members get
        ``default``. Raises KeyError for a name the message lacks."""
        fields = message.DESCRIPTOR.fields_by_name
        return cls(default, {fields[name].number: limit for name, limit in limits.items()},
                   {f.number: name for name, f in fields.items()})

    def largest(self, server_max: int) -> int:
        """The largest message any member may be (``server_max`` for None)."""
        limits = [self.default, *self.by_field.values()]
        return max(server_max if limit is None else min(limit, server_max) for limit in limits)

    def problem(self, data: bytes, server_max: int) -> str:
        """'' when ``data`` fits; else what is wrong, for a RESOURCE_EXHAUSTED status."""
        size = len(data)
        if size <= min(server_max if x is None else x
                       for x in (self.default, *self.by_field.values())):
            return ""  # fits whatever its kind: no need to read its tags
        numbers = _top_level_fields(data)
        if numbers is None:  # not a protobuf message: the parser says why
            return ""
        limits = [self.by_field.get(n, self.default) for n in numbers] or [self.default]
        limit = min(server_max if x is None else x for x in limits)
        if size <= limit:
            return ""
        kind = "/".join(self.names.get(n, "request") for n in dict.fromkeys(numbers)) or "empty"
        return (f"a {kind} message of {size:,} bytes; this server takes at most {limit:,} "
                f"bytes for it")


#: The most top-level fields ``_top_level_fields`` reads (a oneof message has one).
_MAX_TOP_LEVEL_FIELDS = 64


def _top_level_fields(data: bytes) -> list[int] | None:
    """The field numbers of ``data``'s top-level fields, in order, read from their tags
    without parsing their contents (a length-delimited field is skipped by its length); None
    for bytes that are not a protobuf message, or more than ``_MAX_TOP_LEVEL_FIELDS``."""
    numbers: list[int] = []
    position, end = 0, len(data)
    while position < end:
        if len(numbers) >= _MAX_TOP_LEVEL_FIELDS:
            return None
        tag, position = _varint(data, position)
        if tag is None:
            return None
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            _, position = _varint(data, position)
        elif wire == 1:
            position += 8
        elif wire == 2:
            length, position = _varint(data, position)
            if length is None:
                return None
            position += length
        elif wire == 5:
            position += 4
        else:  # groups are not in proto3
            return None
        if position is None or position > end:
            return None
        numbers.append(number)
    return numbers


def _varint(data: bytes, position: int) -> tuple[int | None, int]:
    """The varint at ``data[position:]`` and the position after it ((None, position) when it
    runs past the end or past 10 bytes)."""
    value = shift = 0
    for index in range(position, min(position + 10, len(data))):
        byte = data[index]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, index + 1
        shift += 7
    return None, position


class _Refused:
    """What a request deserializer gives instead of raising, for bytes it will not parse:
    the status the call ends with (INVALID_ARGUMENT for bytes that do not parse, e.g. too
    deep; RESOURCE_EXHAUSTED for a message over its method's ``RequestLimit``)."""

    def __init__(self, code: grpc.StatusCode, message: str):
        self.code = code
        self.message = message


class _CheckedReads:
    """A servicer context whose ``read()`` ends the call with the ``_Refused`` status of a
    message that was refused; everything else is the wrapped context's."""

    def __init__(self, context: Any):
        self._context = context

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)

    async def read(self) -> Any:
        """The next request (or ``grpc.aio.EOF``)."""
        request = await self._context.read()
        if isinstance(request, _Refused):
            await abort_call(self._context, request.code, request.message)
        return request


def _without_frames(exc: grpc.aio.AbortError) -> grpc.aio.AbortError:
    """``exc`` without the frames it was raised through and without the exception it was
    raised in handling, for the interceptor to raise again from its own frame: a handler's
    ``AbortError`` (``context.abort``) leaves the call that way. grpc.aio keeps the
    error on the call's state (``RPCState.abort_exception``), and its traceback leads back to
    that state: a reference cycle, freed only by a collection of the cyclic garbage collector.
    Through the handler's frames (and, by ``__context__``, the traceback of the exception it
    answered, e.g. a TaskNotFoundError raised on the game pool) that cycle held the call's
    request until then: 40 MB of 1 MB refused Opens between two collections (gen0 threshold
    ``gc_tuning.GEN0_THRESHOLD``). Re-raised by the interceptor, the error's traceback starts
    at its frame, which holds no request."""
    exc.__context__ = None
    return exc.with_traceback(None)


class RequestCheckInterceptor(grpc.aio.ServerInterceptor):
    """Checks every request message before it is parsed and refuses it without parsing: over
    its method's ``RequestLimit`` (``limits``: full method name, e.g.
    ``/moria.env.v1.EnvService/Session``, -> limit; methods not listed get only the server's
    limit ``server_max``) with RESOURCE_EXHAUSTED naming the size and the limit; bytes that do
    not parse (e.g. a Struct nested past protobuf's depth limit) with INVALID_ARGUMENT naming
    the parse error, where gRPC itself would answer UNKNOWN. Unary requests are refused before
    the handler runs, streamed ones at the handler's ``context.read()`` of that message
    (Moria's stream handlers read through the context)."""

    def __init__(self, limits: Mapping[str, RequestLimit] | None = None,
                 server_max: int = MAX_MESSAGE_BYTES):
        self.limits = dict(limits or {})
        self.server_max = server_max

    async def intercept_service(self, continuation: Any,
                                handler_call_details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        parse = handler.request_deserializer
        limit = self.limits.get(handler_call_details.method)
        server_max = self.server_max

        def deserialize(data: bytes) -> Any:
            if limit is not None:
                problem = limit.problem(data, server_max)
                if problem:
                    return _Refused(grpc.StatusCode.RESOURCE_EXHAUSTED, problem)
            try:
                return parse(data)
            except DecodeError as exc:
                return _Refused(grpc.StatusCode.INVALID_ARGUMENT,
                                f"the request does not parse: {exc}")

        options = {"request_deserializer": deserialize,
                   "response_serializer": handler.response_serializer}
        if handler.request_streaming:
            behaviour = (handler.stream_stream if handler.response_streaming
                         else handler.stream_unary)
            if not inspect.iscoroutinefunction(behaviour):
                return handler  # a generator handler (reflection) reads its own iterator

            async def checked(request_iterator: Any, context: Any) -> Any:
                try:
                    return await behaviour(request_iterator, _CheckedReads(context))
                except CallEnded:
                    return None  # the status is set on the context (abort_call)
                except grpc.aio.AbortError as exc:
                    raise _without_frames(exc) from None

            if handler.response_streaming:
                return grpc.stream_stream_rpc_method_handler(checked, **options)
            return grpc.stream_unary_rpc_method_handler(checked, **options)
        if handler.response_streaming:
            unary_stream = handler.unary_stream
            if not inspect.isasyncgenfunction(unary_stream):
                return handler  # writes through its context: left as gRPC serves it

            async def streamed(request: Any, context: Any) -> Any:
                try:
                    if isinstance(request, _Refused):
                        await abort_call(context, request.code, request.message)
                    async for response in unary_stream(request, context):
                        yield response
                except CallEnded:
                    return  # the status is set on the context (abort_call)
                except grpc.aio.AbortError as exc:
                    raise _without_frames(exc) from None

            return grpc.unary_stream_rpc_method_handler(streamed, **options)
        unary_unary = handler.unary_unary

        async def unary(request: Any, context: Any) -> Any:
            try:
                if isinstance(request, _Refused):
                    await abort_call(context, request.code, request.message)
                return await unary_unary(request, context)
            except CallEnded:
                return None  # the status is set on the context: gRPC sends no response
            except grpc.aio.AbortError as exc:
                raise _without_frames(exc) from None

        return grpc.unary_unary_rpc_method_handler(unary, **options)


def method_path(service: Any, method: str) -> str:
    """The full method name gRPC routes by (``/package.Service/Method``) of ``method`` of the
    service descriptor ``service`` (``<module>_pb2.DESCRIPTOR.services_by_name[...]``).
    Raises KeyError for a method the service lacks."""
    return f"/{service.full_name}/{service.methods_by_name[method].name}"


# A function that registers one servicer on a server, e.g.
# ``lambda s: env_service_pb2_grpc.add_EnvServiceServicer_to_server(servicer, s)``.
Registrar = Callable[[grpc.aio.Server], None]


class MoriaServer:
    """A grpc.aio server with health, reflection, limits, keepalive and graceful drain.

    ``service_names`` are the fully qualified services registered (for health and reflection).
    ``address`` is e.g. ``127.0.0.1:0`` (ephemeral port, read ``port`` after ``start``) or
    ``unix:///tmp/x.sock``. ``security``: TLS/mTLS credentials and the bearer-token interceptor
    (None: plaintext, no token). ``max_message_bytes``: the send/receive limit per message.
    ``request_limits``: full method name -> ``RequestLimit``, the largest request each method
    takes (checked before parsing, ``RequestCheckInterceptor``); with them, gRPC itself
    refuses a request larger than the largest of them before it is read into Python.
    Raises SecurityConfigError when a TLS file cannot be read.
    """

    def __init__(self, registrars: Iterable[Registrar], service_names: Iterable[str], *,
                 address: str, drain: Drain, grace_s: float = 30.0,
                 security: ServerSecurity | None = None,
                 max_message_bytes: int = MAX_MESSAGE_BYTES,
                 request_limits: Mapping[str, RequestLimit] | None = None):
        self.service_names = list(service_names)
        self.address = address
        self.drain = drain
        self.grace_s = grace_s
        self.port: int = 0
        self.security = security or ServerSecurity()
        self.max_message_bytes = max_message_bytes
        self._credentials = self.security.credentials() if self.security.tls else None
        options = grpc_options(max_message_bytes)
        if request_limits:
            largest = max(limit.largest(max_message_bytes) for limit in request_limits.values())
            options = [(k, largest if k == "grpc.max_receive_message_length" else v)
                       for k, v in options]
        self._server = grpc.aio.server(
            options=options,
            interceptors=[*self.security.interceptors(),
                          RequestCheckInterceptor(request_limits, max_message_bytes)])
        for register in registrars:
            register(self._server)
        self._health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        reflection.enable_server_reflection(
            [*self.service_names, health.SERVICE_NAME, reflection.SERVICE_NAME], self._server)
        self._stopped = asyncio.Event()

    async def start(self) -> None:
        """Bind and start serving; health becomes SERVING for every service."""
        if self._credentials is not None:
            self.port = self._server.add_secure_port(self.address, self._credentials)
        else:
            self.port = self._server.add_insecure_port(self.address)
        if self.port == 0 and not self.address.startswith("unix:"):
            raise OSError(f"could not bind {self.address}")
        await self._server.start()
        for name in ["", *self.service_names]:
            await self._health.set(name, health_pb2.HealthCheckResponse.SERVING)
        if (self.security.token is not None and not self.security.tls
                and not is_local_target(self.address)):
            log.warning("bearer-token auth without TLS on %s: clients only send a token in "
                        "clear text to loopback or unix targets", self.address)
        log.info("serving %s on %s (%s, max message %d MiB)", ", ".join(self.service_names),
                 self.bound_address, self.security.describe(),
                 self.max_message_bytes // (1024 * 1024))

    @property
    def bound_address(self) -> str:
        """The address clients should dial (with the real port for TCP)."""
        if self.address.startswith("unix:"):
            return self.address
        host = self.address.rsplit(":", 1)[0]
        return f"{host}:{self.port}"

    async def shutdown(self) -> None:
        """Graceful drain: NOT_SERVING, refuse new sessions, wait up to ``grace_s`` for running
        ones, then stop. Safe to call twice."""
        if self.drain.draining:
            await self._stopped.wait()
            return
        self.drain.draining = True
        await self._health.enter_graceful_shutdown()
        log.info("draining: %d active session(s), grace %.0fs", self.drain.active, self.grace_s)
        finished = await self.drain.wait_idle(self.grace_s)
        if not finished:
            log.warning("grace period over with %d session(s) still active", self.drain.active)
        await self._server.stop(grace=1.0)
        self._stopped.set()

    async def wait_for_termination(self) -> None:
        """Serve until SIGTERM/SIGINT, then drain."""
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        waiter = asyncio.create_task(self._server.wait_for_termination())
        stopper = asyncio.create_task(stop.wait())
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            await self.shutdown()
        for task in (waiter, stopper):
            task.cancel()


#: HTTP client libraries that log one INFO line per request (one per model call): kept at
#: WARNING unless the server logs at DEBUG.
PER_REQUEST_LOGGERS = ("httpx", "httpx2", "httpcore", "httpcore2")


def configure_logging(level: str = "INFO") -> None:
    """Logs go to stderr (results and telemetry go to files)."""
    logging.basicConfig(level=level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        for name in PER_REQUEST_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)


def add_server_arguments(parser: Any, *, default_address: str) -> None:
    """The flags every server shares: --address, --grace, --log-level, --max-message-mb and the
    transport security flags --tls-cert, --tls-key, --tls-client-ca, --auth-token-env."""
    parser.add_argument("--address", default=default_address,
                        help="host:port (port 0 = ephemeral) or unix:///path.sock")
    parser.add_argument("--grace", type=float, default=30.0,
                        help="drain grace period on SIGTERM (seconds)")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--max-message-mb", type=int, default=DEFAULT_MAX_MESSAGE_MB,
                        help="largest gRPC message accepted or sent (MiB; clients must use the "
                        "same or a smaller limit)")
    parser.add_argument("--tls-cert", default=None, metavar="PEM",
                        help="serve TLS with this certificate chain (needs --tls-key)")
    parser.add_argument("--tls-key", default=None, metavar="PEM",
                        help="private key of --tls-cert")
    parser.add_argument("--tls-client-ca", default=None, metavar="PEM",
                        help="mTLS: require client certificates signed by this CA")
    parser.add_argument("--auth-token-env", default=None, metavar="NAME",
                        help="require 'authorization: Bearer <token>' on every call except "
                        "health; the token is read from environment variable NAME")
    parser.add_argument("--metrics-address", default=None, metavar="HOST:PORT",
                        help="serve Prometheus /metrics over HTTP on this address (port 0 = "
                        "ephemeral; the bound address is printed as 'METRICS host:port' on "
                        "stderr); off when not given")


def _positive_seconds(text: str) -> float:
    """argparse type: a finite number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value


def add_idle_timeout_argument(parser: Any, *, what: str) -> None:
    """``--idle-timeout SECONDS`` (default ``DEFAULT_IDLE_TIMEOUT_S``): ``what`` (e.g. "Play
    streams") that send nothing for this long are ended with DEADLINE_EXCEEDED."""
    parser.add_argument(
        "--idle-timeout", type=_positive_seconds, default=DEFAULT_IDLE_TIMEOUT_S,
        metavar="SECONDS",
        help=f"end {what} that send nothing for this long with DEADLINE_EXCEEDED and free their "
        f"slot (default {DEFAULT_IDLE_TIMEOUT_S:g}; the orchestrator pings open ones while it "
        "waits on a model or the env, so a long model call is not idle)")


def server_options_from_args(args: Any) -> dict[str, Any]:
    """``MoriaServer`` keyword arguments from the shared flags: ``security`` and
    ``max_message_bytes``. Raises SystemExit with a clear message on a bad setting (the token
    itself is never printed)."""
    mb = int(getattr(args, "max_message_mb", DEFAULT_MAX_MESSAGE_MB))
    if not 1 <= mb <= 2047:
        raise SystemExit(f"--max-message-mb must be between 1 and 2047 (got {mb})")
    try:
        security = server_security_from_args(args)
        if security.tls:
            security.credentials()  # fail now on an unreadable file
    except SecurityConfigError as exc:
        raise SystemExit(f"error: {exc}") from None
    return {"security": security, "max_message_bytes": mb * 1024 * 1024}


async def run_until_signalled(server: MoriaServer,
                              on_stop: Callable[[], Awaitable[None] | None] | None = None,
                              ) -> None:
    """Start ``server``, print ``READY <address>`` on stderr (the local-stack launcher waits
    for health, this line is for humans), serve until SIGTERM/SIGINT, drain, then run
    ``on_stop``."""
    await server.start()
    gc_tuning.freeze()  # what the server serves with is imported and built by now
    print(f"READY {server.bound_address}", file=sys.stderr, flush=True)
    try:
        await server.wait_for_termination()
    finally:
        if on_stop is not None:
            result = on_stop()
            if result is not None:
                await result


def _stop_before_serving(signum: int, frame: object) -> NoReturn:
    raise SystemExit(0)


def stop_on_sigterm_until_serving() -> None:
    """Make SIGTERM end the process at once (exit 0) until ``wait_for_termination`` installs
    the draining handler: there is nothing to drain before the server serves. Without this a
    server that is PID 1 of its container (Kubernetes, or an engine without ``init``) ignores
    SIGTERM while it starts (the kernel drops signals PID 1 has no handler for), and is killed
    only when the stop grace period ends."""
    signal.signal(signal.SIGTERM, _stop_before_serving)


def server_main(build_parser: Callable[[], Any],
                serve: Callable[[Any], Coroutine[Any, Any, None]],
                argv: list[str] | None = None) -> int:
    """Shared entry point of ``python -m env_server|agent_server [serve] [flags]``: parse the
    flags, log to stderr, serve until signalled. Returns the exit code."""
    stop_on_sigterm_until_serving()
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] == "serve":
        args_list = args_list[1:]
    args = build_parser().parse_args(args_list)
    configure_logging(args.log_level)
    gc_tuning.tune()
    malloc_tuning.pin_mmap_threshold()
    aio.run(serve(args))
    return 0
