"""The orchestrator as a service: real env and policy servers on loopback, an OrchestratorService
in-process (or ``moria serve orchestrator`` as a real process for the restart and CLI tests),
driven through ``orchestrator.apps.remote.OrchestratorClient`` over gRPC."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest

from moria.codecs import dict_from_struct
from moria.orchestrator.v1 import orchestrator_service_pb2 as pb
from orchestrator.apps.remote import OrchestratorClient
from orchestrator.apps.service import EVENTS_FILE, OrchestratorServicer
from orchestrator.plan.spec import load_spec
from orchestrator.store.episodes import load_episodes
from tests.support.processes import interruptible
from tests.support.servers import env_server, policy_server, start_orchestrator
from tests.support.waiting import async_wait_until

VENV_BIN = Path(sys.executable).parent
TASK = "BabyAI-MixedTrainLocal-v0/goto"


def run_spec(env_target: str, policy_target: str, episodes: int, *extra: str,
             ) -> dict[str, Any]:
    """A babyai oracle run of ``episodes`` episodes of one task, one at a time, as the CLI
    sends it (the validated spec's JSON dump)."""
    spec = load_spec(None, [
        "agent.type=oracle", "envs.names=babyai", f"tasks.babyai_tasks=[{TASK}]",
        f"eval.num_episodes.babyai={episodes}", "eval.num_workers=1",
        f"endpoints.env.babyai=[{env_target}]", f"endpoints.policy=[{policy_target}]", *extra])
    return spec.model_dump(mode="json")


@asynccontextmanager
async def orchestrator(state_dir: Path, **kwargs: Any,
                       ) -> AsyncIterator[tuple[OrchestratorClient, OrchestratorServicer]]:
    """An OrchestratorService on loopback over ``state_dir``, and a client of it."""
    server, servicer = await start_orchestrator(state_dir, **kwargs)
    client = OrchestratorClient(server.bound_address, reconnect_s=5.0, retry_wait_s=0.01)
    try:
        yield client, servicer
    finally:
        await client.close()
        await server.shutdown()
        await servicer.aclose()


async def follow_all(client: OrchestratorClient, run_id: str, from_sequence: int = 1,
                     ) -> list[pb.RunEvent]:
    events: list[pb.RunEvent] = []
    await asyncio.wait_for(client.follow(run_id, events.append, from_sequence=from_sequence),
                           timeout=240)
    return events


def payload(event: pb.RunEvent) -> dict[str, Any]:
    return dict_from_struct(event.payload)


def finished_keys(events: list[pb.RunEvent]) -> list[tuple[str, str, int]]:
    return [(p["env"], p["task"], int(p["episode_index"]))
            for p in map(payload, (e for e in events if e.type == "episode_finished"))]


async def test_run_completes_and_streams_every_event_once(tmp_path: Path) -> None:
    async with env_server() as env, policy_server() as pol, \
            orchestrator(tmp_path / "state", allowed_endpoints=[env.target, pol.target],
                         ) as (client, _):
        spec = run_spec(env.target, pol.target, 3)
        submitted = await client.submit_run(spec, run_id="oracle-3")
        assert submitted.created and submitted.run_id == "oracle-3"
        assert submitted.run.state == pb.RUN_STATE_QUEUED or submitted.run.state == (
            pb.RUN_STATE_RUNNING)
        events = await follow_all(client, "oracle-3")

        # one dense, ordered log: the service's lifecycle plus the runner's telemetry
        assert [e.sequence for e in events] == list(range(1, len(events) + 1))
        types = [e.type for e in events]
        assert types[:2] == ["submitted", "running"] and types[-1] == "completed"
        assert types.index("run_started") < types.index("episode_started")
        assert types.index("run_finished") < types.index("completed")
        assert sorted(finished_keys(events)) == [("babyai", TASK, i) for i in range(3)]
        assert [payload(e)["episodes_done"] for e in events
                if e.type == "episode_finished"] == [1, 2, 3]
        final = payload(events[-1])
        assert final["episodes_done"] == final["episodes_total"] == 3
        assert final["average_progress"] == 100.0

        run = await client.get_run("oracle-3")
        assert run.state == pb.RUN_STATE_SUCCEEDED and not run.error
        assert (run.episodes_total, run.episodes_done) == (3, 3)
        assert dict_from_struct(run.summary)["average_progress"] == 100.0
        assert run.version.api_version == "moria.v1" and run.version.components
        assert run.last_sequence == len(events)
        # the submitted output dir is replaced by the run's own folder under the state dir
        out = tmp_path / "state" / "runs" / "oracle-3"
        assert run.output_dir == str(out.resolve())
        assert dict_from_struct(run.spec)["eval"]["output_dir"] == str(out.resolve())
        assert sorted(e.key for e in load_episodes(out)) == [("babyai", TASK, i)
                                                            for i in range(3)]
        assert (out / "summary.json").is_file()
        record = json.loads((out / "service.json").read_text())
        assert record["state"] == "succeeded"
        assert len((out / EVENTS_FILE).read_text().splitlines()) == len(events)
        # the runner's events reach the service and the telemetry files from one stream: the
        # same events, in the same order, in both
        telemetry = [json.loads(line) for line in
                     (out / "oracle-3_events.jsonl").read_text().splitlines()]
        runner_kinds = {"run_started", "episode_started", "episode_retried", "run_finished"}
        assert [(e.type, payload(e).get("episode_index")) for e in events
                if e.type in runner_kinds] == [(t["type"], t.get("episode_index"))
                                               for t in telemetry]
        written = [json.loads(line) for line in
                   (out / "oracle-3_episodes.jsonl").read_text().splitlines()]
        assert finished_keys(events) == [(w["env"], w["task"], w["episode_index"])
                                         for w in written]

        # the same spec again is idempotent; another spec under the same id is refused
        again = await client.submit_run(spec, run_id="oracle-3")
        assert not again.created and again.run.state == pb.RUN_STATE_SUCCEEDED
        assert (await client.get_run("oracle-3")).last_sequence == len(events)
        with pytest.raises(grpc.aio.AioRpcError) as taken:
            await client.submit_run(run_spec(env.target, pol.target, 4), run_id="oracle-3")
        assert taken.value.code() == grpc.StatusCode.ALREADY_EXISTS

        # streaming from a middle sequence returns exactly the rest; past the end, nothing
        for start in (1, 4, len(events)):
            rest = await follow_all(client, "oracle-3", from_sequence=start)
            assert [(e.sequence, e.type) for e in rest] == [
                (e.sequence, e.type) for e in events[start - 1:]]
        assert await follow_all(client, "oracle-3", from_sequence=len(events) + 1) == []


async def test_bad_requests_get_clear_codes(tmp_path: Path) -> None:
    async with orchestrator(tmp_path) as (client, _):
        with pytest.raises(grpc.aio.AioRpcError) as bad_key:
            await client.submit_run({"eval": {"num_workerz": 2}})
        assert bad_key.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "eval.num_workerz" in (bad_key.value.details() or "")
        assert "num_workers" in (bad_key.value.details() or "")  # the allowed keys

        with pytest.raises(grpc.aio.AioRpcError) as bad_value:
            await client.submit_run({"envs": {"names": "chess"}})
        assert bad_value.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "envs.names" in (bad_value.value.details() or "")

        with pytest.raises(grpc.aio.AioRpcError) as bad_id:
            await client.submit_run({}, run_id="../escape")
        assert bad_id.value.code() == grpc.StatusCode.INVALID_ARGUMENT

        for call in (client.get_run("nope"), client.cancel_run("nope")):
            with pytest.raises(grpc.aio.AioRpcError) as missing:
                await call
            assert missing.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as missing_stream:
            await follow_all(client, "nope")
        assert missing_stream.value.code() == grpc.StatusCode.NOT_FOUND

        with pytest.raises(grpc.aio.AioRpcError) as bad_token:
            await client.list_runs(page_token="not-a-token")
        assert bad_token.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    # nothing was accepted, so nothing was written
    assert not (tmp_path / "runs").exists()


async def test_cancel_and_queue_and_pages(tmp_path: Path) -> None:
    async with env_server() as env, policy_server() as pol, \
            orchestrator(tmp_path, max_concurrent_runs=1,
                         allowed_endpoints=[env.target, pol.target]) as (client, _):
        long_spec = run_spec(env.target, pol.target, 200)
        await client.submit_run(long_spec, run_id="long")
        queued = await client.submit_run(run_spec(env.target, pol.target, 1), run_id="waiting")
        assert queued.run.state == pb.RUN_STATE_QUEUED  # one run at a time: FIFO
        third = await client.submit_run(run_spec(env.target, pol.target, 2), run_id="third")
        assert third.run.state == pb.RUN_STATE_QUEUED

        # pages, newest first, with no run twice
        first_page = await client.list_runs(page_size=2)
        assert [r.run_id for r in first_page.runs] == ["third", "waiting"]
        assert first_page.next_page_token and not first_page.runs[0].HasField("spec")
        second_page = await client.list_runs(page_size=2, page_token=first_page.next_page_token)
        assert [r.run_id for r in second_page.runs] == ["long"]
        assert second_page.next_page_token == ""
        assert [r.run_id for r in (await client.list_runs()).runs] == ["third", "waiting",
                                                                         "long"]

        # a queued run is cancelled at once
        cancelled = await client.cancel_run("waiting")
        assert cancelled.state == pb.RUN_STATE_CANCELLED
        assert [e.type for e in await follow_all(client, "waiting")] == ["submitted",
                                                                          "cancelled"]

        # a running run stops after its first episode; that episode stays
        seen: list[pb.RunEvent] = []
        cancel_sent = asyncio.Event()

        def on_event(event: pb.RunEvent) -> None:
            seen.append(event)
            if event.type == "episode_finished" and not cancel_sent.is_set():
                cancel_sent.set()
                asyncio.get_running_loop().create_task(client.cancel_run("long"))

        await asyncio.wait_for(client.follow("long", on_event), timeout=240)
        assert seen[-1].type == "cancelled"
        run = await client.get_run("long")
        assert run.state == pb.RUN_STATE_CANCELLED
        assert 1 <= run.episodes_done < 200
        written = load_episodes(Path(run.output_dir))
        assert len(written) == run.episodes_done
        assert len({e.key for e in written}) == len(written)

        # the queue moves on: the third run runs to completion once "long" stopped
        third_events = await follow_all(client, "third")
        assert third_events[-1].type == "completed"
        # cancelling a finished run changes nothing
        assert (await client.cancel_run("third")).state == pb.RUN_STATE_SUCCEEDED
        # resubmitting the cancelled run resumes it, keeping its finished episodes
        resumed = await client.submit_run(run_spec(env.target, pol.target, 1), run_id="waiting")
        assert not resumed.created
        waiting_events = await follow_all(client, "waiting")
        assert [e.type for e in waiting_events][:3] == ["submitted", "cancelled", "resumed"]
        assert waiting_events[-1].type == "completed"


def _socket_address(tmp_path: Path) -> str:
    """A unix socket for the service: a restarted service serves on the same address (its
    clients reconnect there), and unlike a TCP port picked in advance no other process can
    take it in between."""
    address = f"unix://{tmp_path / 'orchestrator.sock'}"
    assert len(address) < 100, f"socket path too long for AF_UNIX: {address}"
    return address


def _serve(state_dir: Path, address: str, log: Path, endpoints: list[str],
           ) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [str(VENV_BIN / "moria"), "serve", "orchestrator", "--state-dir", str(state_dir),
             "--address", address, "--grace", "2",
             "--allowed-endpoints", ",".join(endpoints)],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


async def _wait_exit(process: subprocess.Popen[bytes], timeout: float) -> int:
    for _ in range(int(timeout * 20)):
        code = process.poll()
        if code is not None:
            return code
        await asyncio.sleep(0.05)
    raise AssertionError(f"process {process.pid} still running after {timeout}s")


async def test_sigkilled_service_resumes_its_run_on_restart(tmp_path: Path) -> None:
    state, log = tmp_path / "state", tmp_path / "orchestrator.log"
    address = _socket_address(tmp_path)
    episodes = 8
    async with env_server() as env, policy_server() as pol:
        first = _serve(state, address, log, [env.target, pol.target])
        follower: asyncio.Task[int] | None = None
        client = OrchestratorClient(address, reconnect_s=90.0, retry_wait_s=0.05)
        try:
            await client.submit_run(run_spec(env.target, pol.target, episodes), run_id="crash")
            # a follower that stays connected across the crash, reconnecting from its last
            # sequence + 1
            live: list[pb.RunEvent] = []
            follower = asyncio.create_task(client.follow("crash", live.append))
            out = state / "runs" / "crash"
            for _ in range(2400):  # until at least one episode is written
                if list(out.glob("babyai/**/*_run_*.json")):
                    break
                assert first.poll() is None, log.read_text()
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("no episode written:\n" + log.read_text())
            before = (await client.get_run("crash")).last_sequence
            os.killpg(first.pid, signal.SIGKILL)
            await _wait_exit(first, 10)

            second = _serve(state, address, log, [env.target, pol.target])
            try:
                # the client reconnects while the new process starts
                await asyncio.wait_for(follower, timeout=240)
                events = await follow_all(client, "crash")
                run = await client.get_run("crash")
            finally:
                second.send_signal(signal.SIGTERM)
                assert await _wait_exit(second, 30) == 0, log.read_text()
        finally:
            if follower is not None and not follower.done():
                follower.cancel()
            await client.close()
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)

    assert run.state == pb.RUN_STATE_SUCCEEDED, run.error + log.read_text()
    assert (run.episodes_done, run.episodes_total) == (episodes, episodes)
    # exactly the planned episodes, each once
    keys = [e.key for e in load_episodes(out)]
    assert sorted(keys) == [("babyai", TASK, i) for i in range(episodes)]
    # sequences continue across the restart without gap or repeat (follow checks each step),
    # and the follower that lived through the crash saw exactly the log read afterwards
    assert [e.sequence for e in events] == list(range(1, len(events) + 1))
    assert [(e.sequence, e.type, e.payload) for e in live] == [
        (e.sequence, e.type, e.payload) for e in events]
    assert len(events) > before
    types = [e.type for e in events]
    assert types.count("resumed") == 1 and types[-1] == "completed"
    assert types.index("resumed") >= 2
    assert types.count("run_started") == 2  # the first process's and the resumed one's
    # no episode reported finished twice
    assert max(Counter(finished_keys(events)).values()) == 1
    # the log on disk is what was streamed
    lines = (out / EVENTS_FILE).read_text().splitlines()
    assert [json.loads(line)["sequence"] for line in lines] == [e.sequence for e in events]


