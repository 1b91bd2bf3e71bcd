"""The local stack (``orchestrator.core.stack.LocalStack``): several env and policy servers as
real children, episodes spread over them, and a crashed env server started again."""

from __future__ import annotations

import asyncio
import importlib
import io
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from moria.clients import EnvClient, PolicyClient, check_health
from orchestrator.core import runner
from orchestrator.core.events import RunEvent
from orchestrator.core.stack import (
    INLINE_WHEN_RESTARTING,
    LOCAL_ENV_RESTARTS,
    PRIVATE_POLICY_CAPACITY,
    PROCESS_FAMILIES,
    LocalStack,
    StackError,
    local_env_restarts,
)
from orchestrator.plan.spec import EndpointsConfig, load_spec
from tests.support.servers import env_server, policy_server


async def test_two_env_and_two_policy_servers_answer_and_each_plays_episodes(
        tmp_path: Path) -> None:
    async with LocalStack(["babyai"], tmp_path / "logs", env_capacity=16, env_servers=2,
                          policy_servers=2) as stack:
        assert len(set(stack.env_targets)) == 2 and len(set(stack.policy_targets)) == 2
        assert stack.env_target == stack.env_targets[0]
        assert stack.policy_target == stack.policy_targets[0]
        assert [c.name for c in stack.children] == ["env_server", "env_server-2",
                                                     "agent_server", "agent_server-2"]
        assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == [
            "agent_server-2.log", "agent_server.log", "env_server-2.log", "env_server.log"]
        for target in (*stack.env_targets, *stack.policy_targets):
            assert await check_health(target, timeout=5.0), target
        for target in stack.env_targets:  # the capacity is split between the env servers
            assert (await EnvClient(target).get_info()).capacity == 8

        started: list[dict[str, Any]] = []

        def note(event: RunEvent) -> None:
            if event.kind == "episode_started":
                started.append(dict(event.fields))

        spec = load_spec(None, ["agent.type=oracle", "eval.num_episodes.babyai=2",
                                "eval.num_workers=4", f"eval.output_dir={tmp_path / 'out'}"])
        spec.endpoints = EndpointsConfig(env={"babyai": stack.env_targets},
                                         policy=stack.policy_targets)
        outcome = await runner.run_evaluation(spec, console=Console(quiet=True),
                                              show_progress=False, sinks=[note])
    assert outcome.ran == 10 and outcome.verdict is not None and outcome.verdict.succeeded
    assert {e["env_server"] for e in started} == set(stack.env_targets)
    assert {e["policy_server"] for e in started} == set(stack.policy_targets)


async def _run_on(env_targets: list[str], policy_targets: list[str], out: Path,
                  workers: int, episodes_per_task: int) -> tuple[int, str]:
    """A random-agent BabyAI run of 3-step episodes on these servers: (episodes run, what it
    printed)."""
    printed = io.StringIO()
    spec = load_spec(None, ["agent.type=random", f"eval.num_episodes.babyai={episodes_per_task}",
                            f"eval.num_workers={workers}", "eval.max_steps_per_episode=3",
                            f"eval.output_dir={out}"])
    spec.endpoints = EndpointsConfig(env={"babyai": env_targets}, policy=policy_targets)
    outcome = await runner.run_evaluation(spec, console=Console(file=printed, width=400),
                                          show_progress=False)
    assert outcome.verdict is not None and outcome.verdict.succeeded, printed.getvalue()
    return outcome.ran, printed.getvalue()


async def test_the_stacks_policy_servers_never_hold_the_runs_episodes_back(
        tmp_path: Path) -> None:
    """More episodes at once than a policy server's default capacity (256): the local stack's
    servers take them all, where a server of small capacity makes the run say it waits."""
    async with LocalStack(["babyai"], tmp_path / "logs", env_capacity=1024) as stack:
        info = await PolicyClient(stack.policy_target).get_info()
        assert (info.capacity, info.peer_capacity) == (PRIVATE_POLICY_CAPACITY,) * 2
        ran, printed = await _run_on(stack.env_targets, stack.policy_targets,
                                     tmp_path / "wide", workers=300, episodes_per_task=60)
    assert ran == 300 and "note:" not in printed, printed
    async with env_server(capacity=64) as env, policy_server(capacity=8) as pol:
        ran, printed = await _run_on([env.target], [pol.target], tmp_path / "narrow",
                                     workers=16, episodes_per_task=4)
    assert ran == 20
    assert ("note: eval.num_workers=16 but the policy servers let this client hold at most 6 "
            "at once (their --capacity, or their --max-sessions-per-peer / "
            "--max-streams-per-peer); episodes beyond that wait for a slot") in printed, printed


def test_counts_and_the_isolate_flag() -> None:
    logs = Path("unused")
    with pytest.raises(ValueError, match="env_servers=0"):
        LocalStack(["babyai"], logs, env_servers=0)
    with pytest.raises(ValueError, match="env_restarts must be >= 0"):
        LocalStack(["babyai"], logs, env_restarts=-1)
    families = ["nle", "textworld", "minihack", "babyai"]
    assert "--isolate" not in LocalStack(families, logs).env_args  # the families' defaults
    # restarting: the NetHack families inline, TextWorld (not thread-safe) still in workers
    assert LocalStack(families, logs, env_restarts=2).env_args == ["--isolate", "textworld"]
    assert LocalStack(["nle"], logs, env_restarts=1).env_args == ["--isolate", ""]
    assert LocalStack(families, logs, env_restarts=1,
                      env_args=("--isolate=nle",)).env_args == ["--isolate=nle"]


