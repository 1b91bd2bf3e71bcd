"""gRPC core settings every Moria process starts with.

gRPC core reads ``GRPC_EXPERIMENTS`` (a comma-separated list; a leading ``-`` turns an
experiment off; documented among gRPC core's environment variables) once, when ``grpc`` is
first imported: a value set later has no effect. ``moria/__init__.py`` therefore calls
``apply()`` before any stub or SDK module imports ``grpc``, and every service package
(``env_server``, ``agent_server``, ``orchestrator``, ``worker``) imports ``moria`` first.

What is turned off, and why (``docs/performance.md`` has the figures of
``benchmarks/grpc_roundtrip.py``): with grpcio 1.85's EventEngine client and listener, one Env
server round trip over a unix socket with one stream open cost 155 us of client CPU and 195 us
of server CPU; with the iomgr endpoints these experiments replace, 100 us and 130 us. The Env
server and Policy server answer one message per step, so this is CPU and latency per step.

A user who sets ``GRPC_EXPERIMENTS`` (an empty value included: gRPC's own defaults) keeps their
value: ``apply`` only fills in a missing variable.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

#: The environment variable gRPC core reads its experiments from.
EXPERIMENTS_VAR = "GRPC_EXPERIMENTS"

#: gRPC core experiments Moria turns off (names as grpcio 1.85 knows them; an unknown name
#: makes gRPC log ``Unknown experiment`` at startup, which ``tests/unit/test_grpc_defaults.py``
#: checks against the installed grpcio).
DISABLED_EXPERIMENTS: tuple[str, ...] = ("event_engine_client", "event_engine_listener")


def default_experiments() -> str:
    """The ``GRPC_EXPERIMENTS`` value Moria starts with, e.g.
    ``"-event_engine_client,-event_engine_listener"``."""
    return ",".join(f"-{name}" for name in DISABLED_EXPERIMENTS)


def apply(environ: MutableMapping[str, str] = os.environ) -> bool:
    """Set ``GRPC_EXPERIMENTS`` to ``default_experiments()`` in ``environ`` unless it is set
    already (to anything, empty included). Returns True when it was set here. Child processes
    started with this environment inherit the value."""
    if EXPERIMENTS_VAR in environ:
        return False
    environ[EXPERIMENTS_VAR] = default_experiments()
    return True


#: Default limit of one gRPC message, both directions (MiB), on servers and clients alike.
DEFAULT_MAX_MESSAGE_MB = 64
#: The same in bytes; servers change it with ``--max-message-mb``, clients with
#: ``TransportSecurity.max_message_mb``.
MAX_MESSAGE_BYTES = DEFAULT_MAX_MESSAGE_MB * 1024 * 1024


def grpc_options(max_message_bytes: int = MAX_MESSAGE_BYTES) -> list[tuple[str, int]]:
    """Channel/server options: send and receive limits of ``max_message_bytes`` (a larger
    message fails with RESOURCE_EXHAUSTED) and HTTP/2 keepalive."""
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.keepalive_time_ms", 30_000),
        ("grpc.keepalive_timeout_ms", 10_000),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ]
