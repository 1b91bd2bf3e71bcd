"""``eval.max_cost_usd`` through whole runs: real Env and two Policy servers on loopback, the
OpenAI backend against a local server that bills tokens by its own count
(``tests.support.metered_openai``). The run never spends past its cap by the server's count;
cut episodes end ``budget_exhausted``, unscored, the run FAILED saying why; a resume with a
higher cap plays them; an unpriced model with a cap is refused before anything is sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from orchestrator.core.runner import PreflightError, RunOutcome, run_evaluation
from orchestrator.plan.spec import load_spec
from tests.support.metered_openai import MeteredOpenAI
from tests.support.servers import env_server, policy_server

#: Dollars per million tokens of the fake model: a tenth of a cent per token.
PRICE = 1000.0


def _prices(tmp_path: Path) -> Path:
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump({"as_of": "test", "currency": "USD", "models": {
        "openai/fake-model": {"input": PRICE, "output": PRICE}}}))
    return path


async def _run(out: Path, fake: MeteredOpenAI, prices: Path, *overrides: str) -> RunOutcome:
    async with env_server() as env, policy_server() as first, policy_server() as second:
        spec = load_spec(None, [
            "envs.names=babyai", "eval.num_episodes.babyai=1", "eval.num_samples=4",
            "eval.max_steps_per_episode=6", "eval.num_workers=4", f"eval.output_dir={out}",
            f"eval.prices={prices}", "client.client_name=openai", "client.model_id=fake-model",
            f"client.base_url={fake.base_url}", "client.delay=0.01",
            "client.generate_kwargs.max_tokens=16",
            f"endpoints.env.babyai=[{env.target}]",
            f"endpoints.policy=[{first.target},{second.target}]", *overrides])
        return await run_evaluation(spec, console=Console(quiet=True), show_progress=False)


def _server_cost(fake: MeteredOpenAI) -> float:
    billed = fake.billed()
    return (billed["input_tokens"] + billed["output_tokens"]) * PRICE / 1e6


async def test_a_capped_run_never_spends_past_its_cap_and_a_resume_plays_the_rest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    prices, out = _prices(tmp_path), tmp_path / "run"
    cap = 5.0
    with MeteredOpenAI("go forward") as fake:
        outcome = await _run(out, fake, prices, f"eval.max_cost_usd={cap}")
        spent_by_server = _server_cost(fake)
        calls_first = fake.billed()["calls"]

        assert 0 < spent_by_server <= cap
        budget = outcome.summary["budget"]
        assert budget["max_cost_usd"] == cap
        assert budget["spent_usd"] == pytest.approx(spent_by_server)
        assert budget["reserved_usd"] == pytest.approx(0.0, abs=1e-9)
        assert budget["refused_calls"] >= 1
        assert json.loads((out / "budget.json").read_text())["spent_usd"] == pytest.approx(
            spent_by_server)

        reasons = outcome.summary["end_reasons"]
        assert reasons["budget_exhausted"] >= 1
        assert outcome.verdict is not None and outcome.verdict.exit_code == 1
        assert any("eval.max_cost_usd $5.00 reached" in e for e in outcome.verdict.errors)
        cut = [json.loads(p.read_text()) for p in out.rglob("*_run_*.json")]
        cut = [e for e in cut if e.get("end_reason") == "budget_exhausted"]
        assert cut and all("resume with a higher cap" in e["error"] for e in cut)
        assert outcome.summary["episodes_played"] == 4 - reasons["budget_exhausted"]

        # the same run again with a higher cap plays what the cap cut, from what was spent
        resumed = await _run(out, fake, prices, "eval.max_cost_usd=1000")
        assert resumed.verdict is not None and resumed.verdict.exit_code == 0
        assert resumed.summary["end_reasons"]["budget_exhausted"] == 0
        assert fake.billed()["calls"] > calls_first
        assert resumed.summary["budget"]["spent_usd"] == pytest.approx(_server_cost(fake))


async def test_a_cap_on_an_unpriced_model_is_refused_before_any_call(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    with MeteredOpenAI("go forward") as fake:
        with pytest.raises(PreflightError, match="openai/unpriced-model has no price"):
            await _run(tmp_path / "run", fake, _prices(tmp_path), "eval.max_cost_usd=5",
                       "client.model_id=unpriced-model")
        assert fake.requests == []


async def test_a_capped_run_submitted_to_the_service_reports_its_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from moria.orchestrator.v1 import orchestrator_service_pb2 as pb
    from orchestrator.apps.remote import OrchestratorClient
    from tests.support.servers import start_orchestrator

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    with MeteredOpenAI("go forward") as fake:
        async with env_server() as env, policy_server() as pol:
            server, servicer = await start_orchestrator(
                tmp_path / "state", allowed_endpoints=[env.target, pol.target])
            client = OrchestratorClient(server.bound_address, reconnect_s=5.0,
                                        retry_wait_s=0.01)
            try:
                spec = load_spec(None, [
                    "envs.names=babyai", "eval.num_episodes.babyai=1", "eval.num_samples=2",
                    "eval.max_steps_per_episode=6", "eval.num_workers=2",
                    "eval.max_cost_usd=2", "client.client_name=openai",
                    "client.model_id=fake-model", f"client.base_url={fake.base_url}",
                    "client.generate_kwargs.max_tokens=16",
                    f"endpoints.env.babyai=[{env.target}]",
                    f"endpoints.policy=[{pol.target}]"]).model_dump(mode="json")
                spec["eval"]["prices"] = {"as_of": "test", "currency": "USD", "models": {
                    "openai/fake-model": {"input": PRICE, "output": PRICE}}}
                await client.submit_run(spec, run_id="capped")
                events: list[pb.RunEvent] = []
                await client.follow("capped", events.append)
                run = await client.get_run("capped")
            finally:
                await client.close()
                await server.shutdown()
                await servicer.aclose()
    assert run.state == pb.RUN_STATE_FAILED
    assert run.HasField("budget") and run.budget.max_cost_usd == 2
    assert 0 < run.budget.spent_usd <= 2 and run.budget.refused_calls >= 1
    assert run.budget.spent_usd == pytest.approx(_server_cost(fake))
    assert "budget" in [e.type for e in events]
