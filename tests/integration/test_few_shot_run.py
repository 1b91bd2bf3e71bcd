"""A few_shot run end to end: real Env and Policy servers on loopback, a local server speaking
the chat-completions wire format, demonstrations read from a moria-demo/1 file.

Every episode's prompt carries the same demonstrations, none of which replays a planned game,
and the run chooses them once for the whole plan rather than once per episode (a per-episode
walk over the plan made a run's cost grow with the square of its episodes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from orchestrator.core.runner import run_evaluation
from orchestrator.plan.spec import load_spec
from orchestrator.store import demos
from orchestrator.store.demos import (
    DemoRecord,
    DemoStepRecord,
    append_demos,
    demo_file,
    evaluation_seeds,
)
from tests.support.fake_openai import FakeOpenAI
from tests.support.servers import env_server, policy_server

GOTO = "BabyAI-GoToObjS4-v0"
EPISODES = 3


def _demo(seed: int) -> DemoRecord:
    return DemoRecord(
        env="babyai", task=GOTO, seed=seed, source="babyai-bot",
        instruction="You are playing BabyAI.\nYour goal: go to the ball.",
        progression=1.0,
        steps=(DemoStepRecord(f"DEMO-{seed} a ball 1 step forward", "go forward", 1.0),))


async def test_few_shot_run_sends_the_plan_s_demonstrations_to_every_episode(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-few-shot")
    demo_dir, out = tmp_path / "demos", tmp_path / "run"
    overrides = [
        "envs.names=babyai", f"tasks.babyai_tasks=[{GOTO}]",
        f"eval.num_episodes.babyai={EPISODES}", "eval.max_steps_per_episode=2",
        "agent.type=few_shot", f"eval.icl_dataset={demo_dir}", "eval.icl_episodes=2",
        f"eval.output_dir={out}", "client.client_name=openai", "client.model_id=gpt-4o",
        "client.delay=0.01"]
    planned = sorted(evaluation_seeds(load_spec(None, overrides), "babyai", GOTO))
    # The file's first line replays a planned game: it must be left out of every episode.
    append_demos(demo_file(demo_dir, "babyai", GOTO), [_demo(s) for s in (planned[1], 7, 8, 9)])
    demos.clear_cache()
    walks: list[tuple[str, str]] = []

    def counted(spec: object, env: str, task: str) -> set[int]:
        walks.append((env, task))
        return evaluation_seeds(spec, env, task)  # type: ignore[arg-type]

    monkeypatch.setattr(demos, "evaluation_seeds", counted)
    with FakeOpenAI("go forward") as fake:
        async with env_server() as env, policy_server() as pol:
            spec = load_spec(None, [*overrides, f"client.base_url={fake.base_url}",
                                    f"endpoints.env.babyai=[{env.target}]",
                                    f"endpoints.policy=[{pol.target}]"])
            outcome = await run_evaluation(spec, console=Console(quiet=True),
                                           show_progress=False)
        requests = [r.json for r in fake.requests]

    assert outcome.ran == EPISODES and outcome.verdict is not None and outcome.verdict.succeeded
    assert walks == []  # chosen once by the runner's preflight, not per episode
    assert len(requests) >= EPISODES
    for request in requests:
        assert request is not None
        text = json.dumps(request["messages"])
        assert "DEMO-7" in text and "DEMO-8" in text  # eval.icl_episodes=2, in file order
        assert f"DEMO-{planned[1]}" not in text and "DEMO-9" not in text
