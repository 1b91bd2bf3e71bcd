"""Fixtures of the browser tests: Debian's headless Chromium (Playwright), one per module, and
a fresh page per test that fails the test on any script error or dialog."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.viewer import chromium


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as running:
        yield running


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page that fails the test on any script error or dialog (an alert would mean a
    page ran text a model wrote)."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    page.on("dialog", lambda dialog: (problems.append(f"dialog: {dialog.message}"),
                                      dialog.dismiss()))
    yield page
    context.close()
    assert not problems, problems
