"""Honest outcomes: a run in which episodes failed never looks like a result.

Real env and policy servers on loopback, a local server speaking OpenAI's wire format for the
model, ``moria eval`` as a real process and the orchestrator service over gRPC. Each case is one
that used to be reported as a success (exit 0, ``RUN_STATE_SUCCEEDED``)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from moria.codecs import dict_from_struct
from moria.orchestrator.v1 import orchestrator_service_pb2 as pb
from moria.records import EpisodeRecord
from orchestrator.report.outcome import verdict
from tests.integration.test_orchestrator_service import follow_all, orchestrator
from tests.support.fake_openai import Behaviour, FakeOpenAI
from tests.support.servers import env_server, policy_server

MORIA = [sys.executable, "-c",
         "import sys; from orchestrator.apps.cli import main; sys.exit(main())"]
TASKS = ("BabyAI-MixedTrainLocal-v0/goto", "BabyAI-MixedTrainLocal-v0/pickup")


def failing_model_overrides(base_url: str) -> list[str]:
    """A run of one episode per task whose model answers every chat call with HTTP 500 (the
    fake is scripted per test) and gives up at once."""
    return ["agent.type=naive", "client.client_name=vllm", f"client.base_url={base_url}",
            "client.model_id=m",
            "client.max_retries=0", "client.delay=0.01", "envs.names=babyai",
            f"tasks.babyai_tasks=[{','.join(TASKS)}]", "eval.num_episodes.babyai=1",
            "eval.num_workers=1", "eval.max_steps_per_episode=3"]


def servers(env: Any, pol: Any) -> list[str]:
    """The overrides that point a babyai run at the env and policy servers started here."""
    return [f"endpoints.env.babyai=[{env.target}]", f"endpoints.policy=[{pol.target}]"]


async def moria(*args: str, cwd: Path, timeout: float = 300.0) -> tuple[int, str, str]:
    """Run ``moria`` as a real process (the test's event loop keeps serving meanwhile);
    returns (exit code, stdout, stderr)."""
    process = await asyncio.create_subprocess_exec(
        *MORIA, *args, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), timeout)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_every_episode_failed_exits_1_with_the_reason(tmp_path: Path) -> None:
    with FakeOpenAI() as model:
        model.script(*[Behaviour(status=500) for _ in range(10)])
        async with env_server() as env, policy_server() as pol:
            code, _, err = await moria(
                "eval", *failing_model_overrides(model.base_url), "--no-progress",
                f"eval.output_dir={tmp_path / 'out'}", *servers(env, pol), cwd=tmp_path)
    assert code == 1, err[-3000:]
    assert "failed: 2 of 2 episode(s) failed (agent_error: 2); 0 scored" in err
    assert "scripted error 500" in err  # the provider's own message, not just a count
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["outcome"]["state"] == "failed"
    assert summary["outcome"]["exit_code"] == 1
    assert summary["outcome"]["failed_by_reason"] == {"agent_error": 2}
    assert summary["outcome"]["errors"][0].startswith(f"babyai/{TASKS[0]}#0: ")
    assert summary["episodes_played"] == 0 and summary["average_progress"] is None


async def test_every_episode_failed_ends_the_service_run_failed(tmp_path: Path) -> None:
    from tests.integration.test_orchestrator_service import run_spec

    with FakeOpenAI() as model:
        model.script(*[Behaviour(status=500) for _ in range(10)])
        async with env_server() as env, policy_server() as pol, \
                orchestrator(tmp_path / "state", allowed_endpoints=[env.target, pol.target],
                             ) as (client, _):
            spec = run_spec(env.target, pol.target, 1, *failing_model_overrides(model.base_url))
            await client.submit_run(spec, run_id="all-failed")
            events = await follow_all(client, "all-failed")
            run = await client.get_run("all-failed")
    assert events[-1].type == "failed"
    assert run.state == pb.RUN_STATE_FAILED
    assert "2 of 2 episode(s) failed (agent_error: 2)" in run.error
    assert "scripted error 500" in run.error
    outcome = dict_from_struct(run.summary)["outcome"]
    assert outcome["state"] == "failed" and outcome["episodes_failed"] == 2


async def test_a_scored_run_succeeds_with_its_verdict(tmp_path: Path) -> None:
    async with env_server() as env, policy_server() as pol:
        code, _, err = await moria(
            "eval", "agent.type=oracle", "envs.names=babyai", "eval.num_episodes.babyai=1",
            f"tasks.babyai_tasks=[{TASKS[0]}]", "--no-progress",
            f"eval.output_dir={tmp_path / 'out'}", *servers(env, pol), cwd=tmp_path)
    assert code == 0, err[-3000:]
    assert "succeeded: all 1 episode(s) scored" in err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["outcome"] == {
        "state": "succeeded", "exit_code": 0, "episodes_planned": 1, "episodes_scored": 1,
        "episodes_failed": 0, "failed_by_reason": {}, "episodes_missing": 0, "errors": []}
    assert summary["invalid_action_rate"] == 0.0 and summary["actions"] > 0


def _record(index: int, end_reason: Any, error: str = "") -> EpisodeRecord:
    return EpisodeRecord(run_id="r", env="babyai", task="t", episode_index=index, seed=index,
                         end_reason=end_reason, error=error)


def test_the_verdict_counts_missing_and_repeated_errors() -> None:
    records = [_record(0, "terminated"), _record(1, "agent_error", "HTTP 401"),
               _record(2, "agent_error", "HTTP 401"), _record(3, "env_error", "lost server")]
    planned = [("babyai", "t", i) for i in range(5)]
    result = verdict(records, planned)
    assert (result.planned, result.scored, result.missing) == (5, 1, 1)
    assert result.failed == {"agent_error": 2, "env_error": 1}
    assert result.exit_code == 1 and result.state == "failed"
    assert result.errors == ("babyai/t#1: HTTP 401 (and 1 more episode(s))",
                             "babyai/t#3: lost server")
    assert verdict(records[:1], planned[:1]).succeeded


@pytest.mark.parametrize("override, message", [
    ("eval.num_episodes.babyai=0", "the run plans no episode"),
    ("eval.num_episodes.babyai=1000000000", "at most 1,000,000 per run"),
])
async def test_plans_out_of_bounds_exit_2(tmp_path: Path, override: str, message: str) -> None:
    code, _, err = await moria("eval", "envs.names=babyai", override, cwd=tmp_path,
                               timeout=60)
    assert code == 2 and message in err and "Traceback" not in err


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
async def test_a_local_server_that_exits_stops_the_run_at_once(tmp_path: Path,
                                                               how: str) -> None:
    """The local env server leaves mid-run, drained (exit code 0) or killed: the run stops
    at once naming it and its exit status, instead of failing the remaining episodes one by
    one."""
    import signal

    import psutil

    process = await asyncio.create_subprocess_exec(
        *MORIA, "eval", "agent.type=dummy", "envs.names=babyai",
        "eval.num_episodes.babyai=200", "eval.num_workers=1", "eval.output_dir=out",
        "--no-progress", cwd=tmp_path, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    try:
        async def first_episode_written() -> None:
            while not list((tmp_path / "out").rglob("*_run_*.json")):
                assert process.returncode is None, "moria eval ended before its first episode"
                await asyncio.sleep(0.05)

        await asyncio.wait_for(first_episode_written(), 180)
        children = psutil.Process(process.pid).children()
        env = [c for c in children if "env_server" in " ".join(c.cmdline())]
        assert len(env) == 1, [c.cmdline() for c in children]
        env[0].send_signal(getattr(signal, how))
        _, err = await asyncio.wait_for(process.communicate(), 120)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    status = "code 0" if how == "SIGTERM" else "code -9"
    assert process.returncode == 1, err.decode()[-2000:]
    assert f"env_server exited with {status}" in err.decode()
    assert len(list((tmp_path / "out").rglob("*_run_*.json"))) < 1000


class _KeyRefusingOpenAI(FakeOpenAI):
    """The OpenAI wire format with a key the provider refuses: every route answers 401."""

    def handle_get(self, out: Any) -> None:
        out.send_json(401, self.error_json(401, "Incorrect API key provided"))


async def test_a_refused_key_stops_the_run_at_preflight(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-a-secret")  # read by the policy server
    with _KeyRefusingOpenAI() as model:
        async with env_server() as env, policy_server() as pol:
            code, _, err = await moria(
                "eval", "client.client_name=openai", f"client.base_url={model.base_url}",
                "client.model_id=m", "envs.names=babyai", "eval.num_episodes.babyai=1",
                "eval.output_dir=out", *servers(env, pol), "--no-progress", cwd=tmp_path)
        chat_calls = [r for r in model.requests if r.path.endswith("/chat/completions")]
    assert code == 2, err[-2000:]
    assert f"openai endpoint {model.base_url}/ refused the key" in err
    assert "bad API key for openai (HTTP 401; check OPENAI_API_KEY)" in err
    assert "test-key-not-a-secret" not in err
    assert not chat_calls and not list((tmp_path / "out").rglob("*_run_*.json"))


async def test_an_unreachable_model_endpoint_stops_the_run_at_preflight(tmp_path: Path) -> None:
    import socket

    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
        async with env_server() as env, policy_server() as pol:
            code, _, err = await moria(
                "eval", "client.client_name=vllm", f"client.base_url={url}", "client.model_id=M",
                "envs.names=babyai", "eval.output_dir=out", *servers(env, pol), "--no-progress",
                cwd=tmp_path)
    assert code == 2, err[-2000:]
    assert f"vllm endpoint {url}/ cannot be used: connection error" in err
    assert not list((tmp_path / "out").rglob("*_run_*.json"))
