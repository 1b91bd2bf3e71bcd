"""Scaling out and surviving crashes: a 40-episode BabyAI run over 2 env server and 2 agent
server processes; one of each is SIGKILLed mid-run. Every planned episode is recorded exactly
once, the ones that were running on a killed server are re-queued (same seed, a new session)
and marked as retried, and the new sessions avoid the dead replicas.

The run (``run_evaluation``) shares this test's event loop. The kill and drain triggers look at
the run's telemetry files and the servers' state with *blocking* calls, so the run stands still
between what the trigger saw and the signal it sends: no episode can start, step or end in
between. Which episodes a fault must hit is therefore decided by state, never by a clock."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import grpc
from rich.console import Console

from moria.env.v1 import env_service_pb2 as env_pb
from moria.env.v1 import env_service_pb2_grpc as env_grpc
from orchestrator.core.replicas import Load, ReplicaSet
from orchestrator.core.runner import run_evaluation
from orchestrator.plan.spec import load_spec
from tests.support.processes import ServerProcess, server_processes
from tests.support.waiting import async_wait_until, wait_until

EPISODES_PER_TASK = 8  # x 5 BabyAI tasks = 40
MAX_STEPS = 120
#: What a client sees of a server lost under a call (gRPC codes and their details).
LOST_SERVER_SIGNS = ("UNAVAILABLE", "closed", "CANCELLED", "INTERNAL: Internal error from Core")
Key = tuple[str, int]


def _jsonl(out: Path, suffix: str) -> list[dict[str, Any]]:
    """The lines of the run's ``*_<suffix>.jsonl`` (none yet: empty). Read while the run stands
    still (from a blocking predicate), so the last line is whole."""
    return [json.loads(line) for path in out.glob(f"*_{suffix}.jsonl")
            for line in path.read_text().splitlines()]


def _written(out: Path) -> int:
    return len(list(out.rglob("*_run_*.json")))


def _mid_play(out: Path, role: str, target: str) -> list[Key]:
    """Episodes whose current attempt runs on ``target`` (``role``: ``env_server`` or
    ``policy_server``) and has applied a step that did not end it: the run will call that
    server again for each, so a fault there must re-queue them."""
    starts: dict[Key, list[dict[str, Any]]] = {}
    for event in _jsonl(out, "events"):
        if event["type"] == "episode_started":
            starts.setdefault((event["task"], event["episode_index"]), []).append(event)
    stepped: Counter[Key] = Counter()  # attempts that applied their first step
    last: dict[Key, dict[str, Any]] = {}
    for step in _jsonl(out, "steps"):
        key = (step["task"], step["episode_index"])
        stepped[key] += step["step"] == 0
        last[key] = step
    reported = {(e["task"], e["episode_index"]) for e in _jsonl(out, "episodes")}
    return [key for key, attempts in starts.items()
            if attempts[-1][role] == target and key not in reported
            and stepped[key] == len(attempts)  # the last step line is this attempt's
            and not last[key]["done"] and last[key]["step"] < MAX_STEPS - 2]


def _env_info(server: ServerProcess) -> env_pb.GetInfoResponse:
    """The env server's GetInfo over a blocking channel (the event loop waits meanwhile)."""
    with grpc.insecure_channel(server.target) as channel:
        return env_grpc.EnvServiceStub(channel).GetInfo(env_pb.GetInfoRequest(), timeout=10)


async def _kill_mid_episode(out: Path, env: ServerProcess, policy: ServerProcess) -> list[Key]:
    """After 6 episodes are written, SIGKILL ``env`` and then ``policy``, each at a moment when
    an episode is in the middle of play on it. Returns the episodes caught by the kills."""
    await async_wait_until(lambda: _written(out) >= 6, "6 episodes written", timeout=300)
    caught: list[Key] = []
    for role, server in (("env_server", env), ("policy_server", policy)):

        def kill_if_playing(role: str = role, server: ServerProcess = server) -> bool:
            playing = _mid_play(out, role, server.target)
            if playing:
                server.kill()  # before the run can take another step
                caught.extend(playing)
            return bool(playing)

        await async_wait_until(kill_if_playing, f"an episode in play on the {role} "
                               f"{server.target}", timeout=300, interval=0.01)
    return caught


