"""Whole episodes through the three services: real Env and Policy servers on loopback, the
orchestrator's episode runner, and the OpenAI-compatible backend talking to a local HTTP server
that speaks the chat-completions wire format."""

from __future__ import annotations

import grpc
import pytest

from moria.clients import PolicyClient
from moria.codecs import struct_from_dict
from moria.common.v1 import types_pb2
from moria.policy.v1 import policy_service_pb2 as pol_pb
from moria.records import EpisodeRecord
from orchestrator.core.episode import EpisodePlan, run_episode
from orchestrator.core.episode_config import episode_config
from orchestrator.plan.spec import RunSpec, load_spec
from tests.support.fake_openai import Behaviour, FakeOpenAI
from tests.support.servers import env_server, policy_server

GOTO = "BabyAI-MixedTrainLocal-v0/goto"


def _vllm_spec(fake: FakeOpenAI, *overrides: str) -> RunSpec:
    """A run spec whose policy calls ``fake`` through the OpenAI-compatible (vllm) backend."""
    return load_spec(
        None,
        [
            "client.client_name=vllm",
            f"client.base_url={fake.base_url}",
            "client.model_id=fake-model",
            *overrides,
        ],
    )


async def _run(plan: EpisodePlan, spec: RunSpec) -> EpisodeRecord:
    """``run_episode`` of ``plan`` with ``spec`` resolved for it."""
    return await run_episode(plan, episode_config(spec, plan.env, plan.task, plan.seed))


def _plan(env_target: str, policy_target: str, seed: int = 11) -> EpisodePlan:
    return EpisodePlan(
        run_id="t",
        env="babyai",
        task=GOTO,
        episode_index=0,
        seed=seed,
        env_target=env_target,
        policy_target=policy_target,
    )


async def test_garbage_output_gives_default_action_and_feedback_reaches_the_model() -> None:
    with FakeOpenAI("I like turtles") as fake:
        spec = _vllm_spec(fake, "eval.max_steps_per_episode=3", "client.max_retries=0")
        async with env_server() as env, policy_server() as pol:
            record = await _run(_plan(env.target, pol.target), spec)
        requests = [r.json for r in fake.requests if r.json is not None]
    assert record.num_steps == 3 and record.end_reason == "truncated"
    assert [s.action for s in record.steps] == ["go forward"] * 3
    assert all(not s.valid for s in record.steps)
    assert record.failed_candidates == ["I like turtles"] * 3
    assert record.steps[0].raw_completion == "I like turtles"
    assert record.input_tokens > 0 and record.output_tokens > 0
    assert len(requests) == 3
    first_prompt = str(requests[0]["messages"])
    later_prompt = str(requests[1]["messages"])
    assert "not a valid action" not in first_prompt
    assert "go forward" in requests[1]["messages"][-1]["content"]
    assert later_prompt.count("I like turtles") >= 1


async def test_feedback_reaches_the_model_with_no_text_history() -> None:
    with FakeOpenAI("nonsense") as fake:
        spec = _vllm_spec(
            fake, "agent.max_text_history=0", "eval.max_steps_per_episode=2", "client.max_retries=0"
        )
        async with env_server() as env, policy_server() as pol:
            await _run(_plan(env.target, pol.target), spec)
        last = fake.requests[-1].json
    assert last is not None
    current = last["messages"][-1]["content"]
    assert "go forward" in current and "valid" in current


@pytest.mark.parametrize("shown", [True, False], ids=["feedback-on", "feedback-off"])
async def test_feedback_reaches_the_model_only_with_the_option(shown: bool) -> None:
    """The env keeps the invalid-action sentence out of the observation (trajectories show
    none) and reports it in ActionResult.feedback; the orchestrator forwards it, and so the
    prompt shows it, only with ``eval.feedback_on_invalid_action``."""
    with FakeOpenAI("nonsense") as fake:
        spec = _vllm_spec(fake, f"eval.feedback_on_invalid_action={str(shown).lower()}",
                          "eval.max_steps_per_episode=3", "client.max_retries=0")
        async with env_server() as env, policy_server() as pol:
            record = await _run(_plan(env.target, pol.target), spec)
        prompts = [str(r.json["messages"][-1]["content"]) for r in fake.requests
                   if r.json is not None]
    assert [(s.action, s.valid) for s in record.steps] == [("go forward", False)] * 3
    assert all("not a valid action" not in s.observation for s in record.steps)
    assert "not a valid action" not in prompts[0]
    sentence = "Your previous output was not a valid action, so 'go forward' was performed instead."
    assert all((sentence in p) is shown for p in prompts[1:])


async def test_model_failure_ends_episode_with_agent_error() -> None:
    with FakeOpenAI("go forward") as fake:
        fake.script(
            Behaviour(
                status=400,
                body={"error": {"message": "context too long", "type": "invalid_request_error"}},
            )
        )
        spec = _vllm_spec(fake, "client.max_retries=3", "client.delay=0.01")
        async with env_server() as env, policy_server() as pol:
            record = await _run(_plan(env.target, pol.target), spec)
        assert len(fake.requests) == 1  # a 400 is not retried
    assert record.end_reason == "agent_error"
    assert "context too long" in record.error
    assert record.num_steps == 0


async def test_retries_exhausted_end_with_agent_error() -> None:
    with FakeOpenAI("go forward") as fake:
        fake.script(*[Behaviour(status=500, body={"error": {"message": "down"}})] * 3)
        spec = _vllm_spec(fake, "client.max_retries=2", "client.delay=0.01")
        async with env_server() as env, policy_server() as pol:
            record = await _run(_plan(env.target, pol.target), spec)
        assert len(fake.requests) == 3
    assert record.end_reason == "agent_error"
    assert "retries exhausted" in record.error


async def test_dummy_policy_is_seeded_and_plays_valid_actions() -> None:
    spec = load_spec(None, ["agent.type=dummy", "eval.max_steps_per_episode=10"])
    async with env_server() as env, policy_server() as pol:
        first = await _run(_plan(env.target, pol.target, seed=5), spec)
        again = await _run(_plan(env.target, pol.target, seed=5), spec)
        other = await _run(_plan(env.target, pol.target, seed=6), spec)
    actions = [s.action for s in first.steps]
    assert actions == [s.action for s in again.steps]
    assert actions != [s.action for s in other.steps]
    assert all(s.valid for s in first.steps)


async def test_policy_rejects_bad_config_and_step_before_begin(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    async with policy_server() as pol:
        client = PolicyClient(pol.target)
        stream = client.play()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await stream.begin(
                pol_pb.Begin(agent_config=struct_from_dict({"agent": {"type": "telepathy"}}))
            )
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "telepathy" in err.value.details() and "naive" in err.value.details()
        early = client.play()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await early.observe(pol_pb.Observe(observation=types_pb2.Observation()))
        assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        info = await client.get_info(
            check_config={"agent": {"type": "naive"}, "client": {"client_name": "openai"}}
        )
        assert "naive" in info.strategies and "local" in info.backends
        assert any("OPENAI_API_KEY" in e for e in info.config_errors)
