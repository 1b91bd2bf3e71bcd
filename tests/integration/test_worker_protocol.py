"""The real ``llm-worker`` / ``vlm-worker`` console scripts, run as subprocesses and driven with
JSON lines on stdin, as MOSAIC drives them.

Each worker starts its own local stack (env and agent servers as child processes on unix
sockets); the players are non-model ones (dummy, random, human) so the tests need no model.
"""

from __future__ import annotations

import base64
import json
import os
import selectors
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
SECRET = "sk-test-SECRET-1234"


def _script(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{path} is missing: install the package (`pip install -e .`)"
    return str(path)


class Worker:
    """A running worker process: send one command, read one answer line (with a deadline so a
    broken worker fails the test instead of hanging it)."""

    def __init__(self, script: str, tmp_path: Path, *args: str) -> None:
        self.stderr_path = tmp_path / f"{script}.stderr"
        self.proc = subprocess.Popen(
            [_script(script), "--interactive", "--telemetry-dir", str(tmp_path / "telemetry"),
             *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr_path.open("wb"),
            cwd=tmp_path, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self._sel = selectors.DefaultSelector()
        assert self.proc.stdout is not None
        self._sel.register(self.proc.stdout, selectors.EVENT_READ)
        self._buffer = b""

    def read(self, timeout: float = 120.0) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            if time.monotonic() > deadline:
                raise AssertionError(f"no answer within {timeout}s; stderr:\n{self.stderr()}")
            if self._sel.select(timeout=1.0):
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if not chunk:
                    raise AssertionError(f"worker closed stdout; stderr:\n{self.stderr()}")
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)  # every stdout line must be one JSON object

    def send(self, obj: dict[str, Any] | str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        line = (obj if isinstance(obj, str) else json.dumps(obj)) + "\n"
        self.proc.stdin.write(line.encode())
        self.proc.stdin.flush()
        return self.read()

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")[-4000:]

    def close(self) -> int:
        if self.proc.poll() is None:  # SIGTERM first: the worker then stops its child servers
            self.proc.terminate()
            try:
                return self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait(timeout=30)


def _alive(worker: Worker) -> None:
    assert worker.send({"cmd": "ping"}) == {"type": "pong"}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_babyai_every_command_and_malformed_input(tmp_path: Path) -> None:
    w = Worker("llm-worker", tmp_path, "--run-id", "bab", "--env", "babyai", "--agent-type",
               "dummy", "--max-steps", "6", "--seed", "5")
    try:
        init = w.read()
        assert init["type"] == "init" and init["run_id"] == "bab" and init["env"] == "babyai"
        assert init["version"] == "1.0" and init["task"].startswith("BabyAI-")
        _alive(w)

        # malformed input: each answered by an error line, and the worker keeps answering
        bad_json = w.send("{not json")
        assert bad_json["type"] == "error" and "bad JSON" in bad_json["message"]
        _alive(w)
        unknown = w.send({"cmd": "teleport"})
        assert unknown["type"] == "error" and "teleport" in unknown["message"]
        assert "select_action" in unknown["message"]  # lists what is allowed
        _alive(w)
        missing = w.send({"cmd": "init_agent", "game_name": "babyai"})
        assert missing["type"] == "error" and "'player_id'" in missing["message"]
        _alive(w)
        ill_typed = w.send({"cmd": "reset", "seed": "seven"})
        assert ill_typed["type"] == "error" and "'seed'" in ill_typed["message"]
        early = w.send({"cmd": "step"})
        assert early["type"] == "error" and "reset" in early["message"]
        _alive(w)

        ready = w.send({"cmd": "reset", "seed": 11})
        assert ready["type"] == "ready" and ready["episode_id"] == "bab-ep000000"
        assert ready["observation"] and "BabyAI" in ready["system_prompt"]
        assert "render_payload" not in ready  # text-only worker
        actions = ready["action_names"]
        steps = []
        while True:
            answer = w.send({"cmd": "step"})
            assert answer["type"] == "step", answer
            steps.append(answer)
            assert answer["step_index"] == len(steps) - 1 and answer["action"] in actions
            if answer["done"]:
                break
        done = w.read()
        assert done["type"] == "episode_done" and done["episode_id"] == "bab-ep000000"
        assert done["num_steps"] == len(steps) <= 6
        assert done["terminated"] or done["truncated"]
        after = w.send({"cmd": "step"})
        assert after["type"] == "error" and "over" in after["message"]

        ready2 = w.send({"cmd": "reset"})  # no seed: --seed + episode index
        assert ready2["episode_id"] == "bab-ep000001" and ready2["seed"] == 6

        agent = w.send({"cmd": "init_agent", "game_name": "BabyAI-GoTo", "player_id": "p0",
                        "instruction_prompt": "Go to the ball."})
        assert agent == {"type": "agent_ready", "player_id": "p0", "game_name": "BabyAI-GoTo",
                         "agent_type": "dummy", "model": "dummy"}
        moves = ["turn left", "turn right", "go forward"]
        picks = set()
        for _ in range(8):
            chosen = w.send({"cmd": "select_action", "observation": "a ball 2 steps forward",
                             "player_id": "p0", "info": {"legal_moves": moves}})
            assert chosen["type"] == "action_selected" and chosen["player_id"] == "p0"
            assert moves[chosen["action"]] == chosen["action_str"]
            assert chosen["input_tokens"] == 0 and chosen["timestamp"]
            picks.add(chosen["action_str"])
        assert len(picks) > 1  # a random player, not a constant
        unknown_player = w.send({"cmd": "select_action", "observation": "x", "player_id": "p9",
                                 "info": {"legal_moves": moves}})
        assert unknown_player["type"] == "error" and "init_agent" in unknown_player["message"]

        assert w.send({"cmd": "stop"})["type"] == "stopped"
        assert w.proc.wait(timeout=60) == 0
    finally:
        w.close()
    step_lines = _lines(tmp_path / "telemetry" / "bab_steps.jsonl")
    assert len(step_lines) == len(steps)  # the unfinished second episode adds none
    events = [e["event"] for e in _lines(tmp_path / "telemetry" / "bab_events.jsonl")]
    assert events[0] == "run_started" and events[-1] == "run_completed"


def test_tictactoe_opponent_moves_and_action_mask(tmp_path: Path) -> None:
    w = Worker("llm-worker", tmp_path, "--run-id", "ttt", "--env", "pettingzoo", "--task",
               "tictactoe_v3", "--agent-type", "random", "--agent-id", "player_2")
    try:
        assert w.read()["agent_id"] == "player_2"
        ready = w.send({"cmd": "reset", "seed": 3})
        # player_1 (the random opponent) moves first, before the worker's player is asked
        assert [m["agent_id"] for m in ready["opponent_moves"]] == ["player_1"]
        assert len(ready["legal_actions"]) == 8
        while True:
            answer = w.send({"cmd": "step"})
            assert answer["agent_id"] == "player_2" and answer["valid"]
            assert all(m["agent_id"] == "player_1" for m in answer["opponent_moves"])
            if answer["done"]:
                break
        done = w.read()
        assert done["type"] == "episode_done" and done["terminated"]
        assert done["metrics"]["outcome"]

        w.send({"cmd": "init_agent", "game_name": "tictactoe_v3", "player_id": "player_1"})
        # no legal_moves: the action mask says which action indices are legal
        mask = [False, True, False, False, True, False, False, False, False]
        for _ in range(5):
            chosen = w.send({"cmd": "select_action", "observation": "board", "player_id":
                             "player_1", "action_mask": mask})
            assert chosen["action"] in (1, 4) and chosen["action_str"] == str(chosen["action"])
        bad_mask = w.send({"cmd": "select_action", "observation": "b", "player_id": "player_1",
                           "action_mask": "all"})
        assert bad_mask["type"] == "error" and "action_mask" in bad_mask["message"]
        _alive(w)
        w.proc.stdin.close()  # type: ignore[union-attr]  # EOF = stop
        assert w.proc.wait(timeout=60) == 0
    finally:
        w.close()
    steps = _lines(tmp_path / "telemetry" / "ttt_steps.jsonl")
    assert {s["agent_id"] for s in steps} == {"player_1", "player_2"}
    assert [s["step_index"] for s in steps] == list(range(len(steps)))


def test_human_plays_typed_moves_to_the_end(tmp_path: Path) -> None:
    w = Worker("llm-worker", tmp_path, "--run-id", "hum", "--env", "pettingzoo", "--task",
               "tictactoe_v3", "--agent-type", "human")
    try:
        assert w.read()["agent_type"] == "human"
        ready = w.send({"cmd": "reset", "seed": 2})
        assert ready["agent_id"] == "player_1" and ready["opponent_moves"] == []
        missing = w.send({"cmd": "step"})
        assert missing["type"] == "error" and "'action'" in missing["message"]
        legal = ready["legal_actions"]
        typed = []
        while True:
            move = legal[-1]  # the human types a legal move
            typed.append(move)
            answer = w.send({"cmd": "step", "action": move})
            assert answer["type"] == "step", answer
            assert answer["action"] == move and answer["valid"]
            assert answer["llm_response"] == move and answer["reasoning"] == "typed by a human"
            legal = answer["legal_actions"]
            if answer["done"]:
                break
        done = w.read()
        assert done["type"] == "episode_done" and done["terminated"]
        assert done["llm_calls"] == 0

        # an illegal typed move is judged by the env like any answer
        w.send({"cmd": "reset", "seed": 2})
        wrong = w.send({"cmd": "step", "action": "Z9"})
        assert wrong["type"] == "step" and not wrong["valid"] and wrong["feedback"]
        assert w.send({"cmd": "stop"})["type"] == "stopped"
        assert w.proc.wait(timeout=60) == 0
    finally:
        w.close()
    mine = [s for s in _lines(tmp_path / "telemetry" / "hum_steps.jsonl")
            if s["agent_id"] == "player_1"]
    assert [s["action"] for s in mine[:len(typed)]] == typed


def test_vlm_worker_sends_frames(tmp_path: Path) -> None:
    w = Worker("vlm-worker", tmp_path, "--run-id", "vlm", "--env", "minigrid", "--agent-type",
               "dummy", "--render-mode", "human", "--no-jsonl")
    try:
        w.read()
        ready = w.send({"cmd": "reset", "seed": 1})
        payload = ready["render_payload"]
        assert payload["encoding"] == "png" and payload["width"] > 0 and payload["height"] > 0
        assert base64.b64decode(payload["rgb"])[:8] == b"\x89PNG\r\n\x1a\n"
        assert "render_payload" in w.send({"cmd": "step"})
        w.send({"cmd": "stop"})
        assert w.proc.wait(timeout=60) == 0
    finally:
        w.close()
    assert "rgb_array" in w.stderr()  # the headless fallback of --render-mode human is logged
    assert not (tmp_path / "telemetry").exists()  # --no-jsonl


def test_autonomous_run_writes_both_telemetry_files(tmp_path: Path) -> None:
    config = tmp_path / "worker.json"
    config.write_text(json.dumps({"env_name": "babyai", "agent_type": "random",
                                  "num_episodes": 2, "max_steps": 4, "client_name": "openai"}))
    proc = subprocess.run(
        [_script("llm-worker"), "--config", str(config), "--run-id", "auto", "--telemetry-dir",
         str(tmp_path / "tel"), "--max-steps", "3", "--api-key", SECRET],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""  # progress goes to stderr
    assert "auto-ep000001" in proc.stderr
    steps = _lines(tmp_path / "tel" / "auto_steps.jsonl")
    episodes = _lines(tmp_path / "tel" / "auto_episodes.jsonl")
    assert len(steps) == 6 and len(episodes) == 2  # the flag's 3 steps beat the file's 4
    step_fields = {"run_id", "episode_id", "step_index", "agent_id", "observation", "action",
                   "reward", "terminated", "truncated", "info", "llm_response",
                   "llm_input_tokens", "llm_output_tokens", "timestamp"}
    assert all(step_fields <= set(s) for s in steps)
    assert [s["episode_id"] for s in steps] == ["auto-ep000000"] * 3 + ["auto-ep000001"] * 3
    episode_fields = {"run_id", "episode_id", "episode_index", "env_name", "task",
                      "total_reward", "num_steps", "terminated", "truncated", "success",
                      "start_time", "end_time", "duration_seconds", "llm_calls",
                      "total_input_tokens", "total_output_tokens"}
    assert all(episode_fields <= set(e) for e in episodes)
    assert [e["episode_index"] for e in episodes] == [0, 1]
    assert all(e["num_steps"] == 3 and e["truncated"] and not e["success"] for e in episodes)
    events = [e["event"] for e in _lines(tmp_path / "tel" / "auto_events.jsonl")]
    assert events == ["run_started", "run_completed"]
    for path in [*(tmp_path / "tel").rglob("*")]:
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
    assert SECRET not in proc.stderr


def test_unknown_task_exits_2_naming_the_flag(tmp_path: Path) -> None:
    proc = subprocess.run(
        [_script("llm-worker"), "--env", "pettingzoo", "--task", "checkers_v1", "--agent-type",
         "dummy", "--no-jsonl"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert "--task 'checkers_v1'" in proc.stderr and "tictactoe_v3" in proc.stderr
