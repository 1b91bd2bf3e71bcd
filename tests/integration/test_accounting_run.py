"""Accounting through a whole run: per-step model, stop reason and attempts; usage per model,
env and task; the cost estimate from the price table; saved prompts; no key on disk.

Real Env and Policy servers on loopback; the OpenAI backend talks to a local HTTP server that
speaks the chat-completions wire format (with cached and reasoning token details)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from orchestrator.core.runner import run_evaluation
from orchestrator.plan.spec import load_spec
from orchestrator.report.accounting import load_prices
from tests.support.fake_openai import Behaviour, FakeOpenAI
from tests.support.servers import env_server, policy_server

PLANTED_KEY = "sk-test-PLANTED-0123456789abcdef"
USAGE = {
    "prompt_tokens": 1000,
    "completion_tokens": 50,
    "total_tokens": 1050,
    "prompt_tokens_details": {"cached_tokens": 400},
    "completion_tokens_details": {"reasoning_tokens": 30},
}


async def _run(tmp_path: Path, fake: FakeOpenAI, *overrides: str) -> dict:
    async with env_server() as env, policy_server() as pol:
        spec = load_spec(None, [
            "envs.names=babyai", "eval.num_episodes.babyai=1", "eval.num_samples=2",
            "eval.max_steps_per_episode=3", f"eval.output_dir={tmp_path}",
            "client.client_name=openai", "client.model_id=gpt-4o",
            f"client.base_url={fake.base_url}", "client.delay=0.01",
            f"endpoints.env.babyai=[{env.target}]", f"endpoints.policy=[{pol.target}]",
            *overrides])
        outcome = await run_evaluation(spec, console=Console(quiet=True), show_progress=False)
    return outcome.summary


async def test_usage_cost_and_saved_prompts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            ) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_KEY)
    with FakeOpenAI("go forward") as fake:
        fake.script(Behaviour(status=429, headers={"retry-after": "0.01"}),
                    *[Behaviour(usage=USAGE)] * 6)
        summary = await _run(tmp_path, fake, "eval.save_prompts=true")
        assert len(fake.requests) == 7  # 2 episodes x 3 steps, plus the one 429
    episodes = [json.loads(p.read_text()) for p in sorted(tmp_path.rglob("*_run_00.json"))]
    assert len(episodes) == 2
    steps = [s for e in episodes for s in e["steps"]]
    assert {s["model"] for s in steps} == {"openai/gpt-4o"}
    assert {s["stop_reason"] for s in steps} == {"stop"}
    assert sorted(s["attempts"] for s in steps) == [1, 1, 1, 1, 1, 2]
    assert all(s["cached_input_tokens"] == 400 and s["reasoning_tokens"] == 30 for s in steps)

    usage = summary["models"]["openai/gpt-4o"]
    assert (usage["calls"], usage["input_tokens"], usage["output_tokens"]) == (6, 6000, 300)
    assert (usage["cached_input_tokens"], usage["reasoning_tokens"]) == (2400, 180)
    assert usage["latency_s"] > 0
    # gpt-4o in the shipped table: $2.50 uncached, $1.25 cached input, $10 output per 1M
    expected = (3600 * 2.50 + 2400 * 1.25 + 300 * 10.00) / 1e6
    assert summary["cost_usd"] == pytest.approx(expected)
    assert summary["prices"]["as_of"] == load_prices().as_of
    env = summary["environments"]["babyai"]
    assert env["cost_usd"] == pytest.approx(expected)
    assert sum(t["cost_usd"] for t in env["tasks"].values()) == pytest.approx(expected)
    assert all(t["models"]["openai/gpt-4o"]["calls"] == 3 for t in env["tasks"].values())

    prompt_files = sorted(tmp_path.rglob("*.prompts.jsonl"))
    assert len(prompt_files) == 2
    lines = [json.loads(line) for line in prompt_files[0].read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 1, 2]
    first = lines[0]["prompt"]
    assert first[0]["role"] == "system"
    assert first[-1]["content"].startswith("Observation (step 0):")
    sent = fake.requests[1].json  # the first successful request of some episode
    assert sent is not None and any(
        line["prompt"][-1]["content"] == sent["messages"][-1]["content"]
        for f in prompt_files for line in map(json.loads, f.read_text().splitlines()))
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert PLANTED_KEY not in path.read_text(errors="replace"), path


async def test_unpriced_model_and_custom_price_table(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED_KEY)
    table = tmp_path / "prices.yaml"
    table.write_text("as_of: '2026-11-01'\nmodels:\n  my-model: {input: 1.0, output: 2.0}\n")
    with FakeOpenAI("go forward") as fake:
        fake.script(*[Behaviour(usage=USAGE)] * 6)
        summary = await _run(tmp_path / "a", fake, "client.model_id=my-model")
        assert summary["cost_usd"] is None
        assert summary["unpriced_models"] == ["openai/my-model"]
        fake.script(*[Behaviour(usage=USAGE)] * 6)
        summary = await _run(tmp_path / "b", fake, "client.model_id=my-model",
                             f"eval.prices={table}")
    assert summary["cost_usd"] == pytest.approx((6000 * 1.0 + 300 * 2.0) / 1e6)
    assert summary["prices"] == {"source": str(table), "as_of": "2026-11-01", "currency": "USD"}
