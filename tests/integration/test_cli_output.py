"""Output a person can use, from the real ``moria`` script: ``moria tasks`` never cuts a task
id (stdout a pipe or an 80-column terminal), errors and ``--hint`` commands are never
hard-wrapped (so they can be pasted), ``moria --help`` names the commands installed next to it
and ``moria prepare --help`` every family.

The terminal is a real pseudo-terminal (``pty``) of 80 columns, as a person's would be.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
import tomllib
from pathlib import Path

import pytest

from moria.clients import EnvClient
from moria.families import families
from orchestrator.apps.cli import full_protocol_hint
from orchestrator.plan.spec import DEFAULT_NUM_EPISODES
from tests.support.processes import server_processes

ROOT = Path(__file__).resolve().parents[2]
MORIA = str(Path(sys.executable).parent / "moria")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: What rich writes where it cuts a cell.
ELLIPSIS = "\u2026"
TIMEOUT_S = 300


def _environment() -> dict[str, str]:
    """This process's environment without anything that fixes a console's size or colours."""
    drop = {"COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE",
            "JUPYTER_COLUMNS", "JUPYTER_LINES"}
    return {k: v for k, v in os.environ.items() if k not in drop} | {"TERM": "xterm-256color"}


def in_terminal(*args: str, cwd: Path, columns: int = 80) -> tuple[int, str]:
    """Run ``moria ARGS`` with stdin, stdout and stderr on a pseudo-terminal ``columns`` wide;
    returns (exit code, everything it wrote, colours removed, lines joined by ``\\n``)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    proc = subprocess.Popen([MORIA, *args], stdin=slave, stdout=slave, stderr=slave, cwd=cwd,
                            env=_environment(), start_new_session=True)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    text = ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))
    return code, text.replace("\r\n", "\n").replace("\r", "\n")


