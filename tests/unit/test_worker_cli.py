"""llm-worker / vlm-worker settings: flags and JSON keys mapped onto AgentConfig/ClientConfig,
errors that name the flag, the move matcher of action-selector mode, the telemetry writer, and
the human player's strategy with the worker's queue console."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from moria.clients import PolicyClient, serve_in_process, stop_in_process
from moria.common.v1 import types_pb2
from moria.config import AgentConfig, ClientConfig
from moria.policy.v1 import policy_service_pb2 as pol_pb
from worker.cli import main
from worker.config import WorkerConfigError, load_settings
from worker.human import HumanPlayer, QueueConsole
from worker.selector import match_move
from worker.telemetry import WorkerTelemetry, episode_id

SECRET = "sk-test-SECRET-1234"


def test_defaults_are_mosaics() -> None:
    settings, key = load_settings([])
    assert key is None
    client, agent = settings.client_config(), settings.agent_config()
    assert client.client_name == "local"  # the embedded model: works with no key
    assert client.generate_kwargs.temperature == 0.7
    assert client.generate_kwargs.max_tokens == ClientConfig().generate_kwargs.max_tokens
    assert (client.timeout, client.max_retries, client.delay) == (60.0, 3, 1.0)
    assert settings.max_steps == 100 and agent.max_text_history == 10
    assert agent.type == "naive" and agent.max_image_history == 0
    assert settings.opponent_config().type == "random"


def test_flags_override_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps({
        "run_id": "r1", "env_name": "multigrid", "task": "MosaicMultiGrid-S-2v2-IndAgObs-v1",
        "client_name": "google", "model_id": "gemini-2.0-flash", "agent_type": "cot",
        "num_episodes": 3, "max_steps": 50, "temperature": 0.2, "agent_id": "agent_1",
        "observation_mode": "visible_teammates", "coordination_level": 3, "role": "defender"}))
    settings, _ = load_settings(["--config", str(path), "--temperature", "0.9",
                                 "--agent-type", "robust_cot", "--max-tokens", "64"])
    assert settings.client_config().generate_kwargs.temperature == 0.9  # the flag wins
    assert settings.client_config().generate_kwargs.max_tokens == 64
    assert settings.agent_config().type == "robust_cot"
    assert settings.client_config().client_name == "gemini"  # MOSAIC's alias
    assert settings.client_config().model_id == "gemini-2.0-flash"
    assert (settings.num_episodes, settings.max_steps, settings.agent_id) == (3, 50, "agent_1")
    assert (settings.coordination_level, settings.observation_mode) == (3, "visible_teammates")
    assert settings.role == "defender" and settings.family == "multigrid"


def test_unknown_json_key_is_named_with_the_allowed_keys(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"env_name": "babyai", "history": 3}))
    with pytest.raises(WorkerConfigError) as info:
        load_settings(["--config", str(path)])
    assert "'history'" in str(info.value) and "max_text_history" in str(info.value)
    path.write_text("[1, 2]")
    with pytest.raises(WorkerConfigError, match="JSON object"):
        load_settings(["--config", str(path)])


@pytest.mark.parametrize(("argv", "flag", "allowed"), [
    (["--client", "bedrock"], "--client", "openrouter"),
    (["--agent-type", "genius"], "--agent-type", "robust_cot"),
    (["--observation-mode", "omniscient"], "--observation-mode", "visible_teammates"),
    (["--env", "atari"], "--env", "pettingzoo"),
    (["--role", "goalie"], "--role", "defender"),
    (["--coordination-level", "4"], "--coordination-level", "less than or equal to 3"),
    (["--temperature", "3"], "--temperature", "less than or equal to 2"),
    (["--num-episodes", "0"], "--num-episodes", "greater than or equal to 1"),
    (["--max-tokens", "0"], "--max-tokens", "greater than or equal to 1"),
])
def test_bad_values_name_the_flag_and_what_is_allowed(argv: list[str], flag: str,
                                                      allowed: str) -> None:
    with pytest.raises(WorkerConfigError) as info:
        load_settings(argv)
    assert flag in str(info.value) and allowed in str(info.value)


def test_pairing_rules_are_checked() -> None:
    with pytest.raises(WorkerConfigError, match="--opponent"):
        load_settings(["--opponent", "human"])
    with pytest.raises(WorkerConfigError, match="checkpoint"):
        load_settings(["--agent-type", "rl"])
    settings, _ = load_settings(["--agent-type", "rl", "--checkpoint", "p.npz"])
    assert settings.agent_config().checkpoint == "p.npz"


def test_vlm_worker_keeps_frames_and_llm_worker_is_text_only(tmp_path: Path) -> None:
    vlm, _ = load_settings([], prog="vlm-worker", vlm=True)
    assert vlm.agent_config().max_image_history == 1 and vlm.images
    vlm0, _ = load_settings(["--max-image-history", "0"], vlm=True)
    assert not vlm0.images
    path = tmp_path / "shared.json"
    path.write_text(json.dumps({"max_image_history": 4}))  # one file for both workers
    llm, _ = load_settings(["--config", str(path)])
    assert llm.agent_config().max_image_history == 0
    with pytest.raises(SystemExit):  # llm-worker has no image flags
        load_settings(["--max-image-history", "2"])


def test_bad_settings_exit_2_without_the_api_key(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    code = main(["--client", "openai", "--api-key", SECRET, "--temperature", "9"],
                prog="llm-worker", vlm=False)
    err = capsys.readouterr().err
    assert code == 2 and "--temperature" in err and SECRET not in err
    assert "OPENAI_API_KEY" not in os.environ  # nothing was started or exported


@pytest.mark.parametrize(("answer", "index", "how"), [
    ("B2", 1, "exact"),
    ("  b2. ", 1, "exact"),
    ("I will play C3 now", 2, "substring"),
    ("A1 or C3?", 0, "substring"),  # list order decides
    ("let's grab the ball", 3, "synonym"),
    ("wait here", 4, "synonym"),
    ("dance", -1, "none"),
])
def test_match_move_follows_mosaics_order(answer: str, index: int, how: str) -> None:
    assert match_move(answer, ["A1", "B2", "C3", "pickup", "still"]) == (index, how)


def test_telemetry_lines_scrub_secrets_and_can_be_disabled(tmp_path: Path) -> None:
    writer = WorkerTelemetry(tmp_path, "r")
    writer.step({"episode_id": episode_id("r", 7), "step_index": 0, "info": {"api_key": SECRET},
                 "llm_input_tokens": 12})
    writer.event("heartbeat", step=3)
    with pytest.raises(ValueError, match="run_started"):
        writer.event("lunch")
    writer.close()
    step = json.loads(writer.steps_path.read_text())
    assert step["episode_id"] == "r-ep000007" and step["llm_input_tokens"] == 12
    assert SECRET not in writer.steps_path.read_text()
    assert json.loads(writer.events_path.read_text())["event"] == "heartbeat"
    off = WorkerTelemetry(tmp_path / "off", "r", enabled=False)
    off.event("run_started")
    assert not (tmp_path / "off").exists()


async def test_the_human_seat_plays_the_supplied_move_and_fails_when_closed() -> None:
    """The worker plays the human seat in its own process: each observe waits for the next
    supplied move and answers it as typed (stripped); a closed console is an in-band error."""
    console = QueueConsole()
    target = serve_in_process("human-test", HumanPlayer(console))
    try:
        client = PolicyClient(target)
        info = await client.get_info(check=(AgentConfig(type="human"), ClientConfig()))
        assert list(info.strategies) == ["human"] and not info.config_errors
        refused = await client.get_info(check=(AgentConfig(type="naive"), ClientConfig()))
        assert "'naive'" in refused.config_errors[0]
        stream = client.play()
        ready = await stream.begin(pol_pb.Begin(agent_id="player_1"))
        assert ready.strategy == "human" and ready.idle_timeout_s == 0
        observe = pol_pb.Observe(step=0, observation=types_pb2.Observation(
            long_term_context="board", legal_actions=["A1", "B2"]))
        waiting = asyncio.create_task(stream.observe(observe))
        await asyncio.sleep(0)
        assert not waiting.done()  # waits for the human
        console.supply(" B2 \n")
        act = await waiting
        assert act.action.text == "B2" and act.raw_completion == " B2 \n"
        assert act.reasoning == "typed by a human" and not act.HasField("error")
        assert console.last_agent == "player_1"
        assert console.last_observation is not None
        assert console.last_observation.long_term_context == "board"
        console.close()
        closed = await stream.observe(observe)
        assert closed.HasField("error") and "closed" in closed.error.message
        assert await stream.end(types_pb2.EpisodeEnd()) is not None
    finally:
        stop_in_process(target)
    with pytest.raises(ValueError, match="no in-process player"):
        PolicyClient(target)
