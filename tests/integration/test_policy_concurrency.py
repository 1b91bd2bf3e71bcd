"""One agent server serves many Play streams on one event loop: a slow model call on one
stream never holds up another stream, and ``client.max_concurrency`` bounds the calls sent to
one endpoint."""

from __future__ import annotations

import asyncio
import resource
import threading

import pytest

from agent_server.backends import create_backend
from agent_server.backends.base import (
    Backend,
    ChatMessage,
    ConcurrencyLimited,
    GenerateParams,
)
from moria.clients import PolicyClient
from moria.codecs import struct_from_dict
from moria.common.v1 import types_pb2
from moria.config import AgentConfig, ClientConfig, policy_config_dict
from moria.policy.v1 import policy_service_pb2 as pol_pb
from orchestrator.plan.spec import load_spec
from tests.support.fake_openai import FakeOpenAI
from tests.support.providers import ANTHROPIC, GEMINI, OPENAI, TEST_KEY, Provider
from tests.support.servers import policy_server
from tests.support.waiting import async_wait_until

SPACE = types_pb2.ActionSpace(actions=[types_pb2.NamedAction(name=n) for n in ("a", "b")],
                              default_action="a")


async def _begin(target: str, agent: AgentConfig, client: ClientConfig, seed: int):
    stream = PolicyClient(target).play()
    await stream.begin(pol_pb.Begin(
        episode_id=f"e{seed}", agent_id="agent_0", instruction="pick", action_space=SPACE,
        agent_config=struct_from_dict(policy_config_dict(agent, client)), seed=seed,
        env_name="babyai", task="t"))
    return stream


def _observe(step: int = 0) -> pol_pb.Observe:
    return pol_pb.Observe(step=step, observation=types_pb2.Observation(
        text={"long_term_context": "obs"}))


def _limiter(backend: Backend) -> ConcurrencyLimited:
    """The ``ConcurrencyLimited`` in the chain of wrappers the servicer shares per endpoint
    (each wrapper keeps the wrapped backend as ``inner``)."""
    while not isinstance(backend, ConcurrencyLimited):
        backend = backend.inner  # type: ignore[attr-defined]
    return backend


async def test_slow_model_call_does_not_block_other_streams() -> None:
    release = threading.Event()
    with FakeOpenAI(lambda _req: "a" if release.wait(30) else "b") as fake:
        client = ClientConfig(client_name="vllm", base_url=fake.base_url, model_id="m")
        async with policy_server() as pol:
            slow = await _begin(pol.target, AgentConfig(type="naive"), client, 1)
            quick = await _begin(pol.target, AgentConfig(type="dummy"), client, 2)
            pending = asyncio.create_task(slow.observe(_observe()))
            await async_wait_until(lambda: fake.requests, "the slow model call to arrive",
                                   timeout=60, interval=0.01)  # it is now in flight
            answers = [await quick.observe(_observe(i)) for i in range(20)]
            assert not pending.done()
            release.set()
            act = await pending
    assert act.action.text == "a" and act.model == "vllm/m"
    assert all(a.action.text in ("a", "b") for a in answers)


async def test_max_concurrency_bounds_calls_to_one_endpoint() -> None:
    lock = threading.Lock()
    state = {"now": 0, "peak": 0}
    gate = threading.Semaphore(0)

    def reply(_request: dict) -> str:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        gate.acquire(timeout=30)
        with lock:
            state["now"] -= 1
        return "b"

    with FakeOpenAI(reply) as fake:
        client = ClientConfig(client_name="vllm", base_url=fake.base_url, model_id="m",
                              max_concurrency=2)
        async with policy_server() as pol:
            streams = [await _begin(pol.target, AgentConfig(type="naive"), client, i)
                       for i in range(6)]
            acts = [asyncio.create_task(s.observe(_observe())) for s in streams]
            limiter = _limiter(await pol.servicer.backend_for(client))  # type: ignore[attr-defined]
            # every call has reached the limiter: 2 sent, 4 queued behind them (not merely not
            # sent yet), and the 2 sent ones reached the endpoint
            await async_wait_until(
                lambda: (limiter.in_flight, limiter.waiting, len(fake.requests)) == (2, 4, 2),
                "2 calls in flight and 4 waiting", timeout=60, interval=0.01)
            assert len(fake.requests) == 2
            for _ in range(6):
                gate.release()
            results = await asyncio.gather(*acts)
    assert [r.action.text for r in results] == ["b"] * 6
    assert state["peak"] == 2 and len(fake.requests) == 6


async def test_a_backend_is_built_once_off_the_event_loop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Building a provider's first backend imports its SDK (about a second of CPU for
    openai's): it runs on a worker thread, so the server's other streams go on, and Begins
    that arrive together share the one backend it builds."""
    from agent_server import backends, service
    from moria.server import Drain

    built_on: list[threading.Thread] = []
    real = backends.FACTORIES["vllm"]

    def recording(client: ClientConfig) -> Backend:
        built_on.append(threading.current_thread())
        return real(client)

    monkeypatch.setitem(backends.FACTORIES, "vllm", recording)
    servicer = service.PolicyServicer(drain=Drain())
    client = ClientConfig(client_name="vllm", base_url="http://127.0.0.1:9/v1", model_id="m")
    shared = await asyncio.gather(*(servicer.backend_for(client) for _ in range(4)))
    assert all(b is shared[0] for b in shared)
    assert len(built_on) == 1 and built_on[0] is not threading.current_thread()
    await servicer.aclose()


#: More calls in flight than the official SDKs' default connection pools hold (1,000).
ABOVE_POOL = 1_010


@pytest.mark.parametrize(("provider", "extra"), [
    (OPENAI, []), (OPENAI, ["client.http_client=sdk"]), (ANTHROPIC, []), (GEMINI, [])],
    ids=["openai-compatible-lean", "openai-compatible-sdk", "anthropic", "gemini"])
async def test_every_call_max_concurrency_allows_is_in_flight_at_once(
        provider: Provider, extra: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """``client.max_concurrency`` is the one cap on a backend's calls in flight: no
    connection pool of an HTTP client under it holds calls back. The server answers no call
    until ``ABOVE_POOL`` have arrived, so a pool that keeps some back breaks the barrier."""
    if provider.key_env:
        monkeypatch.setenv(provider.key_env, TEST_KEY)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = 4 * ABOVE_POOL  # both ends of each connection, and room for the rest
    assert hard >= needed, f"this test needs {needed} open files; the hard limit is {hard}"
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, needed), hard))
    arrived = threading.Barrier(ABOVE_POOL, timeout=120)  # a hang guard, not a timing

    def reply(_request: object) -> str:
        arrived.wait()  # BrokenBarrierError (an answer 500) when fewer calls ever arrive
        return "go forward"

    try:
        with provider.start(reply) as server:
            client = load_spec(None, [*provider.overrides(server.base_url), *extra,
                                      f"client.max_concurrency={ABOVE_POOL}",
                                      "client.max_retries=0", "client.timeout=300"]).client
            backend = create_backend(client)
            try:
                completions = await asyncio.gather(*(
                    backend.complete([ChatMessage("user", "go")], GenerateParams(max_tokens=8))
                    for _ in range(ABOVE_POOL)))
            finally:
                await backend.aclose()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert [c.text for c in completions] == ["go forward"] * ABOVE_POOL