def test_the_process_families_are_the_env_servers() -> None:
    """``PROCESS_FAMILIES`` repeats what env_server's families declare (the orchestrator may
    not import env_server): a family that needs worker processes must be listed, or a
    restarting stack would run it inline."""
    from env_server.families import FAMILIES

    declared = set()
    for name, entry_point in FAMILIES.items():
        module, _, cls = entry_point.partition(":")
        if getattr(importlib.import_module(module), cls).isolation == "process":
            declared.add(name)
    assert declared == PROCESS_FAMILIES
    assert INLINE_WHEN_RESTARTING <= PROCESS_FAMILIES


async def _until(condition: Any, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_a_crashed_env_server_is_started_again_until_the_restarts_run_out(
        tmp_path: Path) -> None:
    async with LocalStack(["babyai"], tmp_path, with_agent=False, env_restarts=1) as stack:
        child = stack.env_children[0]
        assert child.argv[-2:] == ("--isolate", "")
        watch = asyncio.create_task(stack.watch(every_s=0.05))
        first = child.process.pid
        os.kill(first, signal.SIGKILL)
        await _until(lambda: child.process.poll() is not None or child.process.pid != first)
        stack.check_alive()  # a crash watch will restart is no reason to stop the run
        await _until(lambda: stack.restarts == 1)
        await _until(lambda: child.announced_ready())
        assert await check_health(stack.env_target, timeout=10.0)
        assert not watch.done()
        assert (await EnvClient(stack.env_target).get_info()).active_sessions == 0
        os.kill(child.process.pid, signal.SIGKILL)  # no restart left: the run stops
        with pytest.raises(StackError, match="env_server exited with code -9"):
            await asyncio.wait_for(watch, 30)
        with pytest.raises(StackError):
            stack.check_alive()
    assert (tmp_path / "env_server.log").read_text().count("READY ") == 2


async def test_an_env_server_stopped_on_purpose_is_not_started_again(tmp_path: Path) -> None:
    async with LocalStack(["babyai"], tmp_path, with_agent=False, env_restarts=3) as stack:
        watch = asyncio.create_task(stack.watch(every_s=0.05))
        stack.env_children[0].process.send_signal(signal.SIGTERM)  # drains, exits 0
        with pytest.raises(StackError, match="env_server exited with code 0"):
            await asyncio.wait_for(watch, 30)
        assert stack.restarts == 0


@pytest.mark.parametrize("overrides", [
    ["agent.type=oracle", "eval.num_episodes.babyai=1"],
    # NetHack games inline in the env server (the restarting stack's --isolate '')
    ["agent.type=random", "envs.names=minihack", "eval.num_samples=3",
     "eval.max_steps_per_episode=15"],
], ids=["babyai", "minihack-inline"])
async def test_episodes_of_a_crashed_env_server_are_replayed_not_counted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, overrides: list[str]) -> None:
    """The whole runner over a restarting stack: the env server is killed mid-episode; the
    episodes in flight fail as infrastructure faults and are played again on the restarted
    server, and every planned episode ends with a real result."""
    if "envs.names=minihack" in overrides:
        pytest.importorskip("minihack")
    stacks: list[LocalStack] = []

    class Restarting(LocalStack):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**kwargs, "env_restarts": 1})
            stacks.append(self)

    monkeypatch.setattr(runner, "LocalStack", Restarting)
    killed: list[int] = []
    retried: list[dict[str, Any]] = []

    def crash_once(event: RunEvent) -> None:
        if event.kind == "step" and not killed:
            pid = stacks[0].env_children[0].process.pid
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        elif event.kind == "episode_retried":
            retried.append(dict(event.fields))

    spec = load_spec(None, [*overrides, "eval.num_workers=2", f"eval.output_dir={tmp_path}"])
    planned = spec.episode_count()
    outcome = await runner.run_evaluation(spec, console=Console(quiet=True),
                                          show_progress=False, sinks=[crash_once])
    assert killed and stacks[0].restarts == 1
    assert stacks[0].env_children[0].argv[-2:] == ("--isolate", "")
    assert retried and all("UNAVAILABLE" in r["error"] for r in retried), retried
    assert outcome.ran == planned and outcome.verdict is not None
    assert outcome.verdict.succeeded
    records = [json.loads(p.read_text()) for p in tmp_path.rglob("*_run_00.json")]
    assert len(records) == planned
    assert all(r["end_reason"] in ("terminated", "truncated") for r in records)
    assert sum(r["attempts"] > 1 for r in records) == len({(r["task"]) for r in retried})


def test_only_a_stack_hosting_nethack_families_restarts_its_env_server() -> None:
    # those games run inline, so a crash of their C code is survived by a restart; any other
    # local server that exits stops the run at once (tests/e2e/test_cli.py)
    assert local_env_restarts(["babyai", "crafter", "textworld"]) == 0
    assert local_env_restarts(["babyai", "minihack"]) == LOCAL_ENV_RESTARTS > 0
    assert local_env_restarts(["nle"]) == LOCAL_ENV_RESTARTS
