"""Frames for a local model stop the run at its preflight, before any episode.

No local model reads images (``agent_server.backends.models.TEXT_ONLY_REASON``; the packages
checked for a vision-language model are listed in docs/backends.md). These runs used to fail
inside every episode instead: ``client_name=llamacpp`` without a ``base_url`` (the
``llama_cpp.server`` child Moria starts for a built-in GGUF) answered each model call with
HTTP 500 "can only concatenate str (not "list") to str", retried until the retries ran out.

Real processes and servers throughout: ``vlm-worker`` as a subprocess with its own local stack,
``moria eval`` as a subprocess against env and policy servers on loopback, and a policy server's
``Play`` stream. No llama.cpp model is loaded or started: the refusal comes first."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest

from agent_server.backends.models import TEXT_ONLY_REASON
from moria.clients import PolicyClient
from moria.codecs import struct_from_dict
from moria.common.v1 import types_pb2
from moria.policy.v1 import policy_service_pb2 as pol_pb
from tests.integration.test_run_outcomes import moria
from tests.support.servers import env_server, policy_server

BIN = Path(sys.executable).parent
RUN_TIMEOUT_S = 300
SMOL = "smollm2-135m-instruct"


def _worker(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    script = BIN / "vlm-worker"
    assert script.exists(), f"{script} is missing: install the package (`pip install -e .`)"
    return subprocess.run(
        [str(script), "--telemetry-dir", str(tmp_path / "tel"), *args], cwd=tmp_path,
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr
    return errors[0]


@pytest.mark.parametrize(("flags", "prefix", "model"), [
    ((), "error: --agent-type naive with --client local: ", "qwen2.5-0.5b-instruct"),
    (("--client", "llamacpp", "--model", SMOL),
     "error: --agent-type naive with --client llamacpp: ", SMOL),
])
def test_vlm_worker_on_crafter_with_a_local_model_stops_at_the_preflight(
        tmp_path: Path, flags: tuple[str, ...], prefix: str, model: str) -> None:
    run = _worker(tmp_path, "--env", "crafter", "--max-steps", "3", "--run-id", "vlm", *flags)
    assert run.returncode == 2, run.stderr
    line = _one_error_line(run.stderr)
    assert line.startswith(prefix), line
    assert f"model {model!r} takes no images" in line
    assert "--max-image-history 1 sends it the env's frames" in line
    assert TEXT_ONLY_REASON in line
    assert "--max-image-history 0 to play from text only" in line
    for name in ("steps", "episodes", "events"):  # no episode started, no run_started
        assert not (tmp_path / "tel" / f"vlm_{name}.jsonl").exists()


@pytest.mark.parametrize(("family", "client"), [
    ("babyai", ["client.client_name=llamacpp", f"client.model_id={SMOL}"]),
    ("crafter", ["client.client_name=local", f"client.model_id={SMOL}"]),
])
async def test_moria_eval_with_frames_for_a_local_model_stops_at_the_preflight(
        tmp_path: Path, family: str, client: list[str]) -> None:
    async with env_server((family,)) as env, policy_server() as pol:
        code, _, err = await moria(
            "eval", "--vlm", *client, f"envs.names={family}", f"eval.num_episodes.{family}=1",
            "eval.max_steps_per_episode=3", "eval.output_dir=out",
            f"endpoints.env.{family}=[{env.target}]", f"endpoints.policy=[{pol.target}]",
            "--no-progress", cwd=tmp_path)
    assert code == 2, err[-3000:]
    assert f"model '{SMOL}' takes no images" in err
    assert "agent.max_image_history=1 sends it the env's frames" in err
    assert TEXT_ONLY_REASON in err
    assert not list((tmp_path / "out").rglob("*_run_*.json"))


async def test_policy_server_refuses_frames_for_the_llamacpp_child_at_begin() -> None:
    """What both preflights read (GetInfo's check and the rehearsal's Begin): the llamacpp
    child is refused frames; with a base_url (a server that may serve a vision model) it is
    not refused for them."""
    def begin(client: dict[str, Any]) -> pol_pb.Begin:
        config = {"agent": {"type": "naive", "max_image_history": 1}, "client": client}
        return pol_pb.Begin(episode_id="e", agent_id="agent_0", instruction="play",
                            action_space=types_pb2.ActionSpace(
                                actions=[types_pb2.NamedAction(name="noop")]),
                            agent_config=struct_from_dict(config), env_name="crafter",
                            task="default")

    async with policy_server() as pol:
        stream = PolicyClient(pol.target).play()
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stream.begin(begin({"client_name": "llamacpp", "model_id": SMOL}))
        await stream.aclose()
        served = PolicyClient(pol.target).play()
        ready = await served.begin(begin({"client_name": "llamacpp", "model_id": "m",
                                          "base_url": "http://127.0.0.1:9/v1"}))
        await served.end(types_pb2.EpisodeEnd(reason=types_pb2.END_REASON_CANCELLED))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = refused.value.details() or ""
    assert f"client 'llamacpp' model '{SMOL}' takes no images" in details
    assert ready.strategy == "naive"