async def test_killed_env_and_agent_replicas_lose_no_episode(tmp_path: Path) -> None:
    env_args = ("--families", "babyai", "--capacity", "8")
    with server_processes(("env_server", env_args), ("env_server", env_args),
                          ("agent_server", ()), ("agent_server", ())) as servers:
        env_a, env_b, pol_a, pol_b = servers
        spec = load_spec(None, [
            "envs.names=babyai", f"eval.num_episodes.babyai={EPISODES_PER_TASK}",
            f"eval.output_dir={tmp_path}", "agent.type=dummy", "eval.num_workers=4",
            f"eval.max_steps_per_episode={MAX_STEPS}", "eval.max_episode_retries=3",
            f"endpoints.env.babyai=[{env_a.target},{env_b.target}]",
            f"endpoints.policy=[{pol_a.target},{pol_b.target}]"])
        killer = asyncio.create_task(_kill_mid_episode(tmp_path, env_a, pol_a))
        try:
            outcome = await run_evaluation(spec, console=Console(quiet=True),
                                           show_progress=False)
            caught = await killer
        finally:
            killer.cancel()
    assert env_a.process.returncode == pol_a.process.returncode == -9

    episodes = [json.loads(p.read_text()) for p in tmp_path.rglob("*_run_*.json")]
    keys = Counter((e["task"], e["episode_index"]) for e in episodes)
    assert len(keys) == 5 * EPISODES_PER_TASK and set(keys.values()) == {1}
    assert all(e["end_reason"] in ("terminated", "truncated") for e in episodes)
    retried = [e for e in episodes if e["attempts"] > 1]
    # every episode in play on a killed server at its kill was re-queued
    assert set(caught) <= {(e["task"], e["episode_index"]) for e in retried}, caught
    assert all(len(e["retry_errors"]) == e["attempts"] - 1 for e in episodes)
    # what a client sees of a killed server: the call is unavailable, closed or cancelled, or
    # a write racing the call's end is failed by the client library itself (gRPC core's own
    # "INTERNAL: Internal error from Core", never a status the server sent)
    assert all(any(sign in err for sign in LOST_SERVER_SIGNS)
               for e in retried for err in e["retry_errors"]), [e["retry_errors"] for e in retried]
    assert outcome.summary["episodes_played"] == 5 * EPISODES_PER_TASK
    assert outcome.verdict is not None and outcome.verdict.succeeded

    lines = [json.loads(line) for line in
             (tmp_path / f"{outcome.run_id}_episodes.jsonl").read_text().splitlines()]
    assert len(lines) == 5 * EPISODES_PER_TASK  # each episode reported once
    events = [json.loads(line) for line in
              (tmp_path / f"{outcome.run_id}_events.jsonl").read_text().splitlines()]
    retry_events = [e for e in events if e["type"] == "episode_retried"]
    assert len(retry_events) == sum(e["attempts"] - 1 for e in episodes)
    started = [e for e in events if e["type"] == "episode_started"]
    # both replicas of each kind took episodes; after the kills only the survivors did (an
    # episode that chose a replica just before it died is retried, so its start comes before
    # the last retry)
    assert {e["env_server"] for e in started} == {env_a.target, env_b.target}
    assert {e["policy_server"] for e in started} == {pol_a.target, pol_b.target}
    last_retry = max(i for i, e in enumerate(events) if e["type"] == "episode_retried")
    after = [e for e in events[last_retry:] if e["type"] == "episode_started"]
    assert after and all(e["env_server"] == env_b.target and e["policy_server"] == pol_b.target
                         for e in after)


async def test_replica_choice_spreads_load_skips_draining_full_and_dead() -> None:
    loads: dict[str, Load | None] = {"a": Load(4, 0, False), "b": Load(4, 0, False),
                                     "c": Load(4, 0, True)}
    probes: Counter[str] = Counter()

    async def probe(target: str) -> Load:
        probes[target] += 1
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
    # each round probes every replica once: two more rounds mean the waiter looked, found no
    # room, and went round again instead of returning
    rounds = probes["b"]
    await async_wait_until(lambda: probes["b"] >= rounds + 2, "the waiter to probe twice",
                           timeout=30, interval=0.01)
    assert not waiting.done()
    replicas.release("b")
    assert await asyncio.wait_for(waiting, 30) == "b"
    loads["a"] = Load(4, 0, False)
    replicas.mark_full("a")  # it answered RESOURCE_EXHAUSTED a moment ago
    replicas.release("b")
    assert await replicas.acquire() == "b"


