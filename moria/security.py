"""Transport security for Moria's gRPC servers and clients: TLS, mTLS and a bearer token.

Everything here is optional; plaintext without a token stays the default (loopback, unix sockets,
a private Compose network).

Servers (``moria serve env|agent`` flags, see ``moria.server.add_server_arguments``):

- ``--tls-cert PEM --tls-key PEM`` serve TLS; ``--tls-client-ca PEM`` also demands a client
  certificate signed by that CA (mTLS). Health and reflection share the port and credentials.
- ``--auth-token-env NAME``: every call must carry ``authorization: Bearer <token>`` metadata,
  where the token is the value of the environment variable ``NAME`` (the flag holds the name,
  never the token). Calls without it, or with another token, end with UNAUTHENTICATED. The
  ``grpc.health.v1.Health`` service is exempt so that container and Kubernetes probes (which
  cannot send a token) keep working; it reveals only SERVING/NOT_SERVING.

Clients (``TransportSecurity``; ``moria.clients.configure_transport`` applies one process-wide):

- ``TlsConfig`` names the CA to trust (None: the system roots), the client certificate and key
  for mTLS and an optional server-name override.
- A token goes in call credentials on TLS channels. On a plaintext channel it is added by a client
  interceptor, and only for loopback or unix-socket targets: anything else raises
  ``SecurityConfigError`` rather than send the token in clear text.

The token is held as ``pydantic.SecretStr``: it never appears in a repr, a log line, an error
message or a saved spec.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from moria.grpc_defaults import DEFAULT_MAX_MESSAGE_MB, grpc_options
from moria.quoting import quote

log = logging.getLogger("moria.security")

#: The gRPC service probes may call without a token.
HEALTH_SERVICE_PREFIX = "/grpc.health.v1.Health/"


class SecurityConfigError(ValueError):
    """A TLS/token setting is unusable (missing file, missing env var, token over plaintext to a
    remote host). The message names the file, variable or target, never the token."""


class TlsConfig(BaseModel):
    """Client-side TLS settings (all paths to PEM files).

    ``ca_cert``: the CA that signed the server certificate (None: the system trust store).
    ``client_cert``/``client_key``: this client's certificate chain and key, for servers that
    demand mTLS (give both or neither). ``server_name``: the host name to check the server
    certificate against instead of the one in the target (e.g. when dialling an IP address).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    ca_cert: str | None = None
    client_cert: str | None = None
    client_key: str | None = None
    server_name: str | None = None

    @model_validator(mode="after")
    def _pair(self) -> TlsConfig:
        if (self.client_cert is None) != (self.client_key is None):
            raise ValueError("client_cert and client_key go together: give both or neither")
        return self


class TransportSecurity(BaseModel):
    """How a client reaches one server: ``tls`` (None: plaintext), ``token`` (None: no bearer
    token) and the message size limit ``max_message_mb`` (MiB, both directions)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tls: TlsConfig | None = None
    token: SecretStr | None = None
    max_message_mb: int = Field(default=DEFAULT_MAX_MESSAGE_MB, ge=1, le=2047)

    def fingerprint(self) -> tuple[Any, ...]:
        """A hashable key telling channels built from different settings apart (the token is
        compared by value but only kept in memory)."""
        token = self.token.get_secret_value() if self.token is not None else None
        return (self.tls, token, self.max_message_mb)


def read_pem(path: str | os.PathLike[str], what: str) -> bytes:
    """The bytes of a PEM file; raises SecurityConfigError naming ``what`` and the path."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise SecurityConfigError(f"cannot read {what} {quote(str(path), 200)}: "
                                  f"{exc.strerror}") from None
    if b"-----BEGIN" not in data:
        raise SecurityConfigError(f"{what} {quote(str(path), 200)} is not a PEM file")
    return data


def token_from_env(name: str) -> SecretStr:
    """The bearer token held by environment variable ``name``.

    Raises SecurityConfigError when the variable is unset or empty (naming the variable only).
    """
    value = os.environ.get(name, "")
    if not value.strip():
        raise SecurityConfigError(f"environment variable {name!r} (the bearer token) is unset "
                                  "or empty")
    return SecretStr(value.strip())


