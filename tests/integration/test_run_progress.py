"""The progress of a real run whose stderr is a file (``moria harness ... > log 2>&1``): plain
``progress:`` lines per step, per episode and at the end, and none with ``--no-progress``.

The real ``moria`` script plays BabyAI with the dummy (seeded random) player: no model, a few
seconds. ``MORIA_PROGRESS_INTERVAL_S=0`` asks for a line at every step, so what is asserted
follows from the run's events, never from how fast it went."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from orchestrator.report.progress import PLAIN_INTERVAL_ENV

MORIA = str(Path(sys.executable).parent / "moria")
LINE = re.compile(r"^progress: (?P<what>.+?) \| episodes (?P<done>\d+)/(?P<total>\d+) \| "
                  r"steps (?P<steps>\d+)/(?P<planned>\d+|\?) \| tokens in \d+ out \d+ \| "
                  r"invalid actions (?P<invalid>\d+)/(?P<actions>\d+) \| "
                  r"elapsed \d+:\d\d:\d\d$")
STEPS = 5


def harness(tmp_path: Path, *extra: str) -> tuple[int, str]:
    """``moria harness --domain balrog_babyai --run_id r1 --num_samples 1`` with the dummy
    player and 5 steps, stdout and stderr into one file, as the issue ran it; (exit code, the
    file's text)."""
    log = tmp_path / "log"
    with log.open("w") as out:
        run = subprocess.run(
            [MORIA, "harness", "--domain", "balrog_babyai", "--run_id", "r1", "--num_samples",
             "1", "--outputs", str(tmp_path / "outputs"), *extra, "agent.type=dummy",
             f"eval.max_steps_per_episode={STEPS}"],
            cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, timeout=300,
            env={**os.environ, PLAIN_INTERVAL_ENV: "0"})
    return run.returncode, log.read_text()


def test_a_run_into_a_file_writes_a_progress_line_per_step(tmp_path: Path) -> None:
    code, text = harness(tmp_path)
    assert code == 0, text
    lines = [line for line in text.splitlines() if line.startswith("progress:")]
    parsed = [LINE.match(line) for line in lines]
    assert all(parsed), lines
    fields = [m.groupdict() for m in parsed if m]
    assert fields[0]["what"] == "started" and fields[0]["steps"] == "0"
    running = [f for f in fields if f["what"] == "running"]
    assert [int(f["steps"]) for f in running] == list(range(1, STEPS + 1))
    assert [int(f["actions"]) for f in running] == list(range(1, STEPS + 1))
    assert all(f["total"] == "1" and f["done"] == "0" for f in running)
    # planned: the episode's step cap, announced by the env when it opened
    assert all(f["planned"] == str(STEPS) for f in running), running
    ends = [f for f in fields if f["what"].startswith("episode ")]
    assert len(ends) == 1
    assert re.fullmatch(rf"episode babyai/\S+ #0: truncated, progression 0\.\d\d, {STEPS} steps",
                        ends[0]["what"]), ends[0]["what"]
    assert fields[-1]["what"] == "finished"
    assert (fields[-1]["done"], fields[-1]["steps"], fields[-1]["planned"]) == (
        "1", str(STEPS), str(STEPS))
    bars = [line for line in text.splitlines() if line.startswith(("episodes ", "steps "))]
    assert not bars  # no rich bar drawn into the file
    results = tmp_path / "outputs" / "r1"
    for picture in (results / "progress.png", results / "babyai" / "babyai_progress.png"):
        assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_progress_silences_the_lines(tmp_path: Path) -> None:
    code, text = harness(tmp_path, "--no-progress")
    assert code == 0, text
    assert not [line for line in text.splitlines() if line.startswith("progress:")]
    assert "succeeded" in text
