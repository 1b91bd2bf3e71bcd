"""Prometheus metrics of the Moria servers, and the ``/metrics`` HTTP endpoint that serves them.

Every server process owns one ``Metrics`` object with its own ``CollectorRegistry`` (never the
global default registry, so a test can run several servers in one process). The series:

==================================  =========  =================  ==============================
name                                type       labels             updated by
==================================  =========  =================  ==============================
``moria_active_sessions``           gauge      -                  env server: open sessions
``moria_env_steps_total``           counter    ``family``         env server: game steps played
``moria_active_streams``            gauge      -                  policy server: Play streams
``moria_policy_acts_total``         counter    ``strategy``       policy server: Act answers
``moria_model_latency_seconds``     histogram  ``backend, model`` policy server: model calls
``moria_model_retries_total``       counter    ``backend``        policy server: model retries
``moria_rpc_errors_total``          counter    ``service, code``  both: RPCs ended with an error
==================================  =========  =================  ==============================

Rates are left to Prometheus (see docs/metrics.md): steps/s is
``sum by (family) (rate(moria_env_steps_total[1m]))`` and acts/s is
``sum by (strategy) (rate(moria_policy_acts_total[1m]))``.

``start_metrics_http(address, registry)`` serves a registry over HTTP (a daemon thread of
``prometheus_client``'s own WSGI server); it is the one call a server entry point needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIServer

import grpc
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import start_http_server

from moria.server import CallEnded

#: Buckets (seconds) of ``moria_model_latency_seconds``: from a fast local model (50 ms) to a
#: slow reasoning model with retries (60 s).
MODEL_LATENCY_BUCKETS: tuple[float, ...] = (
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 45.0, 60.0, float("inf"))

#: The ``service`` label values of ``moria_rpc_errors_total``.
ENV_SERVICE = "EnvService"
POLICY_SERVICE = "PolicyService"


@dataclass(frozen=True)
class _ModelScope:
    """The model call running in the current task: where its retries are counted."""

    metrics: Metrics
    backend: str


_model_scope: ContextVar[_ModelScope | None] = ContextVar("moria_model_scope", default=None)


class Metrics:
    """The metric families of one server process, in their own registry (``registry``).

    Constructing one registers every family in a fresh ``CollectorRegistry`` (or in
    ``registry`` when given; registering twice in the same registry raises ``ValueError``).
    The hook methods below are what the servicers call; they never raise.
    """

    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry if registry is not None else CollectorRegistry()
        reg = self.registry
        self.active_sessions = Gauge(
            "moria_active_sessions", "Env sessions open now (env server).", registry=reg)
        self.env_steps = Counter(
            "moria_env_steps_total", "Game steps played (env server).", ["family"],
            registry=reg)
        self.active_streams = Gauge(
            "moria_active_streams", "Play streams running now (policy server).", registry=reg)
        self.policy_acts = Counter(
            "moria_policy_acts_total", "Act answers sent, in-band errors included "
            "(policy server).", ["strategy"], registry=reg)
        self.model_latency = Histogram(
            "moria_model_latency_seconds", "Wall seconds of one model call, retries included "
            "(policy server).", ["backend", "model"], buckets=MODEL_LATENCY_BUCKETS,
            registry=reg)
        self.model_retries = Counter(
            "moria_model_retries_total", "Model call attempts retried after a retryable "
            "failure (policy server).", ["backend"], registry=reg)
        self.rpc_errors = Counter(
            "moria_rpc_errors_total", "RPCs that ended with a non-OK gRPC status, by the "
            "status code name.", ["service", "code"], registry=reg)
        # the labelled children counted on every step, act and model call, looked up once per
        # (metric, label values): prometheus_client's labels() validates on every call
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}

    # ---- hooks -------------------------------------------------------------------------------

    def step(self, family: str) -> None:
        """Count one game step of ``family``."""
        self._labelled(self.env_steps, family).inc()

    def act(self, strategy: str) -> None:
        """Count one Act answer of ``strategy`` (the agent type, e.g. ``naive``)."""
        self._labelled(self.policy_acts, strategy).inc()

    def rpc_error(self, service: str, code: grpc.StatusCode | None) -> None:
        """Count one RPC of ``service`` ended with ``code`` (None counts as ``UNKNOWN``; ``OK``
        is not an error and is ignored)."""
        if code == grpc.StatusCode.OK:
            return
        name = code.name if code is not None else grpc.StatusCode.UNKNOWN.name
        self.rpc_errors.labels(service=service, code=name).inc()

    @contextlib.contextmanager
    def rpc(self, service: str, context: Any) -> Iterator[None]:
        """Wrap one RPC handler body: an abort counts its status code (read from the gRPC
        ``context`` after ``context.abort``), a cancelled RPC counts ``CANCELLED``, any other
        exception counts ``UNKNOWN`` (what gRPC answers for it). Exceptions are re-raised."""
        try:
            yield
        except (grpc.aio.AbortError, CallEnded):
            self.rpc_error(service, context.code())
            raise
        except asyncio.CancelledError:
            self.rpc_error(service, grpc.StatusCode.CANCELLED)
            raise
        except Exception:
            self.rpc_error(service, grpc.StatusCode.UNKNOWN)
            raise

    @contextlib.contextmanager
    def model_call(self, backend: str, model: str) -> Iterator[None]:
        """Time one model call (``backend``: the client name, ``model``: the model id) into
        ``moria_model_latency_seconds``, whether it succeeds or fails. While it runs, retries
        reported by ``note_model_retry`` in the same task are counted for ``backend``."""
        token = _model_scope.set(_ModelScope(self, backend))
        started = time.perf_counter()
        try:
            yield
        finally:
            _model_scope.reset(token)
            self._labelled(self.model_latency, backend, model).observe(
                time.perf_counter() - started)

    def _labelled(self, metric: Any, *values: str) -> Any:
        """``metric.labels(*values)`` (values in the metric's label order), kept per value."""
        key = (id(metric), values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def render(self) -> bytes:
        """The registry in the Prometheus text exposition format (what ``/metrics`` serves)."""
        return generate_latest(self.registry)


def note_model_retry() -> None:
    """Count one retry of the model call running in this task (inside ``Metrics.model_call``);
    does nothing outside one (e.g. a backend used directly, without a server)."""
    scope = _model_scope.get()
    if scope is not None:
        scope.metrics.model_retries.labels(backend=scope.backend).inc()


_servers: dict[int, WSGIServer] = {}


def parse_http_address(address: str) -> tuple[str, int]:
    """``host:port``, ``[v6]:port``, ``:port`` or ``port`` -> ``(host, port)``; an empty host
    means all interfaces (``0.0.0.0``). Raises ``ValueError`` for a missing or bad port."""
    host, sep, port = address.rpartition(":")
    if not sep:
        host, port = "", address
    host = host.strip("[]") or "0.0.0.0"
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"bad metrics address {address!r}: expected host:port") from None
    if not 0 <= number <= 65535:
        raise ValueError(f"bad metrics address {address!r}: port out of range")
    return host, number


def start_metrics_http(address: str, registry: CollectorRegistry) -> int:
    """Serve ``registry`` at ``http://<address>/metrics`` (text format) from a daemon thread.

    ``address`` is ``host:port`` (see ``parse_http_address``; port 0 picks a free port).
    Returns the bound TCP port. Raises ``ValueError`` for a bad address and ``OSError`` when
    the port cannot be bound. Stop it with ``stop_metrics_http(port)``.
    """
    host, port = parse_http_address(address)
    server, _thread = start_http_server(port, addr=host, registry=registry)
    bound = int(server.server_port)
    _servers[bound] = server
    return bound


def stop_metrics_http(port: int) -> None:
    """Stop the ``/metrics`` server started on ``port`` (no-op when there is none)."""
    server = _servers.pop(port, None)
    if server is not None:
        server.shutdown()
        server.server_close()


def serve_metrics_if_asked(address: str | None, registry: CollectorRegistry) -> int | None:
    """Start ``/metrics`` on ``address`` (a server's ``--metrics-address``) and print
    ``METRICS host:port`` on stderr; None (nothing started) when ``address`` is None.

    Raises ValueError for a malformed address, OSError when the port cannot be bound."""
    if address is None:
        return None
    port = start_metrics_http(address, registry)
    host = parse_http_address(address)[0] or "0.0.0.0"
    print(f"METRICS {host}:{port}", file=sys.stderr, flush=True)
    return port
