"""The worker's run outcome and preflight, through the real ``llm-worker`` / ``vlm-worker``
console scripts run as subprocesses (each starts its own local stack: env and agent servers as
child processes).

The model is ``tests.support.fake_openai``, a real HTTP server on loopback speaking OpenAI's
wire format: it answers HTTP 401 (a bad key) or a valid move. The outcome is decided by
``orchestrator.report.outcome`` over the worker's episode records: exit 0 only when every
episode was
scored, 1 when any failed (the count and the first distinct errors on stderr, and the verdict in
the ``run_completed`` event); a player that cannot play the game at all (an rl checkpoint for
another task, frames for a text-only model) is refused at the preflight with exit 2 and one
line, before any episode.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest

from moria.clients import PolicyClient
from moria.codecs import struct_from_dict
from moria.common.v1 import types_pb2
from moria.policy.v1 import policy_service_pb2 as pol_pb
from tests.support.fake_openai import Behaviour, FakeOpenAI
from tests.support.servers import policy_server

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]
CHECKPOINT = ROOT / "examples/checkpoints/connect_four_v3_mlp.npz"
KEY = "sk-test-outcome-0000"
PROVIDER_MESSAGE = "Incorrect API key provided; find your API key in your account settings"
#: Deadline of one worker process (it starts and stops its own env and agent servers).
RUN_TIMEOUT_S = 300


def _script(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{path} is missing: install the package (`pip install -e .`)"
    return str(path)


def _run(script: str, tmp_path: Path, *args: str, stdin: str | None = None,
         ) -> subprocess.CompletedProcess[str]:
    """Run a worker to its end (with a deadline) in ``tmp_path``; telemetry in ``tmp_path/tel``."""
    return subprocess.run(
        [_script(script), "--telemetry-dir", str(tmp_path / "tel"), *args],
        cwd=tmp_path, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, input=stdin,
        env={**os.environ, "OPENAI_API_KEY": KEY, "PYTHONUNBUFFERED": "1"})


def _openai_player(server: FakeOpenAI) -> list[str]:
    return ["--env", "babyai", "--agent-type", "naive", "--client", "openai", "--base-url",
            server.base_url, "--model", "fake-model", "--max-steps", "2"]


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _bad_key() -> Behaviour:
    return Behaviour(status=401, body={"error": {"message": PROVIDER_MESSAGE,
                                                 "type": "invalid_api_key"}})


def test_every_episode_failing_on_a_bad_key_exits_1_with_the_provider_message(
        tmp_path: Path) -> None:
    with FakeOpenAI(reply="turn left") as server:
        server.script(_bad_key(), _bad_key(), _bad_key())
        run = _run("llm-worker", tmp_path, *_openai_player(server), "--num-episodes", "3",
                   "--run-id", "bad")
        assert len(server.requests) == 3  # one model call per episode: 401 is not retried
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr
    last = run.stderr.strip().splitlines()
    assert last[-2] == "failed: 3 of 3 episode(s) failed (agent_error: 3); 0 scored"
    # the first distinct error, once, with how many episodes share it
    assert PROVIDER_MESSAGE in last[-1] and "bad API key for openai (HTTP 401" in last[-1]
    assert last[-1].endswith("(and 2 more episode(s))")
    episodes = _lines(tmp_path / "tel" / "bad_episodes.jsonl")
    assert [e["end_reason"] for e in episodes] == ["agent_error"] * 3
    events = _lines(tmp_path / "tel" / "bad_events.jsonl")
    assert [e["event"] for e in events] == ["run_started", "run_completed"]
    outcome = events[-1]["outcome"]
    assert outcome["state"] == "failed" and outcome["exit_code"] == 1
    assert (outcome["episodes_planned"], outcome["episodes_scored"],
            outcome["episodes_failed"]) == (3, 0, 3)
    assert outcome["failed_by_reason"] == {"agent_error": 3}
    assert len(outcome["errors"]) == 1 and PROVIDER_MESSAGE in outcome["errors"][0]
    assert KEY not in run.stderr


def test_one_failed_episode_among_scored_ones_fails_the_run(tmp_path: Path) -> None:
    with FakeOpenAI(reply="turn left") as server:
        server.script(_bad_key())  # the first episode's first call; the rest are answered
        run = _run("llm-worker", tmp_path, *_openai_player(server), "--num-episodes", "2",
                   "--run-id", "mixed")
    assert run.returncode == 1, run.stderr
    assert "failed: 1 of 2 episode(s) failed (agent_error: 1); 1 scored" in run.stderr
    assert PROVIDER_MESSAGE in run.stderr
    episodes = _lines(tmp_path / "tel" / "mixed_episodes.jsonl")
    assert [e["end_reason"] for e in episodes] == ["agent_error", "truncated"]
    outcome = _lines(tmp_path / "tel" / "mixed_events.jsonl")[-1]["outcome"]
    assert (outcome["state"], outcome["episodes_scored"], outcome["episodes_failed"]) == (
        "failed", 1, 1)


def test_every_episode_scored_exits_0(tmp_path: Path) -> None:
    with FakeOpenAI(reply="turn left") as server:
        run = _run("llm-worker", tmp_path, *_openai_player(server), "--num-episodes", "2",
                   "--run-id", "good")
        assert len(server.requests) == 4  # 2 episodes x 2 steps, every call answered
    assert run.returncode == 0, run.stderr
    assert "done: all 2 episode(s) scored; mean reward 0.000 over 2 scored episode(s)" in (
        run.stderr)
    events = _lines(tmp_path / "tel" / "good_events.jsonl")
    assert events[-1]["event"] == "run_completed"
    outcome = events[-1]["outcome"]
    assert (outcome["state"], outcome["exit_code"], outcome["episodes_scored"],
            outcome["errors"]) == ("succeeded", 0, 2, [])


def test_interactive_run_with_a_failed_episode_exits_1_after_stop(tmp_path: Path) -> None:
    commands = [{"cmd": "reset", "seed": 1}, {"cmd": "step"}, {"cmd": "stop"}]
    with FakeOpenAI(reply="turn left") as server:
        server.script(_bad_key())
        run = _run("llm-worker", tmp_path, *_openai_player(server), "--interactive",
                   "--run-id", "inter",
                   stdin="".join(json.dumps(c) + "\n" for c in commands))
    answers = [json.loads(line) for line in run.stdout.splitlines()]
    assert [a["type"] for a in answers] == ["init", "ready", "step", "episode_done", "stopped"]
    assert answers[3]["end_reason"] == "agent_error" and PROVIDER_MESSAGE in answers[3]["error"]
    assert run.returncode == 1, run.stderr
    assert "failed: 1 of 1 episode(s) failed (agent_error: 1); 0 scored" in run.stderr
    completed = _lines(tmp_path / "tel" / "inter_events.jsonl")[-1]
    assert completed["event"] == "run_completed" and completed["ended_by"] == "stop"
    assert completed["outcome"]["failed_by_reason"] == {"agent_error": 1}


def _refusal(run: subprocess.CompletedProcess[str]) -> str:
    """The one ``error:`` line of a run refused at the preflight (and no traceback)."""
    assert "Traceback" not in run.stderr, run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, run.stderr
    return errors[0]


def test_rl_checkpoint_for_another_task_exits_2_with_one_line(tmp_path: Path) -> None:
    run = _run("llm-worker", tmp_path, "--env", "pettingzoo", "--task", "tictactoe_v3",
               "--agent-type", "rl", "--checkpoint", str(CHECKPOINT), "--run-id", "rl")
    assert run.returncode == 2, run.stderr
    line = _refusal(run)
    assert line.startswith(f"error: --agent-type rl --checkpoint {CHECKPOINT}: ")
    # what was wrong: the task the checkpoint was trained for, and the task asked for
    assert "trained for env 'pettingzoo', tasks ['connect_four_v3']" in line
    assert "task 'tictactoe_v3'" in line
    assert "allowed with this checkpoint: pettingzoo connect_four_v3" in line
    assert not (tmp_path / "tel" / "rl_episodes.jsonl").exists()
    assert not (tmp_path / "tel" / "rl_events.jsonl").exists()  # no run_started either


def test_vlm_worker_with_the_text_only_local_model_is_refused_before_any_episode(
        tmp_path: Path) -> None:
    run = _run("vlm-worker", tmp_path, "--env", "crafter", "--run-id", "vlm")
    assert run.returncode == 2, run.stderr
    line = _refusal(run)
    assert line.startswith("error: --agent-type naive with --client local: ")
    assert "model 'qwen2.5-0.5b-instruct' takes no images" in line
    assert "vision-capable client" in line and "--max-image-history 0" in line
    for name in ("steps", "episodes", "events"):  # no episode started, no run_started
        assert not (tmp_path / "tel" / f"vlm_{name}.jsonl").exists()


async def test_policy_server_refuses_frames_for_the_text_only_local_model() -> None:
    """What both preflights (the worker's and ``moria eval``'s rehearsal) read: the policy
    server refuses the Begin of a model player sent frames it cannot take."""
    def config(max_image_history: int) -> dict[str, Any]:
        return {"agent": {"type": "naive", "max_image_history": max_image_history},
                "client": {"client_name": "local"}}
    begin = pol_pb.Begin(episode_id="e", agent_id="agent_0", instruction="play",
                         action_space=types_pb2.ActionSpace(
                             actions=[types_pb2.NamedAction(name="noop")]),
                         agent_config=struct_from_dict(config(1)), env_name="crafter",
                         task="default")
    async with policy_server() as pol:
        stream = PolicyClient(pol.target).play()
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stream.begin(begin)
        await stream.aclose()
        text_only = PolicyClient(pol.target).play()
        begin.agent_config.CopyFrom(struct_from_dict(config(0)))
        ready = await text_only.begin(begin)
        await text_only.end(types_pb2.EpisodeEnd(reason=types_pb2.END_REASON_CANCELLED))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "takes no images" in (refused.value.details() or "")
    assert ready.strategy == "naive"
