"""The built-in local models side by side on ``make run``'s task: progression and time per step.

    python -m benchmarks.local_models_compare [--episodes 4] [--models M ...]

Runs the real ``moria eval`` of ``make run`` (BabyAI-GoToObjS4-v0, at most 17 steps an
episode, the local client, one worker, BALROG's settings otherwise) once per model with
``client.model_id`` set and ``--episodes`` episodes, the same ``eval.seed`` for every model, so
episode ``i`` starts from the same game for each. Each model's joined GGUF is built (or found)
before its run, so the timing holds no join. Per model it reports the progression's mean and
standard error over the episodes, the model's seconds per step (mean of the steps'
``latency_s``: the policy's answer time), the eval's wall seconds per step (also env, servers,
model load), the share of valid actions, and the load average before and after. Prints one JSON
document and writes it to ``benchmarks/out/local_models_compare.json``; asserts nothing (the
figures vary with the load). A model whose weights are not installed is reported with its
error and skipped.

``--record`` also adds the run's rows to ``benchmarks/results/local_models_compare.json``, the
result file whose table ``docs/backends.md`` shows (``python -m benchmarks.tables`` renders
it); ``--record-from FILE`` adds those of a run saved earlier, without running anything.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "out"
RESULT = Path(__file__).resolve().parent / "results" / "local_models_compare.json"
COLUMNS = ["date", "model", "episodes", "progression % (± SE)", "model s/step",
           "eval wall s/step", "valid actions", "load (1 min, before -> after)"]
#: ``make run``'s task and step cap (the Makefile's ``run`` target).
ENV = "babyai"
TASK = "BabyAI-GoToObjS4-v0"
MAX_STEPS = 17
MODELS = ("qwen2.5-0.5b-instruct", "qwen2.5-coder-1.5b")


def mean_and_se(values: list[float]) -> tuple[float, float | None]:
    """The mean of ``values`` and its standard error (sample standard deviation over the root
    of the count; None for fewer than two values)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, None
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n)


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run_model(model: str, episodes: int, seed: int) -> dict[str, Any]:
    """One ``make run`` eval of ``model`` with ``episodes`` episodes; its figures (see the
    module docstring), or ``{"model", "error"}`` when its weights cannot be had. Raises
    RuntimeError when ``moria eval`` fails or writes no episode."""
    from agent_server.backends.base import BackendError
    from agent_server.backends.models import resolve_model_path
    from benchmarks.common import eval_command, read_episodes, run_timed

    start = time.perf_counter()
    try:
        path = resolve_model_path(model)
    except BackendError as exc:
        return {"model": model, "error": str(exc)}
    prepare_s = time.perf_counter() - start
    load_before = _load()
    with tempfile.TemporaryDirectory(prefix="moria-local-compare-") as out:
        command = eval_command(out, f"envs.names={ENV}", f"tasks.{ENV}_tasks=[{TASK}]",
                               f"eval.num_episodes.{ENV}={episodes}",
                               f"eval.max_steps_per_episode={MAX_STEPS}",
                               "client.client_name=local", f"client.model_id={model}",
                               "eval.num_workers=1", f"eval.seed={seed}")
        wall = run_timed(command)
        records = sorted(read_episodes(out), key=lambda e: e.episode_index)
    steps = [s for e in records for s in e.steps]
    progression = [float(e.progression) for e in records]
    mean, se = mean_and_se(progression)
    return {
        "model": model,
        "gguf_bytes": path.stat().st_size,
        "prepare_s": round(prepare_s, 1),
        "episodes": len(records),
        "seeds": [e.seed for e in records],
        "progression": progression,
        "progression_mean": round(mean, 4),
        "progression_se": None if se is None else round(se, 4),
        "steps": len(steps),
        "model_seconds_per_step": round(sum(s.latency_s for s in steps) / len(steps), 3)
        if steps else None,
        "wall_seconds_per_step": round(wall / len(steps), 3) if steps else None,
        "valid_action_share": round(sum(s.valid for s in steps) / len(steps), 3)
        if steps else None,
        "eval_wall_s": round(wall, 1),
        "load_average_before": load_before,
        "load_average_after": _load(),
    }


def table_rows(figures: dict[str, Any], date: str) -> list[list[str]]:
    """The result-file rows (``COLUMNS``) of one run's figures (what ``main`` prints), one
    per model that ran."""
    rows = []
    for m in figures["models"]:
        if "error" in m:
            continue
        se = "" if m["progression_se"] is None else f" ± {100 * m['progression_se']:.1f}"
        rows.append([date, m["model"], str(m["episodes"]),
                     f"{100 * m['progression_mean']:.1f}{se}",
                     f"{m['model_seconds_per_step']:.2f}", f"{m['wall_seconds_per_step']:.2f}",
                     f"{100 * m['valid_action_share']:.1f}%",
                     f"{m['load_average_before'][0]:.2f} -> {m['load_average_after'][0]:.2f}"])
    return rows


def record(figures: dict[str, Any], date: str, path: Path = RESULT) -> None:
    """Add one run's rows to the result file ``path`` (created when missing), in the format
    ``benchmarks/tables.py`` renders."""
    data: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {
        "name": path.stem,
        "title": "The local models on make run's task, side by side",
        "command": "python -m benchmarks.local_models_compare --episodes 8 --record",
        "commit": None, "date": None,
        "machine": f"{figures.get('cores')}-core virtual machine, beside other work",
        "load": "in each row", "columns": COLUMNS, "rows": []}
    data["rows"] += table_rows(figures, date)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Run the comparison, print its JSON and write it to
    ``benchmarks/out/local_models_compare.json`` (and with ``--record`` to the result file);
    with ``--record-from FILE`` only record that saved run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=4,
                        help="episodes per model (make run plays 16; default %(default)s)")
    parser.add_argument("--models", nargs="+", default=list(MODELS),
                        help="client.model_id values (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="eval.seed (%(default)s)")
    parser.add_argument("--record", action="store_true",
                        help=f"add the run's rows to {RESULT.relative_to(RESULT.parents[2])}")
    parser.add_argument("--record-from", type=Path, metavar="FILE",
                        help="record a run this script wrote earlier; run nothing")
    args = parser.parse_args(argv)
    if args.record_from:
        saved = args.record_from
        date = datetime.date.fromtimestamp(saved.stat().st_mtime).isoformat()
        record(json.loads(saved.read_text()), date)
        return 0
    figures = {"env": ENV, "task": TASK, "max_steps": MAX_STEPS, "seed": args.seed,
               "cores": os.cpu_count(),
               "models": [run_model(m, args.episodes, args.seed) for m in args.models]}
    OUT.mkdir(exist_ok=True)
    text = json.dumps(figures, indent=2)
    (OUT / "local_models_compare.json").write_text(text + "\n")
    if args.record:
        record(figures, datetime.date.today().isoformat())
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
