"""VLM mode end to end: the env's PNG frames reach the model in the provider's image format.

Real Env and Policy servers on loopback play BabyAI and Crafter; the model is a local HTTP
server speaking the provider's wire format, which records every request. Each provider's
request is decoded back to PNG bytes and checked: one image per covered observation, only the
newest ``max_image_history`` observations carry one, and the image-only mode still delivers
the invalid-action feedback and the short-term context in text."""

from __future__ import annotations

import io
from typing import Any

import pytest
from PIL import Image

from orchestrator.plan.spec import load_spec
from tests.support.providers import PROVIDERS, TEST_KEY, Provider
from tests.support.servers import play_one_episode

TASKS = {"babyai": "BabyAI-MixedTrainLocal-v0/goto", "crafter": "default"}


def _is_png(data: bytes) -> tuple[int, int]:
    image = Image.open(io.BytesIO(data))
    assert image.format == "PNG"
    return image.size


async def _play(provider: Provider, env: str, reply: str, steps: int, *overrides: str,
                ) -> list[dict[str, Any]]:
    with provider.start(reply) as server:
        spec = load_spec(None, [*provider.overrides(server.base_url), "client.max_retries=0",
                                f"eval.max_steps_per_episode={steps}", *overrides])
        record = await play_one_episode(spec, env, TASKS[env], 5, run_id="vlm")
        requests = [r.json for r in server.requests if r.json is not None]
    assert record.end_reason == "truncated" and record.num_steps == steps
    return requests


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
@pytest.mark.parametrize("env", ["babyai", "crafter"])
async def test_frames_reach_the_model_and_only_the_newest_keep_them(
        provider: Provider, env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if provider.key_env:
        monkeypatch.setenv(provider.key_env, TEST_KEY)
    requests = await _play(provider, env, "noop" if env == "crafter" else "turn left", 4,
                           "agent.max_image_history=2", "agent.max_text_history=4")
    assert len(requests) == 4
    per_request = [provider.images(r) for r in requests]
    counts = [sum(len(m) for m in msgs) for msgs in per_request]
    assert counts == [1, 2, 2, 2]  # current frame, plus one past frame once there is one
    for msgs in per_request:
        assert msgs[-1], "the current observation carries its frame"
        for data in (d for m in msgs for d in m):
            width, height = _is_png(data)
            assert width > 0 and height > 0
    # consecutive requests: the previous current frame is the newest past frame
    assert per_request[1][-3] == per_request[0][-1]


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
async def test_image_only_mode_still_delivers_feedback_and_short_term_context(
        provider: Provider, monkeypatch: pytest.MonkeyPatch) -> None:
    if provider.key_env:
        monkeypatch.setenv(provider.key_env, TEST_KEY)
    requests = await _play(provider, "crafter", "dance wildly", 2,
                           "agent.max_image_history=1", "agent.max_text_history=0")
    last = requests[-1]
    assert sum(len(m) for m in provider.images(last)) == 1
    text = provider.last_text(last)
    assert "valid" in text.lower() and "noop" in text.lower()  # the feedback: default applied
    assert "inventory" in text.lower()  # Crafter's short-term context
