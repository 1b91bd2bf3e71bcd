"""Scaling out and surviving crashes: a 40-episode BabyAI run over 2 env server and 2 agent
server processes; one of each is SIGKILLed mid-run. Every planned episode is recorded exactly
once, the ones that were running on a killed server are re-queued (same seed, a new session)
and marked as retried, and the new sessions avoid the dead replicas."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

from rich.console import Console

from moria.clients import EnvClient, PolicyClient
from orchestrator.replicas import Load, ReplicaSet
from orchestrator.runner import run_evaluation
from orchestrator.spec import load_spec
from tests.support.processes import ServerProcess, server_processes

EPISODES_PER_TASK = 8  # x 5 BabyAI tasks = 40


async def _busy_env(server: ServerProcess) -> bool:
    return (await EnvClient(server.target).get_info(timeout=2.0)).active_sessions > 0


async def _busy_policy(server: ServerProcess) -> bool:
    return (await PolicyClient(server.target).get_info(timeout=2.0)).active_streams > 0


async def _kill_when_busy(out: Path, env: ServerProcess, policy: ServerProcess) -> list[str]:
    """After a few episodes are written, SIGKILL ``env`` and ``policy`` each while it holds a
    session/stream (so an episode is lost under it). Returns what was killed."""
    killed: list[str] = []
    while len(list(out.rglob("*_run_*.json"))) < 6:
        await asyncio.sleep(0.05)
    for server, busy in ((env, _busy_env), (policy, _busy_policy)):
        while not await busy(server):
            await asyncio.sleep(0.01)
        server.kill()
        killed.append(server.target)
    return killed


async def test_killed_env_and_agent_replicas_lose_no_episode(tmp_path: Path) -> None:
    env_args = ("--families", "babyai", "--capacity", "8")
    with server_processes(("env_server", env_args), ("env_server", env_args),
                          ("agent_server", ()), ("agent_server", ())) as servers:
        env_a, env_b, pol_a, pol_b = servers
        spec = load_spec(None, [
            "envs.names=babyai", f"eval.num_episodes.babyai={EPISODES_PER_TASK}",
            f"eval.output_dir={tmp_path}", "agent.type=dummy", "eval.num_workers=4",
            "eval.max_steps_per_episode=120", "eval.max_episode_retries=3",
            f"endpoints.env.babyai=[{env_a.target},{env_b.target}]",
            f"endpoints.policy=[{pol_a.target},{pol_b.target}]"])
        killer = asyncio.create_task(_kill_when_busy(tmp_path, env_a, pol_a))
        outcome = await run_evaluation(spec, console=Console(quiet=True), show_progress=False)
        killed = await killer
    assert killed == [env_a.target, pol_a.target]

    episodes = [json.loads(p.read_text()) for p in tmp_path.rglob("*_run_*.json")]
    keys = Counter((e["task"], e["episode_index"]) for e in episodes)
    assert len(keys) == 5 * EPISODES_PER_TASK and set(keys.values()) == {1}
    assert all(e["end_reason"] in ("terminated", "truncated") for e in episodes)
    retried = [e for e in episodes if e["attempts"] > 1]
    assert retried, "no episode was running on a killed server"
    assert all(len(e["retry_errors"]) == e["attempts"] - 1 for e in episodes)
    assert all("UNAVAILABLE" in err or "closed" in err or "CANCELLED" in err
               for e in retried for err in e["retry_errors"]), [e["retry_errors"] for e in retried]
    assert outcome.summary["episodes_played"] == 5 * EPISODES_PER_TASK
    assert not outcome.errors

    lines = [json.loads(line) for line in
             (tmp_path / f"{outcome.run_id}_episodes.jsonl").read_text().splitlines()]
    assert len(lines) == 5 * EPISODES_PER_TASK  # each episode reported once
    events = [json.loads(line) for line in
              (tmp_path / f"{outcome.run_id}_events.jsonl").read_text().splitlines()]
    retry_events = [e for e in events if e["type"] == "episode_retried"]
    assert len(retry_events) == sum(e["attempts"] - 1 for e in episodes)
    started = [e for e in events if e["type"] == "episode_started"]
    # both replicas of each kind took episodes; after the kills only the survivors did
    assert {e["env_server"] for e in started} == {env_a.target, env_b.target}
    assert {e["policy_server"] for e in started} == {pol_a.target, pol_b.target}
    last_retry = max(i for i, e in enumerate(events) if e["type"] == "episode_retried")
    after = [e for e in events[last_retry:] if e["type"] == "episode_started"]
    assert after and all(e["env_server"] == env_b.target and e["policy_server"] == pol_b.target
                         for e in after)


async def test_replica_choice_spreads_load_skips_draining_full_and_dead() -> None:
    loads: dict[str, Load | None] = {"a": Load(4, 0, False), "b": Load(4, 0, False),
                                     "c": Load(4, 0, True)}

    async def probe(target: str) -> Load:
        load = loads[target]
        if load is None:
            raise OSError("down")
        return load

    replicas = ReplicaSet("env server for babyai", ["a", "b", "c"], probe)
    taken = [await replicas.acquire() for _ in range(4)]
    assert sorted(taken) == ["a", "a", "b", "b"]  # spread; c is draining
    loads["a"] = None  # a dies: new episodes go to b only
    assert [await replicas.acquire() for _ in range(2)] == ["b", "b"]
    assert replicas.in_flight("b") == 4
    waiting = asyncio.create_task(replicas.acquire())  # b is full, a dead, c draining
    await asyncio.sleep(0.2)
    assert not waiting.done()
    replicas.release("b")
    assert await asyncio.wait_for(waiting, 5) == "b"
    loads["a"] = Load(4, 0, False)
    replicas.mark_full("a")  # it answered RESOURCE_EXHAUSTED a moment ago
    replicas.release("b")
    assert await replicas.acquire() == "b"


async def _sigterm_when_busy(out: Path, env: ServerProcess) -> float:
    while len(list(out.rglob("*_run_*.json"))) < 4:
        await asyncio.sleep(0.05)
    while not await _busy_env(env):
        await asyncio.sleep(0.01)
    env.process.terminate()  # SIGTERM: drain
    return time.time()


async def test_sigterm_drains_an_env_replica_and_new_episodes_go_elsewhere(
        tmp_path: Path) -> None:
    """SIGTERM on one env replica mid-run: the episodes it was running finish there (none is
    lost or retried for it), later episodes start on the other replica, and the drained
    process exits cleanly within its grace period."""
    env_args = ("--families", "babyai", "--capacity", "8", "--grace", "30")
    with server_processes(("env_server", env_args), ("env_server", env_args),
                          ("agent_server", ())) as (env_a, env_b, policy):
        spec = load_spec(None, [
            "envs.names=babyai", "eval.num_episodes.babyai=4", f"eval.output_dir={tmp_path}",
            "agent.type=dummy", "eval.num_workers=4", "eval.max_steps_per_episode=120",
            f"endpoints.env.babyai=[{env_a.target},{env_b.target}]",
            f"endpoints.policy=[{policy.target}]"])
        draining = asyncio.create_task(_sigterm_when_busy(tmp_path, env_a))
        outcome = await run_evaluation(spec, console=Console(quiet=True), show_progress=False)
        signalled_at = await draining
        assert env_a.process.wait(timeout=60) == 0  # drained and exited on its own
    episodes = [json.loads(p.read_text()) for p in tmp_path.rglob("*_run_*.json")]
    assert len(episodes) == 20 and outcome.summary["episodes_played"] == 20
    assert all(e["end_reason"] in ("terminated", "truncated") for e in episodes)
    # a session the draining server had already accepted finished there; the only allowed
    # retries are opens it refused as UNAVAILABLE (draining) in the instant before GetInfo said so
    for episode in episodes:
        assert all("UNAVAILABLE" in err for err in episode["retry_errors"]), episode
    events = [json.loads(line) for line in
              (tmp_path / f"{outcome.run_id}_events.jsonl").read_text().splitlines()]
    started = [e for e in events if e["type"] == "episode_started"]
    late = [e for e in started
            if datetime.fromisoformat(e["ts"]).timestamp() > signalled_at + 1.0]
    assert late and all(e["env_server"] == env_b.target for e in late)
    assert any(e["env_server"] == env_a.target for e in started)
