"""``python -m env_server serve``: run an EnvService (also ``moria serve env``)."""

from __future__ import annotations

import argparse
import sys

from env_server.families import FAMILIES
from moria import server_files
from moria.env.v1 import env_service_pb2, env_service_pb2_grpc
from moria.metrics import serve_metrics_if_asked
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

#: The server files an Open's options may name (``moria.server_files``).
FILE_KINDS = ("balrog_source", "meltingpot_assets", "boxoban_levels")


def build_parser() -> argparse.ArgumentParser:
    """CLI of the env server."""
    parser = argparse.ArgumentParser(prog="moria serve env", description="Run an Env server.")
    parser.add_argument("--families", "--family", default="babyai",
                        help="comma-separated families to host; available: "
                        + ", ".join(sorted(FAMILIES)))
    parser.add_argument("--capacity", type=int, default=64, help="max concurrent sessions")
    add_peer_limit_argument(parser, flag="--max-sessions-per-peer", what="sessions")
    add_idle_timeout_argument(parser, what="sessions")
    parser.add_argument("--workers", type=int, default=8, help="game thread-pool size")
    parser.add_argument("--isolate", default=None,
                        help="comma-separated families whose games run in worker processes, "
                        "so a crashing game ends only its own session (default: the families "
                        "that ask for it, e.g. nle, minihack); '' for none: faster "
                        "steps, but a crash in a game's C code ends every session of the "
                        "server")
    parser.add_argument("--max-action-chars", type=int, default=None,
                        help="an Action text longer than this many characters is judged an "
                        "invalid action: the game applies its default action (default 4096, "
                        "env_server.service.MAX_ACTION_CHARS)")
    server_files.add_arguments(parser, FILE_KINDS)
    add_server_arguments(parser, default_address="127.0.0.1:50051")
    return parser


async def serve(args: argparse.Namespace) -> None:
    """Start the server and block until SIGTERM/SIGINT, then drain."""
    from env_server.service import REQUEST_LIMITS, EnvServicer

    families = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise SystemExit(f"unknown family {unknown[0]!r}; available: "
                         + ", ".join(sorted(FAMILIES)))
    options = server_options_from_args(args)  # fails fast on a bad TLS/token setting
    files = server_files.ServerFiles.from_args(args, FILE_KINDS, address=args.address)
    drain = Drain()
    isolate = (None if args.isolate is None
               else [f.strip() for f in args.isolate.split(",") if f.strip()])
    try:
        servicer = EnvServicer(families, drain=drain, capacity=args.capacity,
                               idle_timeout_s=args.idle_timeout, workers=args.workers,
                               process_families=isolate, files=files,
                               max_sessions_per_peer=peer_limit_from_args(
                                   args.max_sessions_per_peer, args.capacity),
                               **({} if args.max_action_chars is None
                                  else {"max_action_chars": args.max_action_chars}))
    except ValueError as exc:  # a bad --capacity, --idle-timeout, --isolate, ...
        raise SystemExit(f"moria serve env: {exc}") from None
    serve_metrics_if_asked(args.metrics_address, servicer.metrics.registry)
    server = MoriaServer(
        [lambda s: env_service_pb2_grpc.add_EnvServiceServicer_to_server(servicer, s)],
        [env_service_pb2.DESCRIPTOR.services_by_name["EnvService"].full_name],
        address=args.address, drain=drain, grace_s=args.grace, request_limits=REQUEST_LIMITS,
        **options)
    await run_until_signalled(server, servicer.shutdown)


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``serve`` is the only command."""
    return server_main(build_parser, serve, argv)


if __name__ == "__main__":
    sys.exit(main())
