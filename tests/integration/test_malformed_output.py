"""Malformed model output, for every provider: the env applies its default action, the raw
output is kept in ``failed_candidates``, and the next prompt tells the model what happened."""

from __future__ import annotations

import pytest

from orchestrator.plan.spec import load_spec
from tests.support.providers import PROVIDERS, TEST_KEY, Provider
from tests.support.servers import play_one_episode


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
async def test_malformed_output_gives_default_action_and_feedback(
        provider: Provider, monkeypatch: pytest.MonkeyPatch) -> None:
    if provider.key_env:
        monkeypatch.setenv(provider.key_env, TEST_KEY)
    with provider.start("I like turtles") as server:
        spec = load_spec(None, [*provider.overrides(server.base_url), "client.max_retries=0",
                                "eval.max_steps_per_episode=2"])
        record = await play_one_episode(spec, "babyai", "BabyAI-MixedTrainLocal-v0/goto", 3)
        requests = [r.json for r in server.requests if r.json is not None]
    assert record.end_reason == "truncated"
    assert [(s.action, s.valid) for s in record.steps] == [("go forward", False)] * 2
    assert record.failed_candidates == ["I like turtles"] * 2
    feedback = provider.last_text(requests[1])
    assert "go forward" in feedback and "valid" in feedback.lower()
    # the trajectory keeps what the model was shown
    assert record.steps[0].feedback and record.steps[0].feedback in feedback
    assert "turtles" not in provider.last_text(requests[0])
