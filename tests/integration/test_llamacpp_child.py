"""``client_name: llamacpp`` without a base_url: Moria runs llama.cpp's real OpenAI-compatible
server (``llama_cpp.server``) as a child process with the bundled SmolLM2-135M model, talks to it
through the real ``openai`` SDK, and stops it again (aclose, interpreter exit, parent killed)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from agent_server.backends import create_backend, default_params, llamacpp_server
from agent_server.backends.base import BackendError, ChatMessage, GenerateParams
from agent_server.backends.llamacpp_server import LlamaCppServerBackend
from agent_server.backends.models import resolve_model_path
from moria.config import ClientConfig

ROOT = Path(__file__).resolve().parents[2]
SMOL = "smollm2-135m-instruct"
ACTIONS = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle", "done"]
CHAT = [
    ChatMessage(
        "system", "You play BabyAI. Answer with exactly one action: " + ", ".join(ACTIONS) + "."
    ),
    ChatMessage("user", "You see a red ball one step in front of you. Pick it up."),
]


@pytest.fixture(autouse=True)
def one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """One llama.cpp thread (read by ``local_llama.default_threads``): on a small machine shared
    with other busy processes, two spinning llama.cpp threads on two cores made the first call
    take 25-55 s instead of under 1 s."""
    monkeypatch.setenv("MORIA_LLAMA_THREADS", "1")


def smol_client(**overrides: object) -> ClientConfig:
    settings: dict[str, object] = {
        "client_name": "llamacpp",
        "model_id": SMOL,
        "generate_kwargs": {"temperature": 0.0, "max_tokens": 8},
        "delay": 0.01,
        "max_retries": 1,
        "timeout": 60.0,
    }
    settings.update(overrides)
    return ClientConfig.model_validate(settings)


def child_pids() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def assert_gone(pid: int, within_s: float = 30.0) -> None:
    """The process ``pid`` ends (bounded wait; a process that never ends fails the test)."""
    try:
        proc = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    try:
        proc.wait(timeout=within_s)
    except psutil.TimeoutExpired:
        proc.kill()
        pytest.fail(f"llama.cpp server pid {pid} outlived its owner")


async def test_child_server_completes_constrains_and_is_stopped_by_aclose() -> None:
    client = smol_client()
    backend = create_backend(client)
    assert isinstance(backend, LlamaCppServerBackend)
    assert backend.pid is None  # nothing is started before the first call
    other: LlamaCppServerBackend | None = None
    try:
        out = await backend.complete(CHAT, default_params(client))

        pid = backend.pid
        assert pid is not None
        proc = psutil.Process(pid)
        assert proc.is_running() and proc.ppid() == os.getpid()
        cmd = proc.cmdline()
        assert cmd[cmd.index("--model") + 1] == str(resolve_model_path(SMOL))
        assert cmd[cmd.index("--host") + 1] == "127.0.0.1"
        assert cmd[cmd.index("--n_ctx") + 1] == "8192"
        assert cmd[cmd.index("--n_threads") + 1] == "1"  # from default_threads()
        assert backend.base_url == f"http://127.0.0.1:{cmd[cmd.index('--port') + 1]}/v1"

        assert out.text.strip()
        assert out.usage.input_tokens > 20
        assert 0 < out.usage.output_tokens <= 8
        assert out.stop_reason in ("stop", "length")

        # constrained choices go to the server as a GBNF grammar
        for prompt in ("There is a wall ahead.", "A key lies to your left."):
            chosen = await backend.complete(
                [CHAT[0], ChatMessage("user", prompt)],
                GenerateParams(temperature=1.0, max_tokens=8, choices=ACTIONS,
                               extra={"seed": 3}),
            )
            assert chosen.text in ACTIONS, chosen.text

        # a second backend for the same model shares the child
        other = LlamaCppServerBackend(smol_client(timeout=30.0))
        await other.start()
        assert other.pid == pid
        await backend.aclose()
        assert proc.is_running(), "the child stopped while another backend still used it"
        again = await other.complete(CHAT, GenerateParams(temperature=0.0, max_tokens=4))
        assert again.text.strip()
    finally:
        await backend.aclose()
        if other is not None:
            await other.aclose()

    assert not proc.is_running()  # aclose of the last user waited for the child to end
    assert pid not in child_pids()
    with pytest.raises(BackendError, match="closed"):
        await backend.complete(CHAT, GenerateParams(max_tokens=4))


def test_unknown_model_is_an_error_before_any_process_starts() -> None:
    before = child_pids()
    with pytest.raises(BackendError, match="unknown local model") as info:
        create_backend(ClientConfig(client_name="llamacpp", model_id="llama-99b-imaginary"))
    assert SMOL in str(info.value)  # the message lists the built-in names
    assert child_pids() == before


async def test_missing_gguf_file_is_an_error_before_any_process_starts(tmp_path: Path) -> None:
    before = child_pids()
    backend = create_backend(
        ClientConfig(client_name="llamacpp", model_id=str(tmp_path / "absent.gguf"))
    )
    with pytest.raises(BackendError, match="not found"):
        await backend.complete(CHAT, GenerateParams(max_tokens=4))
    assert child_pids() == before
    await backend.aclose()


async def test_child_that_exits_early_reports_its_log(tmp_path: Path) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"this is not a GGUF file" * 100)
    backend = LlamaCppServerBackend(smol_client(model_id=str(broken)), start_timeout=120.0)
    with pytest.raises(BackendError) as info:
        await backend.start()
    message = str(info.value)
    assert "exited with code" in message
    assert "broken.gguf" in message
    assert "moria-llamacpp-broken-" in message  # names its log file, which is kept
    assert len(message.splitlines()) > 1  # quotes the tail of the child's output
    log_file = Path(message.split("; log ", 1)[1].split(":\n", 1)[0])
    assert log_file.is_file()
    log_file.unlink()
    pid = backend.pid
    assert pid is None or pid not in child_pids()
    await backend.aclose()


async def test_a_port_taken_meanwhile_is_retried_on_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        ports = iter([busy])
        real_free_port = llamacpp_server.free_port
        monkeypatch.setattr(llamacpp_server, "free_port",
                            lambda: next(ports, None) or real_free_port())
        backend = LlamaCppServerBackend(smol_client())
        try:
            await backend.start()
            assert backend.base_url is not None
            assert f":{busy}/" not in backend.base_url
            out = await backend.complete(CHAT, GenerateParams(temperature=0.0, max_tokens=2))
            assert out.usage.output_tokens > 0
        finally:
            await backend.aclose()


_OWNER = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from agent_server.backends.llamacpp_server import LlamaCppServerBackend
    from moria.config import ClientConfig

    async def main():
        backend = LlamaCppServerBackend(ClientConfig(client_name="llamacpp", model_id=%r))
        await backend.start()
        print(json.dumps({"pid": backend.pid, "log": str(backend._child.log_path)}),
              flush=True)
        if sys.argv[1] == "hang":
            time.sleep(600)

    asyncio.run(main())
    """
) % SMOL


def _start_owner(mode: str) -> tuple[subprocess.Popen[str], int, Path]:
    """A separate Python process that starts a child server and prints its pid and log."""
    owner = subprocess.Popen(
        [sys.executable, "-c", _OWNER, mode], cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )
    assert owner.stdout is not None
    line = owner.stdout.readline()
    assert line, f"owner process printed nothing (exit code {owner.poll()})"
    info = json.loads(line)
    return owner, int(info["pid"]), Path(info["log"])


def test_no_child_outlives_its_owner() -> None:
    # a normal interpreter exit without aclose: the atexit hook stops the child
    owner, pid, log_file = _start_owner("exit")
    assert owner.wait(60) == 0
    assert not psutil.pid_exists(pid) or not psutil.Process(pid).is_running()
    assert not log_file.exists()

    # the owner is SIGKILLed (no atexit): the child notices, removes its log and ends
    owner, pid, log_file = _start_owner("hang")
    assert psutil.Process(pid).is_running()
    assert log_file.is_file()
    owner.send_signal(signal.SIGKILL)
    owner.wait(30)
    assert_gone(pid)
    assert not log_file.exists()
