"""Retries exhausted end an episode the same way for every provider: ``agent_error`` with the
error text, counted apart from scored episodes; rerunning into the same directory plays only
those episodes again.

Real Env and Policy servers on loopback; each provider's backend talks through its official SDK
to a local server speaking that provider's wire format, scripted to fail with HTTP 500."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from orchestrator.core.runner import run_evaluation
from orchestrator.plan.spec import load_spec
from tests.support.providers import PROVIDERS, TEST_KEY, Provider
from tests.support.servers import env_server, policy_server


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
async def test_exhausted_retries_are_agent_errors_and_only_they_rerun(
        provider: Provider, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if provider.key_env:
        monkeypatch.setenv(provider.key_env, TEST_KEY)
    reply = "go forward"
    with provider.start(reply) as server:
        async with env_server() as env, policy_server() as pol:
            spec = load_spec(None, [
                *provider.overrides(server.base_url), "client.max_retries=1",
                "client.delay=0.01", "eval.num_workers=1", "eval.num_samples=2",
                "eval.max_steps_per_episode=2", f"eval.output_dir={tmp_path}",
                f"endpoints.env.babyai=[{env.target}]", f"endpoints.policy=[{pol.target}]"])
            # episode 1 (goto #0): 2 steps succeed; episode 2 (pickup #0): its first call
            # fails twice (the try and the one retry)
            answer = type(provider.server_error())  # the fake's Behaviour: default = a reply
            server.script(answer(), answer(), provider.server_error(), provider.server_error())
            first = await run_evaluation(spec, console=Console(quiet=True),
                                         show_progress=False)
            good = sorted(tmp_path.rglob("*goto_run_00.json"))[0]
            good_text = good.read_text()
            failed = json.loads(sorted(tmp_path.rglob("*pickup_run_00.json"))[0].read_text())
            second = await run_evaluation(spec, console=Console(quiet=True),
                                          show_progress=False)
    assert first.ran == 2
    assert first.summary["end_reasons"]["agent_error"] == 1
    assert first.summary["episodes_played"] == 1
    assert failed["end_reason"] == "agent_error" and failed["num_steps"] == 0
    assert "retries exhausted after 2 attempts" in failed["error"]
    assert second.ran == 1 and second.skipped == 1  # only the agent_error episode ran again
    assert second.summary["end_reasons"]["agent_error"] == 0
    assert second.summary["episodes_played"] == 2
    assert good.read_text() == good_text  # the completed episode was left alone
