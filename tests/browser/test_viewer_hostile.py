"""The viewer against hostile run directories and requests: paths that leave the runs, a link
planted among the frames, a 200 MB episode file, malformed JSON, and model text full of HTML
and script. Each is answered with a clear page; no file outside the runs is served and no
written text runs."""

from __future__ import annotations

import http.client
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from moria.records import EpisodeRecord, StepRecord
from orchestrator.apps.viewer.site import Site
from orchestrator.store.episodes import episode_paths, write_episode
from tests.support.viewer import GOTO, play_run, serving

pytestmark = pytest.mark.slow
TASK_DIR = GOTO.replace("/", "__")
HOSTILE = "<script>alert('run')</script><img src=x onerror=\"alert('img')\">&amp;"
SECRET = "this file is outside every run"


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run, then: a secret file beside it, a link to it among the frames, a 200 MB
    episode file, a malformed one, and an episode whose every text is HTML and script."""
    base = tmp_path_factory.mktemp("hostile")
    run = base / "run"
    play_run(run, "random")
    (base / "secret.txt").write_text(SECRET)
    frames = next(run.glob(f"babyai/{TASK_DIR}/*_run_00.frames"))
    os.symlink(base / "secret.txt", frames / "00099.png")
    huge, _ = episode_paths(run, "babyai", GOTO, 7)
    with huge.open("wb") as handle:  # sparse: 200 MB on paper, nothing on disk
        handle.truncate(200 * 1024 * 1024)
    broken, _ = episode_paths(run, "babyai", GOTO, 8)
    broken.write_text('{"task": "unterminated')
    step = StepRecord(step=0, agent_id="agent_0", observation=HOSTILE, raw_completion=HOSTILE,
                      reasoning=HOSTILE, action="go forward", valid=False, feedback=HOSTILE)
    write_episode(run, EpisodeRecord(
        run_id="run", env="babyai", task=GOTO, episode_index=9, seed=9, num_steps=1,
        error=HOSTILE, stats={"mission": HOSTILE}, steps=[step]))
    meta = json.loads((run / "run.json").read_text())
    meta["run_id"] = HOSTILE
    (run / "run.json").write_text(json.dumps(meta))
    return run


def _get(url: str, path: str) -> tuple[int, str]:
    """GET ``path`` exactly as written (no client normalises its dot segments)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        connection.close()


@pytest.fixture(scope="module")
def served(hostile: Path) -> Iterator[str]:
    with serving(Site([hostile])) as url:
        yield url


@pytest.mark.parametrize("path", [
    "/runs/0/files/../../secret.txt",
    "/runs/0/files/%2e%2e/%2e%2e/secret.txt",
    f"/runs/0/files/babyai/{TASK_DIR}/{TASK_DIR}_run_00.frames/00099.png",
    f"/runs/0/files/babyai/{TASK_DIR}/{TASK_DIR}_run_00.frames/../../../../secret.txt",
    "/runs/0/files/run.json",
    "/static/../site.py",
    "/static/%2e%2e%2fsite.py",
    "/runs/0/episodes/babyai/..%2f..%2f..%2fsecret/00.html",
    "/runs/5/index.html",
    "/runs/-1/index.html",
    "/compare/0-9.html",
    "/etc/passwd",
])
def test_nothing_outside_the_runs_is_served(served: str, path: str) -> None:
    status, body = _get(served, path)
    assert status == 404, (path, status)
    assert SECRET not in body and "def build_app" not in body
    assert "Not found" in body


def test_a_frame_of_the_run_is_served_and_videos_made(served: str) -> None:
    status, _ = _get(served, f"/runs/0/files/babyai/{TASK_DIR}/{TASK_DIR}_run_00.frames/"
                             "00000.png")
    assert status == 200
    parts = urlsplit(served)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    connection.request("GET", f"/runs/0/episodes/babyai/{TASK_DIR}/00.gif")
    response = connection.getresponse()
    assert response.status == 200 and response.read(6) == b"GIF89a"
    connection.close()
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    connection.request("GET", f"/runs/0/episodes/babyai/{TASK_DIR}/00.mp4")
    response = connection.getresponse()
    assert response.status == 200 and response.getheader("Content-Type") == "video/mp4"
    assert response.read(12)[4:8] == b"ftyp"  # an ISO media file
    connection.close()


def test_huge_and_malformed_files_are_named_not_served(served: str, page: Any) -> None:
    page.goto(f"{served}runs/0/index.html")
    warnings = page.locator(".warnings").inner_text()
    assert "_run_07.json: 209,715,200 bytes, more than the 134,217,728 an episode file may " \
           "be" in warnings
    assert "_run_08.json" in warnings
    assert page.locator("#shown").inner_text() == "4 of 4 episodes shown"
    page.goto(f"{served}runs/0/episodes/babyai/{TASK_DIR}/07.html")
    assert "has no readable episode babyai" in page.locator("#message").inner_text()


def test_model_text_is_shown_as_text_never_run(served: str, page: Any) -> None:
    page.goto(served)
    assert HOSTILE in page.locator("#leaderboard").inner_text()  # the run id, as text
    page.goto(f"{served}runs/0/index.html")
    assert HOSTILE in page.locator("h1").inner_text()
    page.goto(f"{served}runs/0/episodes/babyai/{TASK_DIR}/09.html")
    turn = page.locator(".turn").first
    assert turn.locator("pre").first.inner_text() == HOSTILE
    assert turn.inner_text().count(HOSTILE) == 4  # observation, reasoning, completion, feedback
    assert HOSTILE in page.locator(".mission").inner_text()
    assert page.locator("img[src=x]").count() == 0 and page.locator("main script").count() == 0
    # the page fixture fails the test on any dialog or script error
