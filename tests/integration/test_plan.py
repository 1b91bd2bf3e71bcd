"""``moria plan`` and ``moria eval --dry-run`` as a user runs them (the CLI, real local env and
policy servers): nothing reaches the model endpoint, no result directory is written, and the
estimate made from the first prompts is within the documented error of what a run against the
same endpoint then measured; after that run the plan rests on its recorded usage.

The endpoint is a fake OpenAI-compatible server that counts prompt tokens the way a BPE
tokenizer splits the request text (``tests.support.counting_openai``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.plan.estimate import DOCUMENTED_ERROR
from orchestrator.suites.balrog import SUITE_ENVS
from tests.support.counting_openai import TokenCountingOpenAI

ROOT = Path(__file__).resolve().parents[2]
KEY = {"OPENAI_API_KEY": "test-key-not-a-secret"}


def moria(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI in a subprocess, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "orchestrator.apps.cli", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, **KEY, **(env or {}), "COLUMNS": "200"})


def _spec(fake: TokenCountingOpenAI, out: Path) -> list[str]:
    # two BabyAI tasks, 2 episodes each, 24 steps: past BALROG's 16-step window, so the
    # prompts grow and then stop growing; the fake always goes forward, so every episode runs
    # to its cap (the case the documented error is for)
    return ["envs.names=babyai",
            "tasks.babyai_tasks=[BabyAI-MixedTrainLocal-v0/goto,BabyAI-MixedTrainLocal-v0/open]",
            "eval.num_episodes.babyai=2", "eval.max_steps_per_episode=24",
            "client.client_name=openai", "client.model_id=gpt-4o",
            f"client.base_url={fake.base_url}", "client.delay=0.01", f"eval.output_dir={out}"]


def _plan(*args: str) -> dict:
    run = moria("plan", "--json", "--no-progress", *args)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout)


def test_plan_sends_nothing_and_its_estimate_is_within_the_documented_error(tmp_path: Path,
                                                                            ) -> None:
    out = tmp_path / "run"
    with TokenCountingOpenAI("go forward") as fake:
        spec = _spec(fake, out)
        before = _plan(*spec)
        dry = moria("eval", "--dry-run", "--no-progress", *spec)
        assert dry.returncode == 0, dry.stderr[-3000:]
        assert len(fake.requests) == 0  # neither sent the model endpoint anything
        assert not out.exists()  # nor wrote a result directory
        assert "nothing was sent to a provider" in dry.stdout
        assert "gpt-4o" in dry.stdout and "$" in dry.stdout

        total = before["total"]
        assert before["requests_sent_to_providers"] == 0 and before["stand_in_calls"] > 0
        assert [t["basis"] for t in before["tasks"]] == ["first prompt"] * 2
        assert [t["step_cap"] for t in before["tasks"]] == [24, 24]
        assert total["calls"] == {"estimate": 96, "max": 96}
        assert total["cost_usd"]["estimate"] > 0
        assert total["cost_usd"]["at_cap"] > total["cost_usd"]["estimate"]
        assert before["documented_error"]["prompt_tokens"] == DOCUMENTED_ERROR
        assert any("no earlier runs" in a for a in before["assumptions"])

        run = moria("eval", "--no-progress", *spec)
        assert run.returncode == 0, run.stderr[-3000:]
        sent = len(fake.requests)
        assert sent == 96
        measured = json.loads((out / "summary.json").read_text())["models"]["openai/gpt-4o"]
        ratio = total["prompt_tokens"]["estimate"] / measured["input_tokens"]
        print(f"estimated/measured prompt tokens: {ratio:.3f}")
        assert abs(ratio - 1) <= DOCUMENTED_ERROR, (total["prompt_tokens"], measured)
        assert measured["calls"] == total["calls"]["estimate"]
        assert measured["output_tokens"] <= total["completion_tokens"]["max"]

        # the run is found beside the spec's output: the plan now rests on its recorded usage
        after = _plan(*spec)
        assert len(fake.requests) == sent
    assert [t["basis"] for t in after["tasks"]] == ["earlier runs of this task"] * 2
    assert [t["recorded_episodes"] for t in after["tasks"]] == [2, 2]
    assert after["total"]["prompt_tokens"]["estimate"] == measured["input_tokens"]
    assert after["total"]["completion_tokens"]["estimate"] == measured["output_tokens"]
    assert after["latency_basis"] == "earlier runs"
    # ... unless told to ignore it
    alone = _plan(*spec, "--no-runs")
    assert alone["total"]["prompt_tokens"] == before["total"]["prompt_tokens"]


def test_a_bad_spec_or_task_exits_2_with_one_error_line(tmp_path: Path) -> None:
    bad = moria("plan", "eval.sed=1", f"eval.output_dir={tmp_path / 'a'}")
    assert bad.returncode == 2 and "unknown key 'eval.sed'" in bad.stderr
    unknown = moria("plan", "envs.names=babyai", "tasks.babyai_tasks=[Nope]",
                    f"eval.output_dir={tmp_path / 'b'}")
    assert unknown.returncode == 2
    assert "error: babyai task 'Nope' cannot start" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    latency = moria("eval", "--dry-run", "--latency", "-1")
    assert latency.returncode == 2  # a flag of plan only: eval refuses it
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_the_balrog_suite_with_gpt_4o_prints_its_estimate_and_cost(tmp_path: Path) -> None:
    # every task of the six envs (58 first prompts; TextWorld's games built into a private
    # cache first), against the fake endpoint: it must get no request
    with TokenCountingOpenAI("go forward") as fake:
        run = moria("plan", "--suite", "balrog", "client.client_name=openai",
                    "client.model_id=gpt-4o", f"client.base_url={fake.base_url}",
                    f"eval.output_dir={tmp_path / 'run'}", "--no-progress",
                    env={"MORIA_CACHE_DIR": str(tmp_path / "cache")})
        assert len(fake.requests) == 0
    assert run.returncode == 0, run.stderr[-3000:]
    print(run.stdout)
    lines = run.stdout.splitlines()
    assert "gpt-4o" in lines[0]
    for env in SUITE_ENVS:
        row = next(line for line in lines if line.startswith(f"│ {env} ") and "│" in line[2:])
        assert "$" in row and "unpriced" not in row, row
    total = next(line for line in lines if line.startswith("│ total"))
    assert " 58 " in total and " 255 " in total  # tasks and episodes of the whole suite
    assert "wall time: about" in run.stdout and "assumptions:" in run.stdout
    assert "nothing was sent to a provider" in run.stdout
    assert not (tmp_path / "run").exists()
