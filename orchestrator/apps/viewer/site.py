"""The pages of the results viewer, rendered from run directories (``moria view``).

``Site`` holds the runs it was given and renders every page to HTML: the same pages are served
by ``orchestrator.apps.viewer.server`` and written by ``orchestrator.apps.viewer.bundle``. Every
link is relative (``Page.root`` leads back to the site's root), so a bundle opens from
``file://``. The data a page shows is embedded in it as JSON (``<script
type="application/json">``, written with Jinja's ``tojson``, which escapes ``<``, ``>``, ``&``
and ``'``); the page's script reads it and writes every string a model or an env wrote with
``textContent``, never as HTML. Templates escape everything else (autoescape).

Site layout (relative to the root)::

    index.html                                      the leaderboard
    runs/<k>/index.html                             run k's page
    runs/<k>/state.json                             run k's episode rows (live updates)
    runs/<k>/episodes/<env>/<task_dir>/<NN>.html    one episode
    runs/<k>/episodes/<env>/<task_dir>/<NN>.gif     its frames as an animated GIF (served)
    runs/<k>/episodes/<env>/<task_dir>/<NN>.mp4     ... or an MP4 (served)
    runs/<k>/files/<env>/<task_dir>/<stem>.frames/<NNNNN>.png   its frames
    compare/<a>-<b>.html                            runs a and b on their shared episodes
    compare/<a>-<b>/<env>/<task_dir>/<seed>.html    one shared episode side by side
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from jinja2 import Environment, PackageLoader, select_autoescape

from moria.quoting import cut
from moria.records import EpisodeRecord
from moria.results import EPISODE_GLOB, ResultsError, Run, load_run
from orchestrator.report.accounting import PriceTable, load_prices
from orchestrator.report.leaderboard import leaderboard, leaderboard_envs
from orchestrator.report.paired import compare_runs, pairs_by_env
from orchestrator.store.episodes import episode_paths, prompts_path, safe_name
from orchestrator.store.frames import list_frames

#: How many characters of one model- or env-written string a page embeds (the rest is cut,
#: with a note): a page stays loadable whatever a model wrote.
MAX_TEXT_CHARS: Final = 20_000
#: The frame files the viewer serves: ``<...>.frames/<digits>.png`` under a run directory.
_FRAME_PATH = re.compile(r"^[^/]+/[^/]+/[^/]+\.frames/\d{5,}\.png$")


class NotFound(LookupError):
    """A page or file the site does not have (the message says which)."""


def _cut(text: str) -> str:
    return cut(text, MAX_TEXT_CHARS)


@dataclass
class Page:
    """A rendered page: its path under the site's root and its HTML."""

    path: str
    html: str


def find_runs(paths: list[Path]) -> list[Path]:
    """The run directories among ``paths``: each path that is a run (``run.json`` or episode
    files), else its sub-directories that are. Raises ResultsError naming a path that holds
    no run at all."""
    found: list[Path] = []
    for path in paths:
        if not path.exists():
            raise ResultsError(f"{path} does not exist: give results directories of moria eval "
                               "(default: results)")
        if _is_run(path):
            found.append(path)
            continue
        inner = sorted(p for p in path.iterdir() if p.is_dir() and _is_run(p)) \
            if path.is_dir() else []
        if not inner:
            raise ResultsError(f"{path} is no run directory of moria eval and holds none")
        found += inner
    return found


def _is_run(path: Path) -> bool:
    return path.is_dir() and ((path / "run.json").is_file()
                              or next(path.glob(EPISODE_GLOB), None) is not None)


def _signature(path: Path) -> tuple[int, float]:
    """(episode files, newest modification) of a run directory: changes when an episode
    is written."""
    files = list(path.glob(EPISODE_GLOB))
    return len(files), max((f.stat().st_mtime for f in files), default=0.0)


