"""``moria view`` in a real headless Chromium (Debian's, driven by Playwright): each test asserts
on what a person would see. The runs are real: the BabyAI bot and a random player on the same
seeds, with their frames saved."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from moria.results import load_run
from orchestrator.apps.viewer.bundle import write_bundle
from orchestrator.apps.viewer.site import Site
from tests.support.viewer import GOTO, play_run, serving

pytestmark = pytest.mark.slow
TASK_DIR = GOTO.replace("/", "__")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    oracle, random = tmp_path_factory.mktemp("oracle"), tmp_path_factory.mktemp("random")
    play_run(oracle, "oracle")
    play_run(random, "random")
    return oracle, random


def wait_loaded(page: Any, image: Any) -> None:
    """Wait (up to 10 s) until ``image`` has loaded a picture; fail if it never does."""
    for _ in range(200):
        if image.evaluate("img => img.complete && img.naturalWidth > 0"):
            return
        page.wait_for_timeout(50)
    raise AssertionError(f"the image {image.get_attribute('src')} never loaded")


def test_leaderboard_ranks_the_two_runs(runs: tuple[Path, Path], page: Any) -> None:
    with serving(Site(list(runs))) as url:
        page.goto(url)
        rows = page.locator("#leaderboard tbody tr")
        assert rows.count() == 2
        first, second = rows.nth(0).inner_text(), rows.nth(1).inner_text()
        assert "oracle" in first and "100.0" in first and "(n=3)" in first
        assert "random" in second
        assert page.locator("#comparisons a").count() == 1


def test_run_page_filters_episodes(runs: tuple[Path, Path], page: Any) -> None:
    with serving(Site(list(runs))) as url:
        page.goto(url)
        page.locator("#leaderboard a", has_text=re.compile("run-")).first.click()
        expect(page.locator("#shown")).to_have_text("3 of 3 episodes shown")
        assert page.locator("#episodes tbody tr").count() == 3
        page.locator("input[name=max]").fill("50")  # the bot solved every episode
        assert page.locator("#shown").inner_text() == "0 of 3 episodes shown"
        page.locator("input[name=max]").fill("")
        page.locator("input[name=failed]").check()
        assert page.locator("#episodes tbody tr").count() == 0
        page.locator("input[name=failed]").uncheck()
        assert page.locator("#episodes tbody tr").count() == 3
        assert "BabyAI" in page.locator("#versions").inner_text() or \
            "minigrid" in page.locator("#versions").inner_text()


def test_episode_page_steps_through_frames_with_the_keyboard(
        runs: tuple[Path, Path], page: Any) -> None:
    with serving(Site(list(runs))) as url:
        page.goto(f"{url}runs/0/episodes/babyai/{TASK_DIR}/00.html")
        label = page.locator("#step-label")
        assert label.inner_text().startswith("step 0 of ")
        frame = page.locator("img.frame").first
        assert frame.get_attribute("src").endswith(".frames/00000.png")
        wait_loaded(page, frame)
        first = load_run(runs[0]).episode("babyai", GOTO, 0).steps[0]
        turn = page.locator(".turn").first.inner_text()
        assert f"APPLIED ACTION {first.action} valid" in turn  # labels are upper-cased
        assert first.observation.splitlines()[0] in turn
        page.keyboard.press("ArrowRight")
        assert label.inner_text().startswith("step 1 of ")
        assert frame.get_attribute("src").endswith(".frames/00001.png")
        wait_loaded(page, frame)
        page.keyboard.press("End")
        last = int(label.inner_text().split(" of ")[1])
        assert label.inner_text().startswith(f"step {last} of ")
        assert "the episode is over" in page.locator(".turns").inner_text()
        page.keyboard.press("Home")
        assert label.inner_text().startswith("step 0 of ")
        assert "goal:" in page.locator(".summary").inner_text()
        assert page.locator(".curve-label").inner_text() == "PROGRESSION %"  # upper-cased label
        page.keyboard.press("End")
        page.keyboard.press("ArrowLeft")  # the last step: the bot reached the goal
        assert "progression 100.0%" in page.locator(".turn").first.inner_text()


def test_compare_page_and_one_seed_side_by_side(runs: tuple[Path, Path], page: Any) -> None:
    with serving(Site(list(runs))) as url:
        page.goto(url)
        page.locator("#comparisons a").click()
        expect(page.locator("#paired")).to_be_visible()
        table = page.locator("#paired").inner_text()
        assert "babyai" in table and "overall" in table and "-100.0" in table
        assert page.locator("#pairs tbody tr").count() == 3
        page.locator("#pairs a").first.click()
        expect(page.locator("#step-label")).to_have_text(re.compile(r"^step 0 of \d+$"))
        assert page.locator(".pane").count() == 2
        assert page.locator("img.frame").count() == 2
        page.keyboard.press("ArrowRight")
        sources = [page.locator("img.frame").nth(i).get_attribute("src") for i in (0, 1)]
        assert all(source.endswith("00001.png") for source in sources)
        assert sources[0] != sources[1]  # one frame from each run


def test_a_live_run_updates_in_the_page(runs: tuple[Path, Path], tmp_path: Path,
                                        page: Any) -> None:
    live = tmp_path / "live"
    play_run(live, "random")
    with serving(Site([live])) as url:
        page.goto(f"{url}runs/0/index.html")
        assert page.locator("#shown").inner_text() == "3 of 3 episodes shown"
        page.evaluate("window.loadedOnce = true")
        play_run(live, "random", overrides=("eval.num_episodes.babyai=4",))  # one more
        expect(page.locator("#shown")).to_have_text("4 of 4 episodes shown", timeout=30_000)
        assert page.evaluate("window.loadedOnce") is True  # updated without a reload


def test_the_bundle_opens_from_file_urls(runs: tuple[Path, Path], tmp_path: Path,
                                         page: Any) -> None:
    out = tmp_path / "bundle"
    pages = write_bundle(Site(list(runs), live=False), out)
    assert pages == 1 + 2 * (1 + 3) + 1 + 3
    page.goto((out / "index.html").as_uri())
    assert page.locator("#leaderboard tbody tr").count() == 2
    page.locator("#leaderboard a", has_text=re.compile("run-")).first.click()
    expect(page.locator("#shown")).to_have_text("3 of 3 episodes shown")
    page.locator("#episodes a").first.click()
    expect(page.locator("#step-label")).to_have_text(re.compile(r"^step 0 of \d+$"))
    assert page.url.startswith("file://")
    page.keyboard.press("ArrowRight")
    assert page.locator("#step-label").inner_text().startswith("step 1 of ")
    wait_loaded(page, page.locator("img.frame").first)
    assert page.locator("#gif").count() == 0  # no export in a snapshot