def transport_security(tls: TlsConfig | None = None, token_env: str | None = None, *,
                       max_message_mb: int = DEFAULT_MAX_MESSAGE_MB) -> TransportSecurity:
    """Client settings from a run spec's ``endpoints`` section: ``token_env`` is the name of the
    variable holding the token (read now). Raises SecurityConfigError."""
    token = token_from_env(token_env) if token_env else None
    return TransportSecurity(tls=tls, token=token, max_message_mb=max_message_mb)


def is_local_target(target: str) -> bool:
    """True for unix sockets and loopback TCP targets, where a plaintext token does not leave
    the machine: ``unix:``/``unix-abstract:``, ``127.x.x.x``, ``localhost`` and ``[::1]``
    (bare, ``ipv4:``/``ipv6:`` or ``dns:///`` forms; every address of a comma list)."""
    t = target.strip().lower()
    if t.startswith(("unix:", "unix-abstract:")):
        return True
    for prefix in ("dns:///", "dns:", "ipv4:", "ipv6:"):
        if t.startswith(prefix):
            t = t[len(prefix):]
            break
    return all(_is_loopback_host(_host_of(part)) for part in t.split(","))


def _host_of(address: str) -> str:
    address = address.strip()
    if address.startswith("["):
        return address[1:].split("]", 1)[0]
    if address.count(":") > 1:  # a bare IPv6 address without a port
        return address
    return address.rsplit(":", 1)[0]


def _is_loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # another host name: it may resolve anywhere


def channel_credentials(tls: TlsConfig, token: SecretStr | None = None,
                        ) -> grpc.ChannelCredentials:
    """SSL channel credentials for ``tls`` (CA, optional client cert/key), composed with the
    bearer ``token`` as call credentials when given. Raises SecurityConfigError for an
    unreadable file."""
    root = read_pem(tls.ca_cert, "tls.ca_cert") if tls.ca_cert else None
    key = read_pem(tls.client_key, "tls.client_key") if tls.client_key else None
    chain = read_pem(tls.client_cert, "tls.client_cert") if tls.client_cert else None
    creds = grpc.ssl_channel_credentials(root_certificates=root, private_key=key,
                                         certificate_chain=chain)
    if token is not None:
        creds = grpc.composite_channel_credentials(
            creds, grpc.access_token_call_credentials(token.get_secret_value()))
    return creds


def channel_options(security: TransportSecurity | None) -> list[tuple[str, Any]]:
    """Channel options: Moria's message limits and keepalive, plus the TLS server-name
    override."""
    mb = security.max_message_mb if security is not None else DEFAULT_MAX_MESSAGE_MB
    options: list[tuple[str, Any]] = list(grpc_options(mb * 1024 * 1024))
    if security is not None and security.tls is not None and security.tls.server_name:
        options.append(("grpc.ssl_target_name_override", security.tls.server_name))
    return options


def open_channel(target: str, security: TransportSecurity | None = None) -> grpc.aio.Channel:
    """A new grpc.aio channel to ``target`` under ``security`` (None: plaintext, no token).

    Raises SecurityConfigError when a token would travel in clear text to a non-local target,
    or a TLS file cannot be read.
    """
    options = channel_options(security)
    if target.startswith("dns:"):
        # a DNS name for several replicas (a headless Service): spread calls over every
        # address it resolves to instead of pinning the first one
        options.append(("grpc.lb_policy_name", "round_robin"))
    if security is not None and security.tls is not None:
        return grpc.aio.secure_channel(target, channel_credentials(security.tls, security.token),
                                       options=options)
    if security is not None and security.token is not None:
        if not is_local_target(target):
            raise SecurityConfigError(
                f"refusing to send the bearer token over plaintext to {target!r}: configure TLS "
                "(endpoints.tls) for non-loopback targets")
        return grpc.aio.insecure_channel(
            target, options=options, interceptors=bearer_client_interceptors(security.token))
    return grpc.aio.insecure_channel(target, options=options)


# ----------------------------------------------------------------------------- client interceptor


