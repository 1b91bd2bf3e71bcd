"""Prometheus ``/metrics`` of the env and policy servers (moria.metrics), scraped over real HTTP.

Real Env and Policy servers on loopback play real BabyAI episodes through
``orchestrator.core.runner.run_evaluation`` (``endpoints``); each server's registry is served by
``start_metrics_http`` on 127.0.0.1:<ephemeral>, fetched with urllib and parsed with
``prometheus_client``'s own text parser. The OpenAI backend talks to a local HTTP server that
speaks the chat-completions wire format.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console

from moria.codecs import struct_from_dict
from moria.env.v1 import env_service_pb2 as env_pb
from moria.env.v1 import env_service_pb2_grpc as env_grpc
from moria.metrics import (
    Metrics,
    parse_http_address,
    start_metrics_http,
    stop_metrics_http,
)
from moria.policy.v1 import policy_service_pb2 as pol_pb
from moria.policy.v1 import policy_service_pb2_grpc as pol_grpc
from moria.server import GRPC_OPTIONS
from orchestrator.core.runner import run_evaluation
from orchestrator.plan.spec import load_spec
from tests.support.fake_openai import Behaviour, FakeOpenAI
from tests.support.servers import env_server, policy_server

FAKE_KEY = "sk-test-SECRET-1234"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@contextmanager
def serving(registry: CollectorRegistry) -> Iterator[str]:
    """``registry`` served on 127.0.0.1:<ephemeral>; yields the /metrics URL."""
    port = start_metrics_http("127.0.0.1:0", registry)
    try:
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        stop_metrics_http(port)


async def scrape(url: str) -> Samples:
    """GET ``url`` and parse the exposition text: (sample name, labels) -> value."""

    def fetch() -> str:
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/plain")
            return str(resp.read().decode())

    text = await asyncio.to_thread(fetch)
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    """One sample's value; a missing labelled sample counts 0 (never incremented)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str) -> float:
    """Sum of ``name`` over all its label sets."""
    return sum(v for (n, _), v in samples.items() if n == name)


def episodes(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.rglob("*_run_00.json"))]


async def test_steps_acts_and_sessions_of_a_dummy_run(tmp_path: Path) -> None:
    async with env_server() as env, policy_server() as pol:
        env_metrics = env.servicer.metrics  # type: ignore[attr-defined]
        pol_metrics = pol.servicer.metrics  # type: ignore[attr-defined]
        with serving(env_metrics.registry) as env_url, serving(pol_metrics.registry) as pol_url:
            before = await scrape(env_url)
            before_pol = await scrape(pol_url)
            spec = load_spec(None, [
                "agent.type=dummy", "envs.names=babyai", "eval.num_samples=3",
                "eval.max_steps_per_episode=4", f"eval.output_dir={tmp_path}",
                f"endpoints.env.babyai=[{env.target}]", f"endpoints.policy=[{pol.target}]"])
            outcome = await run_evaluation(spec, console=Console(quiet=True),
                                           show_progress=False)
            assert outcome.ran == 3 and outcome.verdict is not None and outcome.verdict.succeeded
            # the servers shut down (drained) when the context exits: scrape after that
    after_env, after_pol = await scrape_after(env_metrics, pol_metrics)

    played = episodes(tmp_path)
    steps = sum(e["num_steps"] for e in played)
    acts = sum(len(e["steps"]) for e in played)
    assert len(played) == 3 and steps > 3  # several steps per episode
    assert value(before, "moria_env_steps_total", family="babyai") == 0
    assert value(before, "moria_active_sessions") == 0
    assert value(before_pol, "moria_policy_acts_total", strategy="dummy") == 0
    assert value(after_env, "moria_env_steps_total", family="babyai") == steps
    assert value(after_pol, "moria_policy_acts_total", strategy="dummy") == acts
    assert value(after_env, "moria_active_sessions") == 0
    assert value(after_pol, "moria_active_streams") == 0
    # a clean run: no RPC ended with an error, no model was called
    assert total(after_env, "moria_rpc_errors_total") == 0
    assert total(after_pol, "moria_rpc_errors_total") == 0
    assert total(after_pol, "moria_model_latency_seconds_count") == 0


