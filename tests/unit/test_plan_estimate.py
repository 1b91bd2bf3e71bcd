"""The arithmetic of ``moria plan`` (``orchestrator.plan.estimate``) and its printing and
pricing (``orchestrator.apps.plan``), without servers: the window model, the growth of one
remembered step, earlier runs' usage, wall time, cost (unpriced is never 0) and the stand-in
endpoint."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from orchestrator.apps.plan import (
    StandInModel,
    estimate_json,
    model_name,
    planned_tasks,
    probe_spec,
    render,
    stand_in_client,
)
from orchestrator.plan.estimate import (
    DEFAULT_LATENCY_S,
    IMAGE_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    REPLY_PRIMING_TOKENS,
    PlanEstimate,
    Recorded,
    SeatProbe,
    TaskProbe,
    assumptions_for,
    byte_tokenizer,
    chat_tokens,
    concurrency_of,
    estimate_task,
    latency_for,
    recorded_usage,
    run_directories,
    step_tokens,
    tokenizer_for,
    window_sum,
)
from orchestrator.plan.spec import load_spec
from orchestrator.report.accounting import price_table

BYTES = byte_tokenizer()


def _seat(**kw: Any) -> SeatProbe:
    base: dict[str, Any] = dict(agent_id="agent_0", agent_type="naive", model="openai/gpt-4o",
                                calls_model=True, first_prompt=400, images=0, step_tokens=30.0,
                                calls_per_step=1.0, answer_tokens=3.0, window=16, cot_window=1,
                                max_tokens=4096)
    return SeatProbe(**{**base, **kw})


def _probe(*seats: SeatProbe, episodes: int = 2, cap: int = 20) -> TaskProbe:
    return TaskProbe(env="babyai", task="t", episodes=episodes, step_cap=cap,
                     seats=seats or (_seat(),), probe_steps=4)


@pytest.mark.parametrize("window", [0, 1, 3, 16])
@pytest.mark.parametrize("n", [0, 1, 2, 5, 17, 18, 100])
def test_window_sum_is_the_sum_it_names(n: int, window: int) -> None:
    assert window_sum(n, window) == sum(min(k, window) for k in range(n))


@pytest.mark.parametrize("agent_type", ["naive", "cot", "plan_action", "robust_cot"])
@pytest.mark.parametrize("calls", [0, 1, 2, 7, 40])
def test_prompt_tokens_is_the_sum_of_each_calls_prompt(agent_type: str, calls: int) -> None:
    seat = _seat(agent_type=agent_type, window=5, cot_window=2)
    assert seat.prompt_tokens(calls) == pytest.approx(sum(seat.prompt_at(j)
                                                          for j in range(calls)))


def test_prompt_grows_with_the_window_then_stays() -> None:
    seat = _seat(window=3, step_tokens=10.0)
    assert [seat.prompt_at(j) for j in range(6)] == [400, 410, 420, 430, 430, 430]
    assert _seat(window=0).prompt_at(9) == 400  # no history: every prompt is the first
    # cot keeps its newest answer's reasoning (250 tokens assumed) from the second call on
    cot = _seat(agent_type="cot", window=0, cot_window=1)
    assert [cot.prompt_at(j) for j in range(3)] == [400, 650, 650]
    assert _seat(agent_type="cot", window=0, cot_window=1, max_tokens=100).prompt_at(5) == 500


def test_completion_assumption_per_strategy_capped_by_max_tokens() -> None:
    assert _seat().completion_tokens() == 1 + 3  # one action name (3 tokens) and its end
    assert _seat(agent_type="cot").completion_tokens() == 250 + 4 + 3
    assert _seat(agent_type="cot", max_tokens=64).completion_tokens() == 64


def _chat(*contents: str, images: int = 0) -> list[dict[str, Any]]:
    roles = ["system"] + ["user", "assistant"] * len(contents)
    chat = [{"role": role, "content": c, "images": []} for role, c in zip(roles, contents,
                                                                          strict=False)]
    chat[-1]["images"] = ["ab" * 32] * images
    return chat


def test_chat_tokens_counts_text_overhead_and_images() -> None:
    tokens, images = chat_tokens(_chat("x" * 40, "y" * 8, images=2), BYTES)
    assert images == 2
    assert tokens == (REPLY_PRIMING_TOKENS + 2 * MESSAGE_OVERHEAD_TOKENS + 10 + 2
                      + 2 * IMAGE_TOKENS)


def test_one_remembered_step_is_the_first_observation_again_plus_an_answer() -> None:
    system, obs0, obs1 = "s" * 400, "o" * 80, "n" * 800  # the new observation is unusually long
    first = _chat(system, obs0)
    second = [*first, {"role": "assistant", "content": "help", "images": []},
              {"role": "user", "content": obs1, "images": []}]
    # 20 tokens of the first observation + 3 of the answer (the stand-in's 1-token "help"
    # swapped for the 3-token mean action name) + two messages' overhead; obs1's size is not
    # counted
    assert step_tokens(first, second, BYTES, "help", 3.0) == 20 + 3 + 2 * MESSAGE_OVERHEAD_TOKENS
    # the episode ended at once: the first observation stands in for the history it would add
    assert step_tokens(first, None, BYTES, "help", 3.0) == 20 + 3 + 2 * MESSAGE_OVERHEAD_TOKENS


def test_tokenizers_fall_back_to_bytes_and_never_download(monkeypatch: pytest.MonkeyPatch,
                                                          ) -> None:
    assert BYTES.count("") == 0 and BYTES.count("abcde") == 2 and BYTES.count("é") == 1
    assert tokenizer_for("anthropic", "claude-sonnet-4-20250514").name == BYTES.name
    assert tokenizer_for("local", None).name == BYTES.name
    tiktoken_load = pytest.importorskip("tiktoken.load")
    reader = tiktoken_load.read_file
    fetched: list[str] = []
    monkeypatch.setattr("requests.get", lambda url, *a, **k: fetched.append(url))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # no cache: an encoding could only be fetched
    tokenizer_for.cache_clear()
    found = tokenizer_for("openai", "gpt-4o")
    assert fetched == [] and found.name == BYTES.name
    assert tiktoken_load.read_file is reader  # the reader is put back
    tokenizer_for.cache_clear()


def test_no_earlier_runs_every_episode_to_its_cap() -> None:
    task = estimate_task(_probe(episodes=3, cap=20), None)
    assert task.basis == "first prompt" and task.steps_per_episode == 20
    est, cap = task.total("estimate"), task.total("at_cap")
    assert est.calls == cap.calls == 60
    assert est.input_tokens == cap.input_tokens == 3 * _seat().prompt_tokens(20)
    assert est.output_tokens == 60 * 4 and cap.output_tokens == 60 * 4096
    assert task.first_prompt_tokens == 400 and task.growth_per_step == 30


def test_turn_based_seats_and_players_without_a_model() -> None:
    mover = _seat(agent_id="player_1", calls_per_step=0.5)
    bot = _seat(agent_id="player_2", agent_type="random", calls_model=False, calls_per_step=0)
    task = estimate_task(_probe(mover, bot, episodes=1, cap=9), None)
    assert task.total("estimate").calls == 5  # X moves first: 5 of 9 moves


def test_earlier_runs_replace_the_assumptions() -> None:
    recorded = Recorded()
    for steps in (10, 14):
        recorded.add(steps, {"openai/gpt-4o": {"calls": steps, "input_tokens": steps * 500,
                                               "output_tokens": steps * 2,
                                               "cached_input_tokens": steps * 100,
                                               "latency_s": steps * 0.5}}, "/r")
    task = estimate_task(_probe(episodes=4, cap=20), recorded, "earlier runs of this task")
    assert task.basis == "earlier runs of this task" and task.recorded_episodes == 2
    assert task.steps_per_episode == 12
    est = task.total("estimate")
    assert (est.calls, est.input_tokens, est.output_tokens, est.cached_input_tokens) == (
        48, 24_000, 96, 4_800)
    cap = task.total("at_cap")
    assert cap.calls == 80 and cap.input_tokens >= est.input_tokens
    assert latency_for(None, [recorded]) == (0.5, "earlier runs")
    assert latency_for(3.0, [recorded]) == (3.0, "given")
    assert latency_for(None, []) == (DEFAULT_LATENCY_S, "assumed")


def _write_run(root: Path, name: str, spec_overrides: list[str], episodes: list[dict[str, Any]],
               ) -> Path:
    run = root / name
    spec = load_spec(None, spec_overrides)
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"run_id": name,
                                              "spec": spec.model_dump(mode="json")}))
    for i, fields in enumerate(episodes):
        folder = run / "babyai" / "T"
        folder.mkdir(parents=True, exist_ok=True)
        doc = {"run_id": name, "env": "babyai", "task": "T", "episode_index": i, "seed": i + 1,
               "end_reason": "truncated", "num_steps": 10,
               "usage_by_model": {"openai/gpt-4o": {"calls": 10, "input_tokens": 5000,
                                                    "output_tokens": 20, "latency_s": 7.0}},
               **fields}
        (folder / f"T_run_{i:02d}.json").write_text(json.dumps(doc))
    return run


def test_recorded_usage_counts_only_matching_scored_episodes(tmp_path: Path) -> None:
    mine = ["client.client_name=openai", "client.model_id=gpt-4o", "tasks.babyai_tasks=[T]"]
    _write_run(tmp_path, "same", mine, [{}, {"end_reason": "agent_error"}, {"num_steps": 20}])
    _write_run(tmp_path, "other-model", [*mine, "client.model_id=gpt-4o-mini"], [{}])
    _write_run(tmp_path, "other-window", [*mine, "agent.max_text_history=2"], [{}])
    (tmp_path / "not-a-run").mkdir()
    broken = _write_run(tmp_path, "broken", mine, [{}])
    (broken / "babyai" / "T" / "T_run_00.json").write_text("{not json")
    assert [p.name for p in run_directories([tmp_path, tmp_path / "same"])] == [
        "broken", "other-model", "other-window", "same"]
    by_task, by_env, warnings = recorded_usage(load_spec(None, mine), [tmp_path])
    recorded = by_task[("babyai", "T")]
    assert recorded.episodes == 2 and recorded.steps == 30  # the agent_error one is left out
    assert recorded.calls == 20 and by_env["babyai"].episodes == 2
    assert recorded.runs == {str(tmp_path / "same")}
    assert len(warnings) == 1 and "broken" in warnings[0]
    assert recorded_usage(load_spec(None, mine), [tmp_path / "missing"]) == ({}, {}, [])


def test_wall_time_and_concurrency() -> None:
    spec = load_spec(None, ["envs.names=babyai", "eval.num_episodes.babyai=2",
                            "eval.num_workers=16"])
    assert concurrency_of(spec) == 10  # 5 tasks x 2 episodes: never more than the episodes
    spec = load_spec(None, ["eval.num_workers=16", "eval.max_concurrent_model_calls=3"])
    assert concurrency_of(spec) == 3
    task = estimate_task(_probe(episodes=40, cap=10), None)
    plan = PlanEstimate([task], concurrency=8, latency_s=2.0, latency_basis="assumed",
                        tokenizer=BYTES.name, assumptions=[])
    assert plan.wall_time_s() == 400 / 8 * 2.0
    slow = PlanEstimate([estimate_task(_probe(episodes=1, cap=100), None)], concurrency=8,
                        latency_s=2.0, latency_basis="assumed", tokenizer="", assumptions=[])
    assert slow.wall_time_s() == 100 * 2.0  # one episode's calls run one after another


def _plan(model: str) -> tuple[Any, PlanEstimate]:
    spec = load_spec(None, ["client.client_name=openai", f"client.model_id={model}"])
    task = estimate_task(_probe(_seat(model=f"openai/{model}"), episodes=2, cap=10), None)
    plan = PlanEstimate([task], concurrency=2, latency_s=1.0, latency_basis="assumed",
                        tokenizer=BYTES.name,
                        assumptions=assumptions_for(spec, BYTES, [task], "assumed", 1.0))
    return spec, plan


def test_cost_from_the_price_table_and_unpriced_is_never_zero() -> None:
    prices = price_table({"as_of": "2026-01-01",
                          "models": {"gpt-4o": {"input": 2.5, "output": 10.0}}}, "test")
    spec, plan = _plan("gpt-4o")
    data = estimate_json(spec, plan, prices, stand_in_calls=3)
    usage = plan.total()
    expected = (usage.input_tokens * 2.5 + usage.output_tokens * 10.0) / 1e6
    assert data["total"]["cost_usd"]["estimate"] == pytest.approx(expected)
    assert data["total"]["cost_usd"]["at_cap"] > data["total"]["cost_usd"]["estimate"]
    assert data["requests_sent_to_providers"] == 0 and data["stand_in_calls"] == 3
    assert data["tasks"][0]["calls"] == {"estimate": 20, "max": 20}
    spec, plan = _plan("my-model")
    data = estimate_json(spec, plan, prices, stand_in_calls=0)
    assert data["total"]["cost_usd"] == {"estimate": None, "at_cap": None}
    assert data["total"]["unpriced_models"] == ["openai/my-model"]
    console = Console(record=True, width=200)
    render(data, console)
    text = console.export_text()
    assert "unpriced" in text and "openai/my-model" in text and "$0.00" not in text
    assert "no earlier runs: assuming every episode runs to its step cap" in text
    assert "bare action name" in text and "UTF-8 bytes / 4" in text


def test_probe_spec_points_every_seat_at_the_stand_in_and_keeps_the_prompt_settings() -> None:
    spec = load_spec(None, ["client.client_name=anthropic", "client.model_id=claude-x",
                            "client.alternate_roles=true", "client.generate_kwargs.max_tokens=77",
                            "envs.names=pettingzoo", "players.player_2.client.client_name=openai"])
    probe = probe_spec(spec, "http://127.0.0.1:9/v1", "m")
    for client in (probe.client, probe.players["player_2"].client):
        assert client is not None
        assert (client.client_name, client.base_url, client.model_id) == (
            "vllm", "http://127.0.0.1:9/v1", "m")
    assert probe.client.alternate_roles and probe.client.generate_kwargs.max_tokens == 77
    assert probe.eval.save_prompts and not spec.eval.save_prompts
    assert spec.client.client_name == "anthropic"  # the spec itself is untouched
    assert model_name(spec.client) == "anthropic/claude-x"
    assert stand_in_client(spec.client, "u", "m").max_retries == 0


def test_planned_tasks_counts_episodes_and_first_index() -> None:
    spec = load_spec(None, ["envs.names=babyai", "eval.num_episodes.babyai=3",
                            "eval.num_samples=7"])
    tasks = planned_tasks(spec)
    assert sum(count for count, _ in tasks.values()) == 7
    assert all(first == 0 for _, first in tasks.values())


def test_stand_in_answers_each_model_with_its_reply_and_counts() -> None:
    with StandInModel(default_reply="wait") as stand_in:
        stand_in.reply_for("a", "go forward")

        def ask(model: str) -> str:
            body = json.dumps({"model": model, "messages": [{"role": "user",
                                                             "content": "hi"}]}).encode()
            request = urllib.request.Request(f"{stand_in.base_url}/chat/completions",
                                             data=body, method="POST",
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=5) as answer:
                return str(json.loads(answer.read())["choices"][0]["message"]["content"])

        assert ask("a") == "go forward" and ask("b") == "wait"
        assert stand_in.calls == 2


def test_the_plan_compares_its_estimate_with_the_cap_and_the_rate_limits() -> None:
    from orchestrator.apps.plan import limits_json
    from orchestrator.plan.spec import load_spec

    total = {"cost_usd": {"estimate": 12.0}, "calls": {"estimate": 100},
             "prompt_tokens": {"estimate": 100_000}}
    plain = load_spec(None, [])
    assert limits_json(plain, total) == {"max_cost_usd": None, "estimate_fits_cap": None,
                                         "wall_time_floor_s": {}}
    capped = load_spec(None, ["eval.max_cost_usd=10", "client.max_requests_per_minute=50",
                              "client.max_tokens_per_minute=30000",
                              "client.generate_kwargs.max_tokens=1000"])
    limits = limits_json(capped, total)
    assert limits["max_cost_usd"] == 10 and limits["estimate_fits_cap"] is False
    # 100 calls at 50 a minute; 100k prompt + 100 x 1000 output tokens at 30k a minute
    assert limits["wall_time_floor_s"] == {"max_requests_per_minute": 120.0,
                                           "max_tokens_per_minute": 400.0}
    assert limits_json(capped, {**total, "cost_usd": {"estimate": None}})[
        "estimate_fits_cap"] is None