def _with_token(details: grpc.aio.ClientCallDetails, header: str) -> grpc.aio.ClientCallDetails:
    metadata = grpc.aio.Metadata(*(tuple(details.metadata or ())))
    metadata.add("authorization", header)
    return grpc.aio.ClientCallDetails(details.method, details.timeout, metadata,
                                      details.credentials, details.wait_for_ready)


class _BearerHeader:
    """Holds the header value; hides it from repr. Not an interceptor itself: grpc.aio files
    each interceptor under the first call kind it subclasses, so each kind gets its own class."""

    def __init__(self, header: str):
        self._header = header

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


class _BearerUnaryUnary(_BearerHeader, grpc.aio.UnaryUnaryClientInterceptor):
    async def intercept_unary_unary(self, continuation: Any, client_call_details: Any,
                                    request: Any) -> Any:
        return await continuation(_with_token(client_call_details, self._header), request)


class _BearerUnaryStream(_BearerHeader, grpc.aio.UnaryStreamClientInterceptor):
    async def intercept_unary_stream(self, continuation: Any, client_call_details: Any,
                                     request: Any) -> Any:
        return await continuation(_with_token(client_call_details, self._header), request)


class _BearerStreamUnary(_BearerHeader, grpc.aio.StreamUnaryClientInterceptor):
    async def intercept_stream_unary(self, continuation: Any, client_call_details: Any,
                                     request_iterator: Any) -> Any:
        return await continuation(_with_token(client_call_details, self._header),
                                  request_iterator)


class _BearerStreamStream(_BearerHeader, grpc.aio.StreamStreamClientInterceptor):
    async def intercept_stream_stream(self, continuation: Any, client_call_details: Any,
                                      request_iterator: Any) -> Any:
        return await continuation(_with_token(client_call_details, self._header),
                                  request_iterator)


def bearer_client_interceptors(token: SecretStr) -> list[grpc.aio.ClientInterceptor]:
    """Client interceptors adding ``authorization: Bearer <token>`` to every call (all four
    call kinds), for plaintext loopback channels where call credentials are not allowed."""
    header = f"Bearer {token.get_secret_value()}"
    return [_BearerUnaryUnary(header), _BearerUnaryStream(header),
            _BearerStreamUnary(header), _BearerStreamStream(header)]


# ----------------------------------------------------------------------------- server side