async def scrape_after(*all_metrics: Metrics) -> list[Samples]:
    """Scrape each registry once through a fresh /metrics server (after the gRPC servers)."""
    out = []
    for metrics in all_metrics:
        with serving(metrics.registry) as url:
            out.append(await scrape(url))
    return out


async def test_errors_by_code_and_the_sessions_gauge() -> None:
    async with env_server() as env:
        metrics = env.servicer.metrics  # type: ignore[attr-defined]
        with serving(metrics.registry) as url:
            async with grpc.aio.insecure_channel(env.target, options=GRPC_OPTIONS) as channel:
                stub = env_grpc.EnvServiceStub(channel)
                # a session that stays open while we scrape
                held = stub.Session()
                await held.write(env_pb.SessionRequest(open=env_pb.OpenRequest(
                    task="BabyAI-MixedTrainLocal-v0/goto", seed=1)))
                assert (await held.read()).WhichOneof("response") == "opened"
                during = await scrape(url)
                # an unknown task: NOT_FOUND (after a capacity slot was claimed)
                call = stub.Session()
                await call.write(env_pb.SessionRequest(open=env_pb.OpenRequest(
                    task="NoSuchTask-v0", seed=1)))
                assert await call.code() == grpc.StatusCode.NOT_FOUND
                # a step before open: FAILED_PRECONDITION
                call = stub.Session()
                await call.write(env_pb.SessionRequest(step=env_pb.StepRequest()))
                assert await call.code() == grpc.StatusCode.FAILED_PRECONDITION
                # ListTasks for a family not hosted: NOT_FOUND
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await stub.ListTasks(env_pb.ListTasksRequest(family="nethack"))
                assert info.value.code() == grpc.StatusCode.NOT_FOUND
                # an ordinary ListTasks, and a session closed cleanly, are no errors
                await stub.ListTasks(env_pb.ListTasksRequest(family="babyai"))
                await held.write(env_pb.SessionRequest(close=env_pb.CloseRequest()))
                assert (await held.read()).WhichOneof("response") == "closed"
                await held.done_writing()
                assert await held.code() == grpc.StatusCode.OK
    # scraped after the server drained, so every session has given its slot back
    (after,) = await scrape_after(metrics)
    assert value(during, "moria_active_sessions") == 1
    assert total(during, "moria_rpc_errors_total") == 0
    assert value(after, "moria_active_sessions") == 0
    assert value(after, "moria_rpc_errors_total", service="EnvService", code="NOT_FOUND") == 2
    assert value(after, "moria_rpc_errors_total", service="EnvService",
                 code="FAILED_PRECONDITION") == 1
    assert total(after, "moria_rpc_errors_total") == 3


async def test_policy_errors_by_code() -> None:
    async with policy_server() as pol:
        metrics = pol.servicer.metrics  # type: ignore[attr-defined]
        async with grpc.aio.insecure_channel(pol.target, options=GRPC_OPTIONS) as channel:
            stub = pol_grpc.PolicyServiceStub(channel)
            call = stub.Play()  # observe before begin
            await call.write(pol_pb.PlayRequest(observe=pol_pb.Observe()))
            assert await call.code() == grpc.StatusCode.FAILED_PRECONDITION
            call = stub.Play()  # a config field that does not exist
            await call.write(pol_pb.PlayRequest(begin=pol_pb.Begin(
                agent_config=struct_from_dict({"agent": {"type": "no-such-type"}}))))
            assert await call.code() == grpc.StatusCode.INVALID_ARGUMENT
    (after,) = await scrape_after(metrics)
    assert value(after, "moria_rpc_errors_total", service="PolicyService",
                 code="FAILED_PRECONDITION") == 1
    assert value(after, "moria_rpc_errors_total", service="PolicyService",
                 code="INVALID_ARGUMENT") == 1
    assert total(after, "moria_rpc_errors_total") == 2
    assert value(after, "moria_active_streams") == 0


