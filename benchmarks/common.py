"""Helpers the benchmark modules share (``benchmarks/run.py`` and the suites it runs import
them from here, so no suite reaches into another's module)."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any


async def oracle_episode(session: Any, task: str, seed: int, go_on: Callable[[], bool],
                         on_step: Callable[[], None],
                         pace: Callable[[], Awaitable[None]] | None = None) -> None:
    """Play one episode of the BabyAI ``task`` at ``seed`` on an Env ``session``
    (``moria.clients`` session) with the expert's action of each observation (``oracle``
    hints), while ``go_on()`` holds, calling ``on_step()`` after each step and awaiting
    ``pace()`` (when given) before each; then close it."""
    from moria.codecs import dict_from_struct, text_action
    from moria.env.v1 import env_service_pb2 as env_pb

    opened = await session.open(env_pb.OpenRequest(task=task, seed=seed, oracle=True))
    obs = opened.agents["agent_0"].observation
    while go_on():
        hint = dict_from_struct(obs.info)["expert_action"]
        if pace is not None:
            await pace()
        response = await session.step({"agent_0": text_action(hint)})
        on_step()
        obs = response.agents["agent_0"].observation
        if response.HasField("episode_end"):
            break
    await session.close()


def eval_command(out: Path | str, *overrides: str) -> list[str]:
    """The ``moria eval`` command line (this interpreter, the local stack, no progress bar)
    with ``overrides`` and results written to ``out``."""
    return [sys.executable, "-m", "orchestrator.apps.cli", "eval", *overrides,
            f"eval.output_dir={out}", "--no-progress"]


def read_episodes(out: Path | str) -> list[Any]:
    """The episode records a benchmark's run wrote under ``out``, read by the project's own
    reader. Raises RuntimeError when a file is unreadable or there is none."""
    from moria.results import scan_episodes

    episodes, warnings = scan_episodes(Path(out))
    if warnings or not episodes:
        raise RuntimeError(f"episodes under {out}: {'; '.join(warnings) or 'none written'}")
    return episodes


def announced_url(process: subprocess.Popen[str], timeout: float = 30.0) -> str:
    """The base URL a fake model server prints on stdout once it listens (``FakeOpenAI``:
    ``http://127.0.0.1:<port>/v1``, what an OpenAI client's ``base_url`` takes); it binds
    port 0, so the port is known only from that line. Raises RuntimeError
    when the process exits or stays silent for ``timeout`` seconds."""
    from tests.support.processes import LineReader

    assert process.stdout is not None
    try:
        return LineReader(process.stdout).wait_for(
            lambda line: line.startswith("http://"), "the fake model server's URL", timeout)
    except AssertionError as exc:
        raise RuntimeError(str(exc)) from None


def run_timed(command: list[str]) -> float:
    """Run ``command`` (e.g. ``eval_command``'s) to its end; its wall seconds. Raises
    RuntimeError with the end of its stderr when it exits non-zero."""
    import time

    start = time.perf_counter()
    proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, check=False)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"moria eval exited {proc.returncode}: {proc.stderr[-2000:]}")
    return wall


#: The result files (``benchmarks/tables.py`` renders them into the docs).
RESULTS = Path(__file__).resolve().parent / "results"


def load_span(before: float) -> str:
    """The ``load`` of a result file measured from a 1-minute load average of ``before``
    until now: ``"<before> before, <now> after"``."""
    return f"{before:.2f} before, {os.getloadavg()[0]:.2f} after"


def write_result(data: dict[str, Any], folder: Path = RESULTS) -> Path:
    """Write ``data`` (a ``result_file`` object) to ``<folder>/<name>.json``; its path."""
    path = folder / f"{data['name']}.json"
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return path


def result_file(name: str, title: str, command: str, load: str, columns: list[str],
                rows: list[list[str]]) -> dict[str, Any]:
    """A result file's object in the format ``benchmarks/tables.py`` renders, naming the
    checkout's commit (``git rev-parse --short HEAD``; None outside git), today's UTC date
    and the machine's core count beside ``load`` (the load average as the benchmark saw it)."""
    done = subprocess.run(["git", "-C", str(Path(__file__).resolve().parent), "rev-parse",
                           "--short", "HEAD"], capture_output=True, text=True, check=False)
    return {"name": name, "title": title, "command": command,
            "commit": done.stdout.strip() or None if done.returncode == 0 else None,
            "date": datetime.datetime.now(datetime.UTC).date().isoformat(),
            "machine": f"{os.cpu_count()}-core machine", "load": load,
            "columns": columns, "rows": rows}
