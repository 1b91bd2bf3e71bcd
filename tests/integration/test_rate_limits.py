"""``client.max_tokens_per_minute`` through whole runs over two Policy servers: against a local
OpenAI-compatible server that answers 429 past its tokens-per-minute limit
(``tests.support.metered_openai``, counting as OpenAI documents: the prompt's estimate plus
max_tokens), a run given the server's limit gets (almost) no 429, where the same run without
it gets many; each turn's wait on the limit is recorded. Wall times are compared by
``benchmarks/rate_limits.py``, not here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from orchestrator.core.runner import run_evaluation
from orchestrator.plan.spec import load_spec
from tests.support.metered_openai import MeteredOpenAI
from tests.support.servers import env_server, policy_server

#: The server's limit: about two thirds of what the run needs (16 calls of 410-520 tokens as
#: the server counts them), so the run has to wait about half a minute for the rest.
TOKENS_PER_MINUTE = 4800


async def _run(out: Path, fake: MeteredOpenAI, *overrides: str) -> dict:
    async with env_server() as env, policy_server() as first, policy_server() as second:
        spec = load_spec(None, [
            "envs.names=babyai", "eval.num_episodes.babyai=1", "eval.num_samples=4",
            "eval.max_steps_per_episode=4", "eval.num_workers=4", f"eval.output_dir={out}",
            "client.client_name=openai", "client.model_id=fake-model",
            f"client.base_url={fake.base_url}", "client.delay=0.01", "client.max_retries=50",
            "client.generate_kwargs.max_tokens=16",
            f"endpoints.env.babyai=[{env.target}]",
            f"endpoints.policy=[{first.target},{second.target}]", *overrides])
        outcome = await run_evaluation(spec, console=Console(quiet=True), show_progress=False)
    assert outcome.verdict is not None and outcome.verdict.exit_code == 0
    return outcome.summary


@pytest.mark.slow
async def test_a_run_held_to_the_servers_token_limit_is_not_throttled(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    with MeteredOpenAI("go forward", tokens_per_minute=TOKENS_PER_MINUTE) as fake:
        await _run(tmp_path / "unlimited", fake)
        unlimited = fake.throttled
    with MeteredOpenAI("go forward", tokens_per_minute=TOKENS_PER_MINUTE) as fake:
        await _run(tmp_path / "limited", fake,
                   f"client.max_tokens_per_minute={TOKENS_PER_MINUTE}")
        limited = fake.throttled
        assert fake.billed()["calls"] == 16
    assert unlimited >= 8, unlimited
    assert limited <= 1, limited
    steps = [s for p in (tmp_path / "limited").rglob("*_run_*.json")
             for s in json.loads(p.read_text())["steps"]]
    assert len(steps) == 16
    assert sum(s["rate_limit_wait_s"] for s in steps) > 5  # the run waited, not the server


@pytest.mark.slow
async def test_a_call_held_longer_than_the_idle_timeout_keeps_its_stream(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a 2 s idle timeout, and a limit that holds calls for several seconds once its first
    # minute's worth is spent: the waiting stream is pinged, never ended and re-queued
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    with MeteredOpenAI("go forward") as fake:
        async with env_server() as env, policy_server(idle_timeout_s=2.0) as pol:
            spec = load_spec(None, [
                "envs.names=babyai", "tasks.babyai_tasks=[BabyAI-MixedTrainLocal-v0/goto]",
                "eval.num_episodes.babyai=1", "eval.max_steps_per_episode=8",
                f"eval.output_dir={tmp_path}", "client.client_name=openai",
                "client.model_id=fake-model", f"client.base_url={fake.base_url}",
                "client.generate_kwargs.max_tokens=16", "client.max_tokens_per_minute=2400",
                f"endpoints.env.babyai=[{env.target}]", f"endpoints.policy=[{pol.target}]"])
            outcome = await run_evaluation(spec, console=Console(quiet=True),
                                           show_progress=False)
    assert outcome.verdict is not None and outcome.verdict.exit_code == 0
    [episode] = [json.loads(p.read_text()) for p in tmp_path.rglob("*_run_00.json")]
    assert episode["attempts"] == 1 and not episode["retry_errors"]
    assert max(s["rate_limit_wait_s"] for s in episode["steps"]) > 2.0