class ServerSecurity(BaseModel):
    """Server-side settings: PEM paths ``tls_cert``/``tls_key`` (TLS on), ``tls_client_ca``
    (mTLS: clients must present a certificate it signed) and the expected bearer ``token``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    token: SecretStr | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ServerSecurity:
        problem = _server_flags_problem(self.tls_cert, self.tls_key, self.tls_client_ca)
        if problem:
            raise ValueError(problem)
        return self

    @property
    def tls(self) -> bool:
        """True when the server speaks TLS."""
        return self.tls_cert is not None

    def credentials(self) -> grpc.ServerCredentials:
        """``grpc.ssl_server_credentials`` for the configured files (client certificates
        required when ``tls_client_ca`` is set). Raises SecurityConfigError."""
        if self.tls_cert is None or self.tls_key is None:
            raise SecurityConfigError("TLS is not configured")
        pair = (read_pem(self.tls_key, "--tls-key"), read_pem(self.tls_cert, "--tls-cert"))
        client_ca = (read_pem(self.tls_client_ca, "--tls-client-ca")
                     if self.tls_client_ca else None)
        return grpc.ssl_server_credentials([pair], root_certificates=client_ca,
                                           require_client_auth=client_ca is not None)

    def interceptors(self) -> list[grpc.aio.ServerInterceptor]:
        """The bearer-token interceptor when a token is set, else none."""
        return [BearerTokenInterceptor(self.token)] if self.token is not None else []

    def describe(self) -> str:
        """A log-safe summary, e.g. ``"mTLS, bearer token"`` (never the token)."""
        parts = ["mTLS" if self.tls_client_ca else "TLS" if self.tls else "plaintext"]
        if self.token is not None:
            parts.append("bearer token")
        return ", ".join(parts)


def server_security_from_args(args: Any) -> ServerSecurity:
    """``ServerSecurity`` from the shared server flags (``--tls-cert``, ``--tls-key``,
    ``--tls-client-ca``, ``--auth-token-env``). Raises SecurityConfigError."""
    cert, key = getattr(args, "tls_cert", None), getattr(args, "tls_key", None)
    problem = _server_flags_problem(cert, key, getattr(args, "tls_client_ca", None))
    if problem:
        raise SecurityConfigError(problem)
    token_env = getattr(args, "auth_token_env", None)
    return ServerSecurity(tls_cert=getattr(args, "tls_cert", None),
                          tls_key=getattr(args, "tls_key", None),
                          tls_client_ca=getattr(args, "tls_client_ca", None),
                          token=token_from_env(token_env) if token_env else None)


def _server_flags_problem(cert: str | None, key: str | None, client_ca: str | None) -> str:
    if (cert is None) != (key is None):
        return "--tls-cert and --tls-key go together: give both or neither"
    if client_ca is not None and cert is None:
        return "--tls-client-ca (mTLS) needs --tls-cert and --tls-key"
    return ""


class BearerTokenInterceptor(grpc.aio.ServerInterceptor):
    """Rejects every call lacking ``authorization: Bearer <token>`` with UNAUTHENTICATED.

    The scheme is matched case-insensitively (``bearer``, ``BEARER``: RFC 7235 section 2.1)
    and may be followed by more than one space; the token itself must match exactly. The
    token comparison is constant-time (``hmac.compare_digest``). Methods whose full name starts
    with one of ``open_prefixes`` (default: the health service, so probes work) pass without a
    token. The rejection message never echoes what the client sent.
    """

    def __init__(self, token: SecretStr, open_prefixes: Sequence[str] = (HEALTH_SERVICE_PREFIX,)):
        self._expected = token.get_secret_value().encode()
        self._open = tuple(open_prefixes)

    def __repr__(self) -> str:
        return "<BearerTokenInterceptor>"

    def authorized(self, metadata: Sequence[Any] | None) -> bool:
        """True when ``metadata`` holds exactly the expected authorization value."""
        ok = False
        for key, value in metadata or ():
            if key.lower() != "authorization":
                continue
            given = value.encode() if isinstance(value, str) else bytes(value)
            # Always compare every authorization entry (no early exit on the first mismatch).
            token = bearer_credentials(given)
            ok = (token is not None and hmac.compare_digest(token, self._expected)) or ok
        return ok

    async def intercept_service(self, continuation: Any,
                                handler_call_details: grpc.HandlerCallDetails) -> Any:
        method = handler_call_details.method or ""
        if method.startswith(self._open) or self.authorized(
                handler_call_details.invocation_metadata):
            return await continuation(handler_call_details)
        handler = await continuation(handler_call_details)
        if handler is None:
            return None  # unknown method: let gRPC answer UNIMPLEMENTED
        return _deny_handler(handler)


def bearer_credentials(value: bytes) -> bytes | None:
    """The token of an ``authorization`` value in the ``Bearer`` scheme, else None.

    RFC 7235 (2.1): the auth-scheme is a case-insensitive token followed by one or more spaces
    and the credentials, so ``Bearer t``, ``bearer t`` and ``BEARER  t`` all give ``t``;
    ``Basic t`` or a bare ``t`` give None."""
    scheme, sep, rest = value.partition(b" ")
    if not sep or scheme.lower() != b"bearer":
        return None
    return rest.lstrip(b" ")


async def _deny(request: Any, context: grpc.aio.ServicerContext) -> None:
    await context.abort(grpc.StatusCode.UNAUTHENTICATED,
                        "missing or invalid bearer token (metadata 'authorization: Bearer ...')")


def _deny_handler(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """A handler of the same kind as ``handler`` that aborts with UNAUTHENTICATED."""
    kwargs = {"request_deserializer": handler.request_deserializer,
              "response_serializer": handler.response_serializer}
    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(_deny, **kwargs)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(_deny, **kwargs)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(_deny, **kwargs)
    return grpc.unary_unary_rpc_method_handler(_deny, **kwargs)