def _sigterm_when_busy(out: Path, env: ServerProcess, planned: int) -> int | None:
    """Once 4 episodes are written and ``env`` holds a session, SIGTERM it and wait (blocking,
    so the run stands still) until its GetInfo says draining; return how many event lines the
    run had written by then. None: not yet. Raises AssertionError when the run started every
    episode first (nothing would be left to show where new episodes go)."""
    if _written(out) < 4 or _env_info(env).active_sessions == 0:
        return None
    events = _jsonl(out, "events")
    started = {(e["task"], e["episode_index"]) for e in events if e["type"] == "episode_started"}
    assert len(started) < planned, "every episode started before the replica was seen busy"
    env.process.terminate()  # SIGTERM: drain
    wait_until(lambda: _env_info(env).draining, f"{env.target} to report draining",
               timeout=30, interval=0.01)
    return len(events)


async def test_sigterm_drains_an_env_replica_and_new_episodes_go_elsewhere(
        tmp_path: Path) -> None:
    """SIGTERM on one env replica mid-run: the episodes it was running finish there (none is
    lost or retried for it), episodes that start once it says draining go to the other replica
    (one that chose it just before is refused with UNAVAILABLE and retried elsewhere), and the
    drained process exits cleanly within its grace period."""
    env_args = ("--families", "babyai", "--capacity", "8", "--grace", "30")
    planned = 20
    with server_processes(("env_server", env_args), ("env_server", env_args),
                          ("agent_server", ())) as (env_a, env_b, policy):
        spec = load_spec(None, [
            "envs.names=babyai", "eval.num_episodes.babyai=4", f"eval.output_dir={tmp_path}",
            "agent.type=dummy", "eval.num_workers=4", f"eval.max_steps_per_episode={MAX_STEPS}",
            f"endpoints.env.babyai=[{env_a.target},{env_b.target}]",
            f"endpoints.policy=[{policy.target}]"])
        draining = asyncio.create_task(async_wait_until(
            lambda: _sigterm_when_busy(tmp_path, env_a, planned),
            f"4 episodes written and {env_a.target} busy", timeout=300, interval=0.01))
        try:
            outcome = await run_evaluation(spec, console=Console(quiet=True),
                                           show_progress=False)
            seen_draining = await draining
        finally:
            draining.cancel()
        assert env_a.wait_exit(60) == 0  # drained and exited on its own
    episodes = [json.loads(p.read_text()) for p in tmp_path.rglob("*_run_*.json")]
    assert len(episodes) == planned and outcome.summary["episodes_played"] == planned
    assert all(e["end_reason"] in ("terminated", "truncated") for e in episodes)
    # a session the draining server had already accepted finished there; the only allowed
    # retries are opens it refused as UNAVAILABLE (draining)
    for episode in episodes:
        assert all("UNAVAILABLE" in err for err in episode["retry_errors"]), episode
    events = [json.loads(line) for line in
              (tmp_path / f"{outcome.run_id}_events.jsonl").read_text().splitlines()]
    assert any(e["type"] == "episode_started" and e["env_server"] == env_a.target
               for e in events[:seen_draining])
    # after it said draining: an episode that still went to it had chosen it before (a probe
    # in flight), so its open was refused and the episode retried; the rest went to env_b
    late = [(i, e) for i, e in enumerate(events)
            if i >= seen_draining and e["type"] == "episode_started"]
    assert any(e["env_server"] == env_b.target for _, e in late)
    for i, start in late:
        if start["env_server"] == env_a.target:
            assert any(e["type"] == "episode_retried" and e["env_server"] == env_a.target
                       and (e["task"], e["episode_index"]) == (start["task"],
                                                               start["episode_index"])
                       and "UNAVAILABLE" in e["error"] for e in events[i:]), start
