"""``moria view --bundle OUT_DIR``: the viewer as a static site (every page, the frames it
shows, the script and style sheet), which opens from ``file://`` and can be published as is.
It is a snapshot: the pages do not poll for updates, and there is no video export."""

from __future__ import annotations

import itertools
import shutil
from importlib import resources
from pathlib import Path

from moria.files import atomic_write_text
from orchestrator.apps.viewer.site import Page, Site
from orchestrator.report.paired import pairs_by_env
from orchestrator.store.episodes import episode_paths, safe_name
from orchestrator.store.frames import list_frames


def _pages(site: Site) -> list[Page]:
    pages = [site.leaderboard_page()]
    runs = site.runs()
    for k, run in enumerate(runs):
        pages.append(site.run_page(k))
        pages += [site.episode_page(k, e.env, safe_name(e.task), e.episode_index)
                  for e in run.episodes]
    for a, b in itertools.combinations(range(len(runs)), 2):
        pages.append(site.compare_page(a, b))
        for env, pairs in pairs_by_env(runs[a].episodes, runs[b].episodes).items():
            pages += [site.pair_page(a, b, env, safe_name(first.task), first.seed)
                      for first, _ in pairs]
    return pages


def write_bundle(site: Site, out: Path) -> int:
    """Write ``site`` under ``out`` (created; files already there are overwritten); returns
    the number of pages written."""
    pages = _pages(site)
    for page in pages:
        atomic_write_text(out / page.path, page.html)
    static = out / "static"
    static.mkdir(parents=True, exist_ok=True)
    for name in ("viewer.css", "viewer.js"):
        data = resources.files("orchestrator.apps.viewer").joinpath("static", name).read_bytes()
        (static / name).write_bytes(data)
    for k, run in enumerate(site.runs()):
        for record in run.episodes:
            if not record.frames:
                continue
            json_path, _ = episode_paths(site.run_dirs[k], record.env, record.task,
                                         record.episode_index)
            target = (out / "runs" / str(k) / "files" / record.env / safe_name(record.task)
                      / record.frames)
            target.mkdir(parents=True, exist_ok=True)
            folder = site.frames_folder(k, json_path.parent / record.frames)
            for frame in list_frames(folder).values():
                shutil.copyfile(frame, target / frame.name)
    return len(pages)