def in_pipe(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([MORIA, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=TIMEOUT_S, env=_environment())


@pytest.fixture(scope="module")
def every_task() -> list[tuple[str, str]]:
    """(env, task) of every task the env server lists, asked of a real server in a process of
    its own, as ``moria tasks`` asks one: a server inside this test process would list what
    the packages that other tests imported here registered besides (gymnasium's registry is
    per process), so its list depended on which tests ran before."""
    async def listed(target: str) -> list[tuple[str, str]]:
        tasks = await EnvClient(target).list_tasks()
        return [(t.family, t.task) for t in tasks]

    with server_processes(("env_server", ("--families", ",".join(sorted(DEFAULT_NUM_EPISODES)))),
                          ) as (server,):
        return asyncio.run(listed(server.target))


def _rows(text: str) -> set[tuple[str, str]]:
    """(env, task) of every table row that starts a task (its env cell is not empty)."""
    rows = set()
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("\u2502")]
        if len(cells) == 7 and cells[1] and cells[2]:
            rows.add((cells[1], cells[2]))
    return rows


def test_tasks_reach_a_slow_reader_whole(tmp_path: Path,
                                        every_task: list[tuple[str, str]]) -> None:
    # the listing is larger than a pipe holds; a reader that waits before reading once got
    # one pipe-full (64 KiB) and nothing more, with exit code 0
    process = subprocess.Popen([MORIA, "tasks"], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, env=_environment())
    try:
        assert process.stdout is not None
        time.sleep(3)  # a slow reader: the writer meets a full pipe (whole output either way)
        out = process.stdout.read().decode()
    finally:
        process.wait(timeout=TIMEOUT_S)
    assert process.returncode == 0
    assert len(out.encode()) > 65536
    assert len(out.splitlines()) == len(every_task) + 1


def test_tasks_in_a_pipe_are_plain_lines_one_per_task(
        tmp_path: Path, every_task: list[tuple[str, str]]) -> None:
    run = in_pipe("tasks", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].split("\t") == ["env", "task", "max steps", "default action",
                                    "description"]
    rows = [line.split("\t") for line in lines[1:]]
    assert all(len(row) == 5 for row in rows)
    assert {(row[0], row[1]) for row in rows} == set(every_task)
    assert len(rows) == len(every_task)
    assert ELLIPSIS not in run.stdout and "\u2502" not in run.stdout  # no table borders
    assert all(line == line.rstrip() for line in lines)  # no padding to the widest row
    soccer = [line for line in lines if "Soccer" in line]  # | grep Soccer
    ids = {task for env, task in every_task if env == "multigrid" and "-S-" in task}
    assert ids and {line.split("\t")[1] for line in soccer} >= ids


def test_tasks_in_an_80_column_terminal_show_every_id_whole(
        tmp_path: Path, every_task: list[tuple[str, str]]) -> None:
    code, text = in_terminal("tasks", cwd=tmp_path)
    assert code == 0, text
    assert ELLIPSIS not in text
    assert _rows(text) == set(every_task)


@pytest.mark.parametrize("args", [("tasks", "--env", "no-such-env"),
                                  ("record-demos", "--env", "no-such-env")])
def test_errors_stay_one_line_in_an_80_column_terminal(tmp_path: Path,
                                                      args: tuple[str, ...]) -> None:
    code, text = in_terminal(*args, cwd=tmp_path)
    assert code == 2, text
    errors = [line for line in text.splitlines() if "no-such-env" in line]
    assert len(errors) == 1 and len(errors[0]) > 80, text
    assert errors[0].rstrip().endswith("pettingzoo, textworld")  # the whole list, one line


def test_an_error_naming_rich_markup_prints_as_written(tmp_path: Path) -> None:
    # "[/red]" once closed the error label's own tag: rich raised MarkupError instead
    run = in_pipe("eval", "envs.names=bab[/red]yai", "--no-progress", cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("error:")]
    assert errors and "unknown env 'bab[/red]yai'" in run.stderr, run.stderr


def test_a_run_whose_output_folder_holds_brackets_reports_it_as_written(
        tmp_path: Path) -> None:
    out = tmp_path / "run[/bold]x"
    run = in_pipe("eval", "agent.type=dummy", "envs.names=babyai", "eval.num_episodes.babyai=1",
                  "tasks.babyai_tasks=[BabyAI-MixedTrainLocal-v0/goto]",
                  "eval.max_steps_per_episode=2", f"eval.output_dir={out}", "--no-progress",
                  cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert f"results in {out}" in run.stderr and f"progress plot: {out}" in run.stderr
    assert (out / "summary.json").is_file()


def test_hint_commands_stay_whole_in_an_80_column_terminal(tmp_path: Path) -> None:
    code, text = in_terminal(
        "eval", "agent.type=dummy", "envs.names=babyai", "eval.num_episodes.babyai=1",
        "tasks.babyai_tasks=[BabyAI-MixedTrainLocal-v0/goto]", "eval.max_steps_per_episode=2",
        f"eval.output_dir={tmp_path / 'out'}", "--hint", "--no-progress", cwd=tmp_path)
    assert code == 0, text
    lines = [line.rstrip() for line in text.splitlines()]
    # MORIA is run by its full path: the hint names that path, or ``moria`` when the PATH's
    # moria is this very program (a venv on the PATH)
    on_path = shutil.which("moria", path=_environment().get("PATH"))
    named = "moria" if on_path and Path(on_path).resolve() == Path(MORIA).resolve() else MORIA
    hint = full_protocol_hint(named)
    commands = [line for line in hint.splitlines() if line.startswith("  ")]
    assert any(line.startswith(f"  {named} eval ") for line in commands)
    assert commands and all(len(c) > 80 for c in commands[:1])
    assert all(command in lines for command in commands), text[-3000:]


def test_moria_help_names_every_installed_command(tmp_path: Path) -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    run = in_pipe("--help", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    for name in scripts:
        if name != "moria":
            assert re.search(rf"^  {re.escape(name)}\s", run.stdout, re.M), (name, run.stdout)
    assert "llm-worker --help" in run.stdout


def test_prepare_help_lists_every_family_and_data_source(tmp_path: Path) -> None:
    run = in_pipe("prepare", "--help", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    words = set(re.findall(r"[\w-]+", run.stdout))
    assert set(families()) <= words, sorted(set(families()) - words)
    sources = {s for m in families().values() for s in m.prepare} | {"local-model"}
    assert sources <= words, sorted(sources - words)
