"""``moria`` with a kill switch: the process SIGKILLs itself at an exact point of writing an
episode, so a test can crash the orchestrator where it wants instead of where a timer lands.

    python -m tests.support.kill_switch --out DIR --at N --stage STAGE --record FILE \
        -- eval <overrides...>

runs ``orchestrator.apps.cli.main(["eval", ...])`` in this process, and kills it (SIGKILL, no
clean-up of any kind) during the write of the ``N``-th episode result of ``DIR``: the episodes
already in ``DIR`` when the process starts count first, then each ``write_episode`` call in the
order the calls begin. ``STAGE`` says where:

- ``csv_tmp``: the episode's CSV is in its temp file (written and fsynced), not yet renamed;
- ``json_tmp``: the CSV is in place, the JSON in its temp file, not yet renamed;
- ``files``: the JSON and CSV are in place, the ``<run>_episodes.jsonl`` line not yet written;
- ``reported``: right after that line is appended.

Just before the kill it writes which episode it caught, ``{"stage", "env", "episode_index",
"task"}`` as JSON, to ``--record FILE`` (written whole and fsynced: the test reads it there),
and says ``KILLING <stage> <env> <episode_index> <task>`` on stderr for a person reading the
log (in one write, between newlines). Stderr is not for parsing: the progress display writes
there from another thread, and once landed between a ``print``'s text and its newline
(``...v0/openprogress: episode ...``), naming an episode that does not exist.

The hooks wrap ``orchestrator.store.episodes.write_episode`` (the episode-file sink's reference
to it included), ``os.replace`` (the rename at the end of ``atomic_write_text``) and
``TelemetryWriter.write_episode``; production code is unchanged. A process that finishes
without reaching the kill point exits normally (the test sees exit code 0, not -SIGKILL, and
fails).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

STAGES = ("csv_tmp", "json_tmp", "files", "reported")


#: Where ``_die`` writes the caught episode (``--record``); set by ``install``.
_RECORD: list[Path] = []


def _die(stage: str, record: Any) -> None:
    caught = {"stage": stage, "env": record.env, "episode_index": record.episode_index,
              "task": record.task}
    fd = os.open(_RECORD[0], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, json.dumps(caught).encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    said = f"\nKILLING {stage} {record.env} {record.episode_index} {record.task}\n"
    os.write(sys.stderr.fileno(), said.encode())
    os.kill(os.getpid(), signal.SIGKILL)


def install(out_dir: Path, at: int, stage: str, record: Path) -> None:
    """Arm the switch (see the module docstring) for the ``at``-th episode of ``out_dir``;
    the caught episode is written to ``record`` before the kill.

    Must run before ``orchestrator.core.sinks`` is imported by anyone else, or after: the sink's
    own reference to ``write_episode`` is replaced too. Raises ValueError for a bad stage or an
    ``at`` that the episodes already in ``out_dir`` have passed."""
    import orchestrator.core.sinks as sinks
    import orchestrator.store.episodes as results
    from orchestrator.store.telemetry import TelemetryWriter

    if stage not in STAGES:
        raise ValueError(f"stage must be one of {STAGES}, got {stage!r}")
    _RECORD[:] = [record]
    written = len(list(out_dir.rglob("*_run_*.json")))  # complete episodes (atomic writes)
    if at <= written:
        raise ValueError(f"{written} episodes are written already; cannot kill at #{at}")
    lock = threading.Lock()
    begun = [written]
    armed: dict[Path, Any] = {}  # temp-file rename destination -> the record being written
    target: list[tuple[str, str, int]] = []  # (env, task, index) of the at-th episode

    real_write_episode = results.write_episode
    real_replace = os.replace
    real_report = TelemetryWriter.write_episode

    def write_episode(out: str | Path, record: Any) -> tuple[Path, Path]:
        with lock:
            begun[0] += 1
            chosen = begun[0] == at
            if chosen:
                target.append((record.env, record.task, record.episode_index))
                json_path, csv_path = results.episode_paths(out, record.env, record.task,
                                                            record.episode_index)
                if stage == "csv_tmp":
                    armed[csv_path] = record
                elif stage == "json_tmp":
                    armed[json_path] = record
        paths = real_write_episode(out, record)
        if chosen and stage == "files":
            _die(stage, record)
        return paths

    def replace(src: Any, dst: Any, **kwargs: Any) -> None:
        record = armed.get(Path(os.fsdecode(dst)))
        if record is not None:
            _die(stage, record)
        real_replace(src, dst, **kwargs)

    def report(self: Any, record: Any, **fields: Any) -> None:
        real_report(self, record, **fields)
        if stage == "reported" and (record.env, record.task, record.episode_index) in target:
            _die(stage, record)

    results.write_episode = write_episode  # type: ignore[assignment]
    sinks.write_episode = write_episode  # type: ignore[attr-defined,assignment]
    os.replace = replace  # type: ignore[assignment]
    TelemetryWriter.write_episode = report  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    """Parse ``--out --at --stage -- <moria arguments>``, arm the switch, run ``moria``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the run's output directory")
    parser.add_argument("--at", type=int, required=True, help="kill during this episode write")
    parser.add_argument("--stage", choices=STAGES, required=True)
    parser.add_argument("--record", type=Path, required=True,
                        help="write the caught episode here (JSON) before the kill")
    parser.add_argument("moria", nargs=argparse.REMAINDER, help="-- then moria's arguments")
    args = parser.parse_args(argv)
    moria_args = args.moria[1:] if args.moria[:1] == ["--"] else args.moria
    install(args.out, args.at, args.stage, args.record)
    from orchestrator.apps.cli import main as moria_main

    return moria_main(moria_args)


if __name__ == "__main__":
    sys.exit(main())