async def test_cli_eval_remote(tmp_path: Path) -> None:
    async with env_server() as env, policy_server() as pol, \
            orchestrator(tmp_path / "state", allowed_endpoints=[env.target, pol.target],
                         ) as (client, servicer):
        address = client.target
        overrides = ["agent.type=oracle", f"tasks.babyai_tasks=[{TASK}]",
                     "eval.num_episodes.babyai=2", "eval.num_workers=1",
                     f"endpoints.env.babyai=[{env.target}]", f"endpoints.policy=[{pol.target}]",
                     "eval.run_id=cli-run"]
        # progress on: stderr is a pipe, so plain `progress:` lines instead of a bar
        proc = await asyncio.create_subprocess_exec(
            str(VENV_BIN / "moria"), "eval", "--remote", address, *overrides,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout=240)
        out, err = stdout.decode(), stderr.decode()
        assert proc.returncode == 0, out + err
        assert out.splitlines()[0] == "cli-run"
        assert "run cli-run completed: 2/2 episodes done, average progress 100.0%" in out
        assert "submitted run cli-run" in err
        plain = [line for line in err.splitlines() if line.startswith("progress:")]
        assert plain[0].startswith("progress: following | episodes 0/2 | elapsed "), err
        finished = [line for line in plain if line.startswith("progress: episode ")]
        assert len(finished) == 2 and all(", progression 1.00, " in line for line in finished)
        assert plain[-1].startswith("progress: completed | episodes 2/2 | elapsed "), err
        assert "\x1b[" not in err  # no bar drawn
        assert servicer.runs["cli-run"].state == "succeeded"

        # the same command again follows the finished run instead of starting another
        proc = await asyncio.create_subprocess_exec(
            str(VENV_BIN / "moria"), "eval", "--remote", address, "--no-progress", *overrides,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout=120)
        assert proc.returncode == 0, stdout.decode() + stderr.decode()
        assert "following existing run cli-run" in stderr.decode()

        # Ctrl-C leaves the run going at the orchestrator
        slow = [o.replace("eval.num_episodes.babyai=2", "eval.num_episodes.babyai=100")
                .replace("cli-run", "cli-long") for o in overrides]
        proc = await asyncio.create_subprocess_exec(*interruptible(
            [str(VENV_BIN / "moria"), "eval", "--remote", address, "--no-progress", *slow]),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), timeout=120)
        assert line.decode().strip() == "cli-long"
        proc.send_signal(signal.SIGINT)
        _, stderr = await asyncio.wait_for(proc.communicate(), timeout=60)
        assert proc.returncode == 130, stderr.decode()
        assert "goes on at the orchestrator" in stderr.decode()
        assert servicer.runs["cli-long"].state in ("queued", "running")

        # --cancel-on-interrupt cancels it instead
        proc = await asyncio.create_subprocess_exec(*interruptible(
            [str(VENV_BIN / "moria"), "eval", "--remote", address, "--no-progress",
             "--cancel-on-interrupt", *slow]),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), timeout=120)
        proc.send_signal(signal.SIGINT)
        _, stderr = await asyncio.wait_for(proc.communicate(), timeout=60)
        assert proc.returncode == 130, stderr.decode()
        for _ in range(600):
            if servicer.runs["cli-long"].state == "cancelled":
                break
            await asyncio.sleep(0.05)
        assert servicer.runs["cli-long"].state == "cancelled"

        # a spec error is caught before anything is sent
        bad = await asyncio.create_subprocess_exec(
            str(VENV_BIN / "moria"), "eval", "--remote", address, "eval.num_workerz=2",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        _, stderr = await asyncio.wait_for(bad.communicate(), timeout=60)
        assert bad.returncode == 2 and "eval.num_workerz" in stderr.decode()


async def test_sigterm_interrupts_runs_and_the_next_start_resumes_them(tmp_path: Path) -> None:
    state, log = tmp_path / "state", tmp_path / "orchestrator.log"
    address = _socket_address(tmp_path)
    async with env_server() as env, policy_server() as pol:
        first = _serve(state, address, log, [env.target, pol.target])
        client = OrchestratorClient(address, reconnect_s=90.0, retry_wait_s=0.05)
        try:
            await client.submit_run(run_spec(env.target, pol.target, 200), run_id="term")
            out = state / "runs" / "term"
            await async_wait_until(lambda: bool(list(out.glob("babyai/**/*_run_*.json"))),
                                   "the first episode file of the run", timeout=120)
            first.send_signal(signal.SIGTERM)
            assert await _wait_exit(first, 30) == 0, log.read_text()
            assert "Traceback" not in log.read_text()
            record = json.loads((out / "service.json").read_text())
            assert record["state"] == "running"  # interrupted, not ended: it resumes
            lines = [json.loads(x) for x in (out / EVENTS_FILE).read_text().splitlines()]
            assert lines[-1]["type"] == "interrupted"
            done_before = len(load_episodes(out))

            second = _serve(state, address, log, [env.target, pol.target])
            try:
                run = await client.get_run("term")  # retried until the new process serves
                assert run.state in (pb.RUN_STATE_QUEUED, pb.RUN_STATE_RUNNING)
                seen: list[pb.RunEvent] = []

                def on_event(event: pb.RunEvent) -> None:  # cancel after one more episode
                    seen.append(event)
                    if event.type == "episode_finished":
                        asyncio.get_running_loop().create_task(client.cancel_run("term"))

                await asyncio.wait_for(client.follow("term", on_event,
                                                     from_sequence=len(lines) + 1), timeout=240)
            finally:
                second.send_signal(signal.SIGTERM)
                assert await _wait_exit(second, 30) == 0, log.read_text()
        finally:
            await client.close()
            if first.poll() is None:
                os.killpg(first.pid, signal.SIGKILL)
    assert seen[0].sequence == len(lines) + 1 and seen[0].type == "resumed"
    assert seen[-1].type == "cancelled"
    assert len(load_episodes(out)) > done_before
