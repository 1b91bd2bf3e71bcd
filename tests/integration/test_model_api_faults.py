"""A BabyAI run against a flaky model API: every episode is played, and the retries the faults
caused are counted in the summary, exactly.

The chat server (``FaultyOpenAI``, OpenAI's real wire format) injects from a seeded RNG 10 %
HTTP 500s, 5 % timeouts (the answer is held twice ``client.timeout``, which is long enough that a
loaded machine does not time out a real answer) and 5 % 429s with
``retry-after: 0``. The run goes through ``run_evaluation`` with the real env and policy
servers on loopback and the official OpenAI SDK in the policy server.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from orchestrator.core.runner import run_evaluation
from orchestrator.plan.spec import load_spec
from tests.support.faulty_openai import FaultyOpenAI
from tests.support.servers import env_server, policy_server

FAKE_KEY = "sk-test-SECRET-1234"
EPISODES = 6
STEPS = 8


async def test_run_completes_through_injected_faults_and_counts_retries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    with FaultyOpenAI("go forward", seed=1234, p_500=0.10, p_timeout=0.05, p_429=0.05,
                      hold_s=8.0) as server:
        async with env_server() as env, policy_server() as pol:
            spec = load_spec(None, [
                "envs.names=babyai", "tasks.babyai_tasks=[BabyAI-MixedTrainLocal-v0/goto]",
                f"eval.num_episodes.babyai={EPISODES}",
                f"eval.max_steps_per_episode={STEPS}", "eval.num_workers=3",
                f"eval.output_dir={tmp_path}",
                "client.client_name=openai", "client.model_id=gpt-4o",
                f"client.base_url={server.base_url}", "client.timeout=4.0",
                "client.delay=0.01", "client.max_retries=30",
                f"endpoints.env.babyai=[{env.target}]", f"endpoints.policy=[{pol.target}]"])
            outcome = await run_evaluation(spec, console=Console(quiet=True),
                                           show_progress=False)
        injected = server.injected
        answered = server.answered
        sent = len(server.requests)

    summary = outcome.summary
    # every planned episode was played, none lost to the faults
    assert outcome.verdict is not None and outcome.verdict.succeeded
    assert summary["episodes_total"] == EPISODES
    assert summary["episodes_played"] == EPISODES
    assert summary["end_reasons"]["agent_error"] == 0
    # the seeded RNG did inject every kind of fault
    assert all(count > 0 for count in injected.values()), injected
    # every injected fault cost a retry (a loaded machine may add a real timeout of its own,
    # so exactly what the server saw is checked: each answered request was one model call and
    # every other request one retry)
    assert summary["model_retries"] >= sum(injected.values())
    assert summary["model_calls"] == answered
    assert sent == summary["model_calls"] + summary["model_retries"]
    env_figures = summary["environments"]["babyai"]
    assert (env_figures["model_retries"], env_figures["model_calls"]) == (
        summary["model_retries"], summary["model_calls"])
    # the summary on disk says the same, and the per-step attempts add up
    on_disk = json.loads((tmp_path / "summary.json").read_text())
    assert on_disk["model_retries"] == summary["model_retries"]
    steps = [s for p in tmp_path.rglob("*_run_*.json")
             for s in json.loads(p.read_text())["steps"]]
    assert sum(s["attempts"] - 1 for s in steps) == summary["model_retries"]
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert FAKE_KEY not in path.read_text(errors="replace"), path
