"""Bounds on what one request or command line can make the orchestrator do: huge plans, huge
or hostile specs, unknown tasks, server files named as price tables, and user errors of the CLI.

Real env and policy servers and an OrchestratorService on loopback; ``moria eval`` as a real
process. Each case used to cost memory, seconds of a blocked event loop, a folder per bad task
or a traceback."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest

from moria.orchestrator.v1 import orchestrator_service_pb2 as pb
from moria.server_files import ServerFiles
from orchestrator.plan.spec import MAX_EPISODES
from tests.integration.test_orchestrator_service import follow_all, orchestrator, run_spec
from tests.integration.test_run_outcomes import TASKS, moria, servers
from tests.support.servers import env_server, policy_server

#: Far below the 16 KiB gRPC limit on trailing metadata: an error quotes its input bounded.
MAX_DETAILS = 4096
#: Where nothing listens: the endpoints of specs that are refused (or cancelled) before any
#: episode; the service is told it may dial them (--allowed-endpoints).
NOWHERE = "127.0.0.1:9"


async def refused(client: Any, spec: dict[str, Any], run_id: str = "") -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await client.submit_run(spec, run_id=run_id)
    return caught.value


async def test_a_plan_over_the_maximum_is_refused_without_planning(tmp_path: Path) -> None:
    async with orchestrator(tmp_path / "state", allowed_endpoints=[NOWHERE]) as (client,
                                                                              servicer):
        spec = run_spec(NOWHERE, NOWHERE, 1)
        spec["eval"]["num_episodes"]["babyai"] = 10**9
        error = await refused(client, spec)
        # the service still answers at once afterwards
        listed = await asyncio.wait_for(client.list_runs(), 5)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"at most {MAX_EPISODES:,} per run" in (error.details() or "")
    assert "the run plans 1,000,000,000 episodes" in (error.details() or "")
    assert not listed.runs and not servicer.runs


@pytest.mark.parametrize("keys", [5_000, 100_000])
async def test_unknown_keys_get_a_bounded_invalid_argument(tmp_path: Path, keys: int) -> None:
    async with orchestrator(tmp_path / "state", allowed_endpoints=[NOWHERE]) as (client, _):
        spec = run_spec(NOWHERE, NOWHERE, 1)
        spec["eval"].update({f"bogus_\x01_{i}": i for i in range(keys)})
        error = await refused(client, spec)
    details = error.details() or ""
    assert len(details.encode()) < MAX_DETAILS
    if keys < 100_000:
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert f"and {keys - 20} more" in details or "bytes; at most" in details
    else:  # 2.8 MB: refused by its size before it is read (a submission takes at most 2 MiB)
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "larger than max" in details


async def test_a_hostile_run_id_is_quoted_bounded(tmp_path: Path) -> None:
    async with orchestrator(tmp_path / "state", allowed_endpoints=[NOWHERE]) as (client, _):
        error = await refused(client, run_spec(NOWHERE, NOWHERE, 1),
                              run_id="\x00" * 100_000)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert len((error.details() or "").encode()) < MAX_DETAILS


async def test_unknown_tasks_fail_the_run_before_any_episode(tmp_path: Path) -> None:
    async with env_server() as env, policy_server() as pol, \
            orchestrator(tmp_path / "state", allowed_endpoints=[env.target, pol.target],
                         ) as (client, _):
        spec = run_spec(env.target, pol.target, 1)
        spec["tasks"]["babyai_tasks"] = [TASKS[0], *(f"no-such-task-{i}" for i in range(1000))]
        await client.submit_run(spec, run_id="bad-tasks")
        events = await follow_all(client, "bad-tasks")
        run = await client.get_run("bad-tasks")
    assert events[-1].type == "failed" and run.state == pb.RUN_STATE_FAILED
    assert "1000 unknown task(s) in tasks.babyai_tasks: 'no-such-task-0'" in run.error
    assert "and 980 more" in run.error and len(run.error.encode()) < MAX_DETAILS
    assert not [p for p in (tmp_path / "state" / "runs" / "bad-tasks").glob("babyai*")]
    assert not list((tmp_path / "state" / "runs").rglob("*_run_*.json"))


@pytest.mark.parametrize("path", ["/etc/passwd", "/no/such/file.yaml", "../../prices.yaml"])
async def test_price_files_of_the_server_are_not_readable(tmp_path: Path, path: str) -> None:
    async with orchestrator(tmp_path / "state", allowed_endpoints=[NOWHERE]) as (client, _):
        spec = run_spec(NOWHERE, NOWHERE, 1)
        spec["eval"]["prices"] = path
        error = await refused(client, spec)
    details = error.details() or ""
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    # the same answer whether or not the file exists, and nothing of its content
    assert "this server offers none (it runs without --prices-dir)" in details
    assert "give the price table inline" in details and "root" not in details


async def test_price_files_are_taken_from_the_prices_dir_only(tmp_path: Path) -> None:
    prices = tmp_path / "prices"
    prices.mkdir()
    (prices / "lab.yaml").write_text("as_of: '2026-01-01'\nmodels: {}\n")
    async with env_server() as env, policy_server() as pol, \
            orchestrator(tmp_path / "state", files=ServerFiles({"prices": prices}),
                         allowed_endpoints=[env.target, pol.target]) as (client, _):
        outside = run_spec(env.target, pol.target, 1)
        outside["eval"]["prices"] = "../prices/lab.yaml"
        error = await refused(client, outside)
        inside = run_spec(env.target, pol.target, 1)
        inside["eval"]["prices"] = "lab.yaml"
        await client.submit_run(inside, run_id="priced")
        await follow_all(client, "priced")
        run = await client.get_run("priced")
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "is not a name the server offers" in (error.details() or "")
    assert run.state == pb.RUN_STATE_SUCCEEDED, run.error


async def test_an_inline_price_table_is_used(tmp_path: Path) -> None:
    async with env_server() as env, policy_server() as pol, \
            orchestrator(tmp_path / "state", allowed_endpoints=[env.target, pol.target],
                         ) as (client, _):
        spec = run_spec(env.target, pol.target, 1)
        spec["eval"]["prices"] = {"as_of": "2026-11-01", "models": {"m": {"input": 1,
                                                                        "output": 2}}}
        await client.submit_run(spec, run_id="inline")
        await follow_all(client, "inline")
        run = await client.get_run("inline")
    assert run.state == pb.RUN_STATE_SUCCEEDED, run.error
    summary = (tmp_path / "state" / "runs" / "inline" / "summary.json").read_text()
    assert '"source": "inline"' in summary and '"as_of": "2026-11-01"' in summary


# -- the CLI: a user error is one line and exit code 2, never a traceback ---------------------
def _one_error(err: str) -> str:
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


async def test_malformed_yaml_config_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("eval:\n  num_workers: [1,\n")
    code, _, err = await moria("eval", "--config", "run.yaml", cwd=tmp_path, timeout=60)
    assert code == 2
    assert f"{config.name}: not valid YAML/JSON at line" in _one_error(err)


@pytest.mark.parametrize("make, expected", [
    (lambda d: (d / "taken").write_text("x") and d / "taken", "exists and is not a directory"),
    (lambda d: (d / "file").write_text("x") and d / "file" / "sub", "cannot be created"),
])
async def test_unusable_output_dir_exits_2(tmp_path: Path, make: Any, expected: str) -> None:
    target = make(tmp_path)
    async with env_server() as env, policy_server() as pol:
        code, _, err = await moria(
            "eval", "agent.type=oracle", "envs.names=babyai", "eval.num_episodes.babyai=1",
            f"eval.output_dir={target}", *servers(env, pol), "--no-progress", cwd=tmp_path,
            timeout=120)
    assert code == 2
    line = _one_error(err)
    assert str(target.resolve()) in line and expected in line


async def test_an_unknown_second_task_exits_2_before_any_episode(tmp_path: Path) -> None:
    async with env_server() as env, policy_server() as pol:
        code, _, err = await moria(
            "eval", "agent.type=oracle", "envs.names=babyai", "eval.num_episodes.babyai=1",
            f"tasks.babyai_tasks=[{TASKS[0]},goto-typo]", "eval.output_dir=out",
            *servers(env, pol),
            "--no-progress", cwd=tmp_path, timeout=120)
    assert code == 2
    assert "1 unknown task(s) in tasks.babyai_tasks: 'goto-typo'" in _one_error(err)
    assert not list((tmp_path / "out").rglob("*_run_*.json"))


@pytest.mark.parametrize("variable, allowed", [("OPENAI_API_KEY", False), ("MORIA_TOKEN", True)])
async def test_a_submitted_token_env_is_one_the_service_lends(
        tmp_path: Path, variable: str, allowed: bool) -> None:
    async with orchestrator(tmp_path / "state", allowed_endpoints=[NOWHERE]) as (client, _):
        spec = run_spec(NOWHERE, NOWHERE, 1)
        spec["endpoints"]["token_env"] = variable
        if allowed:
            await client.submit_run(spec, run_id="lent")
            await client.cancel_run("lent")
            return
        error = await refused(client, spec)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "allowed (--token-envs): MORIA_TOKEN" in (error.details() or "")