async def test_model_latency_and_retries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         ) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    with FakeOpenAI("go forward") as fake:
        fake.script(Behaviour(status=500))  # the first request fails once, then is retried
        async with env_server() as env, policy_server() as pol:
            pol_metrics = pol.servicer.metrics  # type: ignore[attr-defined]
            spec = load_spec(None, [
                "agent.type=naive", "envs.names=babyai", "eval.num_samples=2",
                "eval.max_steps_per_episode=3", f"eval.output_dir={tmp_path}",
                "client.client_name=openai", "client.model_id=gpt-4o",
                f"client.base_url={fake.base_url}", "client.delay=0.01",
                f"endpoints.env.babyai=[{env.target}]", f"endpoints.policy=[{pol.target}]"])
            outcome = await run_evaluation(spec, console=Console(quiet=True),
                                           show_progress=False)
            assert outcome.verdict is not None and outcome.verdict.succeeded
        requests = len(fake.requests)
    (samples,) = await scrape_after(pol_metrics)

    calls = outcome.summary["models"]["openai/gpt-4o"]["calls"]
    assert calls == 6 and requests == calls + 1  # 2 episodes x 3 steps, plus the one 500
    labels = {"backend": "openai", "model": "gpt-4o"}
    assert value(samples, "moria_model_retries_total", backend="openai") == 1
    assert value(samples, "moria_model_latency_seconds_count", **labels) == calls
    assert value(samples, "moria_model_latency_seconds_sum", **labels) > 0
    # every call falls in the +Inf bucket; the buckets are cumulative
    assert value(samples, "moria_model_latency_seconds_bucket", le="+Inf", **labels) == calls
    assert value(samples, "moria_policy_acts_total", strategy="naive") == calls
    assert value(samples, "moria_active_streams") == 0
    text = json.dumps({f"{n}{sorted(k)}": v for (n, k), v in samples.items()})
    assert FAKE_KEY not in text


def test_metrics_http_serves_a_private_registry() -> None:
    a, b = Metrics(), Metrics()  # two servers in one process: separate registries
    a.step("babyai")
    a.rpc_error("EnvService", grpc.StatusCode.NOT_FOUND)
    a.rpc_error("EnvService", grpc.StatusCode.OK)  # not an error
    port = start_metrics_http("127.0.0.1:0", a.registry)
    try:
        assert port > 0
        samples = asyncio.run(scrape(f"http://127.0.0.1:{port}/metrics"))
    finally:
        stop_metrics_http(port)
    assert value(samples, "moria_env_steps_total", family="babyai") == 1
    assert value(samples, "moria_rpc_errors_total", service="EnvService", code="NOT_FOUND") == 1
    assert total(samples, "moria_rpc_errors_total") == 1
    assert b"moria_env_steps_total{" not in b.render()  # b saw no step


@pytest.mark.parametrize(("address", "expected"), [
    ("127.0.0.1:9100", ("127.0.0.1", 9100)), (":9100", ("0.0.0.0", 9100)),
    ("9100", ("0.0.0.0", 9100)), ("[::1]:0", ("::1", 0)), ("0.0.0.0:0", ("0.0.0.0", 0)),
])
def test_parse_http_address(address: str, expected: tuple[str, int]) -> None:
    assert parse_http_address(address) == expected


@pytest.mark.parametrize("address", ["localhost", "host:http", "host:70000", ""])
def test_parse_http_address_rejects(address: str) -> None:
    with pytest.raises(ValueError, match="bad metrics address"):
        parse_http_address(address)


def test_server_process_serves_metrics_on_its_flag() -> None:
    """``--metrics-address`` on a real env server process: the bound address is printed and
    /metrics answers with Moria's series."""
    import subprocess
    import sys
    import urllib.request

    proc = subprocess.Popen(
        [sys.executable, "-m", "env_server", "serve", "--families", "babyai",
         "--address", "127.0.0.1:0", "--metrics-address", "127.0.0.1:0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = ""
        for line in proc.stderr:  # METRICS comes before READY
            if line.startswith("METRICS "):
                break
        assert line.startswith("METRICS 127.0.0.1:"), line
        port = int(line.split(":")[-1])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
            body = reply.read().decode()
        families = {f.name for f in text_string_to_metric_families(body)}
        assert {"moria_active_sessions", "moria_env_steps", "moria_rpc_errors"} <= families
    finally:
        proc.terminate()
        proc.wait(timeout=30)
