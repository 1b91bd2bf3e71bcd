"""Container health check: ask a Moria server's ``grpc.health.v1`` service whether it serves.

Usage: ``python grpc_health_probe.py HOST:PORT [SERVICE] [--timeout SECONDS]
[--tls-ca PEM [--server-name NAME] [--tls-cert PEM --tls-key PEM]]``

With ``--tls-ca`` it speaks TLS, trusting that CA (the server's certificate must name
``--server-name``, default the host of HOST:PORT); ``--tls-cert``/``--tls-key`` add a client
certificate for servers that require mTLS. Kubernetes' native gRPC probes cannot speak TLS, so
the ``tls`` overlay (deploy/k8s/overlays/tls) runs this script as an exec probe instead.

Exit status (what Docker's HEALTHCHECK reads): 0 when the server answers SERVING for
``SERVICE`` (default ``""``, the whole server); 1 when it answers anything else (NOT_SERVING
while it drains after SIGTERM, SERVICE_UNKNOWN) or cannot be reached within the timeout
(default 3 s). One line on stdout says which.

It uses only grpcio and grpcio-health-checking, which every Moria image already carries, so no
extra binary is downloaded into the images. It writes nothing to disk.
"""

from __future__ import annotations

import argparse
import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def _read(path: str | None) -> bytes | None:
    if path is None:
        return None
    with open(path, "rb") as handle:
        return handle.read()


def open_channel(target: str, tls_ca: str | None = None, server_name: str | None = None,
                 tls_cert: str | None = None, tls_key: str | None = None) -> grpc.Channel:
    """A plaintext channel to ``target``, or a TLS one when ``tls_ca`` (PEM path) is given;
    ``server_name`` overrides the name checked in the server's certificate, ``tls_cert`` and
    ``tls_key`` (PEM paths) are the client certificate for mTLS. Raises OSError for an
    unreadable file."""
    if tls_ca is None:
        return grpc.insecure_channel(target)
    creds = grpc.ssl_channel_credentials(root_certificates=_read(tls_ca),
                                         private_key=_read(tls_key),
                                         certificate_chain=_read(tls_cert))
    options = [("grpc.ssl_target_name_override", server_name)] if server_name else []
    return grpc.secure_channel(target, creds, options=options)


def probe(target: str, service: str = "", timeout: float = 3.0, *,
          tls_ca: str | None = None, server_name: str | None = None,
          tls_cert: str | None = None, tls_key: str | None = None) -> tuple[bool, str]:
    """Check ``target`` (``host:port`` or ``unix:///path``) once, over TLS when ``tls_ca`` is
    given (see ``open_channel``).

    Returns ``(serving, status_name)``; ``status_name`` is the health status (``SERVING``,
    ``NOT_SERVING``, ...) or the gRPC error code name when the call failed (a failed TLS
    handshake is ``UNAVAILABLE``). Never raises for RPC failures; OSError for an unreadable
    PEM file.
    """
    with open_channel(target, tls_ca, server_name, tls_cert, tls_key) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            return False, code.name if code is not None else "ERROR"
    name = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    return reply.status == health_pb2.HealthCheckResponse.SERVING, name


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit status (0 serving, 1 otherwise)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", help="host:port or unix:///path.sock")
    parser.add_argument("service", nargs="?", default="", help="service name ('' = server)")
    parser.add_argument("--timeout", type=float, default=3.0, help="seconds")
    parser.add_argument("--tls-ca", default=None, metavar="PEM",
                        help="speak TLS, trusting this CA certificate")
    parser.add_argument("--server-name", default=None, metavar="NAME",
                        help="name the server certificate must carry (TLS; default: the host)")
    parser.add_argument("--tls-cert", default=None, metavar="PEM",
                        help="client certificate for mTLS (with --tls-key)")
    parser.add_argument("--tls-key", default=None, metavar="PEM", help="key of --tls-cert")
    args = parser.parse_args(argv)
    if (args.tls_cert is None) != (args.tls_key is None):
        parser.error("--tls-cert and --tls-key go together")
    if args.tls_cert is not None and args.tls_ca is None:
        parser.error("--tls-cert needs --tls-ca")
    try:
        serving, status = probe(args.target, args.service, args.timeout, tls_ca=args.tls_ca,
                                server_name=args.server_name, tls_cert=args.tls_cert,
                                tls_key=args.tls_key)
    except OSError as exc:
        print(f"{args.target}: cannot read {exc.filename}")
        return 1
    print(f"{args.target}: {status}")
    return 0 if serving else 1


if __name__ == "__main__":
    sys.exit(main())
