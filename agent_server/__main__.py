"""``python -m agent_server serve``: run a PolicyService (also ``moria serve agent``)."""

from __future__ import annotations

import argparse
import sys

from moria import server_files
from moria.metrics import serve_metrics_if_asked
from moria.policy.v1 import policy_service_pb2, policy_service_pb2_grpc
from moria.server import (
    Drain,
    MoriaServer,
    add_idle_timeout_argument,
    add_peer_limit_argument,
    add_server_arguments,
    peer_limit_from_args,
    run_until_signalled,
    server_main,
    server_options_from_args,
)

#: The server files a Play's config may name (``moria.server_files``).
FILE_KINDS = ("balrog_source", "model", "checkpoint")


def build_parser() -> argparse.ArgumentParser:
    """CLI of the agent server."""
    parser = argparse.ArgumentParser(prog="moria serve agent",
                                     description="Run a Policy (agent) server.")
    add_server_arguments(parser, default_address="127.0.0.1:50061")
    parser.add_argument("--capacity", type=int, default=256, help="max concurrent Play streams")
    add_peer_limit_argument(parser, flag="--max-streams-per-peer", what="Play streams")
    add_idle_timeout_argument(parser, what="Play streams")
    server_files.add_arguments(parser, FILE_KINDS)
    return parser


async def serve(args: argparse.Namespace) -> None:
    """Start the server and block until SIGTERM/SIGINT, then drain."""
    from agent_server.service import REQUEST_LIMITS, PolicyServicer

    options = server_options_from_args(args)  # fails fast on a bad TLS/token setting
    files = server_files.ServerFiles.from_args(args, FILE_KINDS, address=args.address)
    drain = Drain()
    if args.capacity < 1:
        raise SystemExit(f"moria serve agent: --capacity must be >= 1, got {args.capacity}")
    servicer = PolicyServicer(drain=drain, capacity=args.capacity,
                              idle_timeout_s=args.idle_timeout, files=files,
                              max_streams_per_peer=peer_limit_from_args(
                                  args.max_streams_per_peer, args.capacity))
    serve_metrics_if_asked(args.metrics_address, servicer.metrics.registry)
    server = MoriaServer(
        [lambda s: policy_service_pb2_grpc.add_PolicyServiceServicer_to_server(servicer, s)],
        [policy_service_pb2.DESCRIPTOR.services_by_name["PolicyService"].full_name],
        address=args.address, drain=drain, grace_s=args.grace, request_limits=REQUEST_LIMITS,
        **options)
    await run_until_signalled(server, servicer.aclose)


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``serve`` is the only command."""
    return server_main(build_parser, serve, argv)


if __name__ == "__main__":
    sys.exit(main())