class Site:
    """The viewer's pages over ``run_dirs`` (each read with ``moria.results.load_run``;
    re-read when its episode files change, so a run still playing shows its new episodes).
    ``live``: pages poll for updates (served; a bundle is a snapshot)."""

    def __init__(self, run_dirs: list[Path], *, live: bool = True,
                 prices: PriceTable | None = None) -> None:
        self.run_dirs = [Path(p) for p in run_dirs]
        self.live = live
        self.prices = prices or load_prices()
        self._runs: dict[int, tuple[tuple[int, float], Run]] = {}
        self.templates = Environment(loader=PackageLoader("orchestrator.apps.viewer"),
                                     autoescape=select_autoescape(default=True,
                                                                  default_for_string=True))

    # -- data ----------------------------------------------------------------------------
    def run(self, k: int) -> Run:
        """Run ``k`` as its files are now. Raises NotFound for no such run."""
        if not 0 <= k < len(self.run_dirs):
            raise NotFound(f"no run {k}: this viewer has runs 0 to {len(self.run_dirs) - 1}")
        signature = _signature(self.run_dirs[k])
        cached = self._runs.get(k)
        if cached is None or cached[0] != signature:
            cached = (signature, load_run(self.run_dirs[k]))
            self._runs[k] = cached
        return cached[1]

    def runs(self) -> list[Run]:
        """Every run, as its files are now."""
        return [self.run(k) for k in range(len(self.run_dirs))]

    def episode(self, k: int, env: str, task_dir: str, index: int) -> EpisodeRecord:
        """The episode of run ``k`` at (env, task_dir, index). Raises NotFound."""
        for record in self.run(k).episodes:
            if (record.env, safe_name(record.task), record.episode_index) == (env, task_dir,
                                                                               index):
                return record
        raise NotFound(f"run {k} has no readable episode {env}/{task_dir} #{index} (a file "
                       "that could not be read is named on the run's page)")

    def frame_file(self, k: int, relative: str) -> Path:
        """The frame file ``relative`` (``<env>/<task_dir>/<stem>.frames/<NNNNN>.png``) of run
        ``k``. Raises NotFound for anything else: another name, a path leaving the run
        directory (``..``, a link), or a missing file."""
        if not _FRAME_PATH.match(relative) or ".." in relative.split("/"):
            raise NotFound(f"not a frame of this run: {relative[:200]!r}")
        root = self.run_dirs[k].resolve() if 0 <= k < len(self.run_dirs) else None
        if root is None:
            raise NotFound(f"no run {k}")
        path = (root / relative).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            raise NotFound(f"not a frame of this run: {relative[:200]!r}")
        return path

    def frames_folder(self, k: int, folder: Path) -> Path:
        """``folder`` when it lies inside run ``k``'s directory (links resolved). Raises
        NotFound otherwise."""
        root = self.run_dirs[k].resolve()
        resolved = folder.resolve()
        if not resolved.is_relative_to(root):
            raise NotFound(f"the frames of this episode lie outside its run: {folder.name!r}")
        return resolved

    # -- pages -----------------------------------------------------------------------------
    def _render(self, template: str, path: str, **context: Any) -> Page:
        depth = path.count("/")
        root = "../" * depth
        html = self.templates.get_template(template).render(root=root, live=self.live,
                                                           **context)
        return Page(path, html)

    def leaderboard_page(self) -> Page:
        """``index.html``: the leaderboard over every run, with links to each run."""
        runs = self.runs()
        rows = leaderboard(runs)
        index_of = {str(run.path): k for k, run in enumerate(runs)}
        data = [{**row.as_json(), "k": index_of.get(row.path)} for row in rows]
        return self._render("leaderboard.html", "index.html", rows=data,
                            envs=leaderboard_envs(rows), runs=[(k, r.run_id, ", ".join(r.models))
                                                               for k, r in enumerate(runs)])

    def run_state(self, k: int) -> dict[str, Any]:
        """Run ``k``'s episode rows and warnings (``state.json``; the run page's data)."""
        run = self.run(k)
        rows = []
        for e in run.episodes:
            rows.append({
                "env": e.env, "task": e.task, "task_dir": safe_name(e.task),
                "episode_index": e.episode_index, "seed": str(e.seed),
                "end_reason": e.end_reason, "progression": e.progression,
                "num_steps": e.num_steps, "invalid_actions": sum(not s.valid for s in e.steps),
                "actions": len(e.steps), "frames": e.frame_count, "error": _cut(e.error),
                "href": f"episodes/{e.env}/{safe_name(e.task)}/{e.episode_index:02d}.html"})
        return {"run_id": run.run_id, "episodes": rows, "warnings": run.warnings}

    def run_page(self, k: int) -> Page:
        """``runs/<k>/index.html``: per env and task, the episode table with its filters, the
        spec and the versions."""
        run = self.run(k)
        summary = leaderboard([run])[0]
        versions = next((e.versions for e in run.episodes if e.versions), {})
        return self._render("run.html", f"runs/{k}/index.html", k=k, run=run, row=summary,
                            state=self.run_state(k), versions=versions,
                            spec=json.dumps(run.spec, indent=2, sort_keys=True))

    def _prompts(self, k: int, record: EpisodeRecord) -> dict[str, list[dict[str, Any]]]:
        """{"<step>/<agent_id>": the prompt's messages} from the episode's saved prompts."""
        json_path, _ = episode_paths(self.run_dirs[k], record.env, record.task,
                                     record.episode_index)
        path = prompts_path(json_path)
        out: dict[str, list[dict[str, Any]]] = {}
        if not path.is_file() or path.stat().st_size > 64 * 1024 * 1024:
            return out
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                item = json.loads(line)
                messages = [{"role": str(m.get("role", "")), "content": _cut(str(
                    m.get("content", "")))} for m in item.get("prompt", [])]
                out[f"{int(item['step'])}/{item.get('agent_id', '')}"] = messages
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
        return out

    def episode_data(self, k: int, record: EpisodeRecord, root: str) -> dict[str, Any]:
        """What an episode page shows, as JSON: the episode's facts and, per env step, the
        frame (a URL relative to the page, or null) and each acting seat's turn."""
        json_path, _ = episode_paths(self.run_dirs[k], record.env, record.task,
                                     record.episode_index)
        frames = (list_frames(self.frames_folder(k, json_path.parent / record.frames))
                  if record.frames else {})
        base = f"{root}runs/{k}/files/{record.env}/{safe_name(record.task)}/{record.frames}"
        prompts = self._prompts(k, record)
        steps: dict[int, list[dict[str, Any]]] = {}
        for s in record.steps:
            usage = {"input_tokens": s.input_tokens, "output_tokens": s.output_tokens,
                     "cached_input_tokens": s.cached_input_tokens}
            steps.setdefault(s.step, []).append({
                "agent_id": s.agent_id, "observation": _cut(s.observation),
                "raw_completion": _cut(s.raw_completion), "reasoning": _cut(s.reasoning),
                "action": _cut(s.action), "valid": s.valid, "feedback": _cut(s.feedback),
                "reward": s.reward, "done": s.done, "progression": s.progression,
                "input_tokens": s.input_tokens,
                "output_tokens": s.output_tokens, "latency_s": s.latency_s,
                "model": s.model, "cost_usd": self.prices.cost(s.model, usage) if s.model
                else None, "prompt": prompts.get(f"{s.step}/{s.agent_id}")})
        count = max([record.num_steps] + [step + 1 for step in steps])
        timeline = [{"step": i, "frame": f"{base}/{frames[i].name}" if i in frames else None,
                     "turns": steps.get(i, [])} for i in range(count + 1)]
        return {
            "env": record.env, "task": record.task, "episode_index": record.episode_index,
            "seed": str(record.seed), "end_reason": record.end_reason,
            "error": _cut(record.error), "progression": record.progression,
            "episode_return": record.episode_return, "num_steps": record.num_steps,
            "mission": _cut(str(record.stats.get("mission") or "")),
            "stats": json.loads(json.dumps(record.stats, default=str)),
            "players": record.players, "frames": len(frames), "timeline": timeline,
        }

    def episode_page(self, k: int, env: str, task_dir: str, index: int) -> Page:
        """``runs/<k>/episodes/<env>/<task_dir>/<NN>.html``: the step timeline."""
        record = self.episode(k, env, task_dir, index)
        path = f"runs/{k}/episodes/{env}/{task_dir}/{index:02d}.html"
        root = "../" * path.count("/")
        return self._render("episode.html", path, k=k, record=record,
                            data={"panes": [self.episode_data(k, record, root)]},
                            stem=f"{index:02d}")

    def compare_page(self, a: int, b: int) -> Page:
        """``compare/<a>-<b>.html``: the paired figures and the shared episodes."""
        run_a, run_b = self.run(a), self.run(b)
        comparison = compare_runs(run_a, run_b)
        pairs = [{"env": env, "task": first.task, "task_dir": safe_name(first.task),
                  "seed": str(first.seed), "a": first.progression, "b": second.progression,
                  "href": f"{a}-{b}/{env}/{safe_name(first.task)}/{first.seed}.html"}
                 for env, items in pairs_by_env(run_a.episodes, run_b.episodes).items()
                 for first, second in items]
        return self._render("compare.html", f"compare/{a}-{b}.html", a=a, b=b, run_a=run_a,
                            run_b=run_b, comparison=comparison, pairs=pairs)

    def pair_page(self, a: int, b: int, env: str, task_dir: str, seed: int) -> Page:
        """``compare/<a>-<b>/<env>/<task_dir>/<seed>.html``: one seed's two episodes."""
        records = []
        for k in (a, b):
            match = [e for e in self.run(k).episodes if e.env == env
                     and safe_name(e.task) == task_dir and e.seed == seed]
            if not match:
                raise NotFound(f"run {k} has no episode {env}/{task_dir} with seed {seed}")
            records.append(match[0])
        path = f"compare/{a}-{b}/{env}/{task_dir}/{seed}.html"
        root = "../" * path.count("/")
        data = {"panes": [self.episode_data(k, r, root) for k, r in zip((a, b), records,
                                                                          strict=True)]}
        return self._render("pair.html", path, a=a, b=b, run_a=self.run(a), run_b=self.run(b),
                            records=records, data=data)

    def error_page(self, message: str, depth: int = 0) -> str:
        """A page saying what was not found (``message`` is escaped)."""
        return self._render("error.html", "x/" * depth + "error.html",
                            message=message).html

