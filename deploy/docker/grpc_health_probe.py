"""Container health check: ask a Moria server's ``grpc.health.v1`` service whether it serves.

Usage: ``python grpc_health_probe.py HOST:PORT [SERVICE] [--timeout SECONDS]``

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


def probe(target: str, service: str = "", timeout: float = 3.0) -> tuple[bool, str]:
    """Check ``target`` (``host:port`` or ``unix:///path``) once.

    Returns ``(serving, status_name)``; ``status_name`` is the health status (``SERVING``,
    ``NOT_SERVING``, ...) or the gRPC error code name when the call failed. Never raises for
    RPC failures.
    """
    with grpc.insecure_channel(target) as channel:
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
    args = parser.parse_args(argv)
    serving, status = probe(args.target, args.service, args.timeout)
    print(f"{args.target}: {status}")
    return 0 if serving else 1


if __name__ == "__main__":
    sys.exit(main())
