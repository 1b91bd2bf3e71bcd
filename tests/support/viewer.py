"""The results viewer in tests: its web server on loopback (uvicorn in a thread, an ephemeral
port), Debian's headless Chromium driven by Playwright, and small real runs to look at."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from rich.console import Console

from orchestrator.apps.viewer.server import build_app
from orchestrator.apps.viewer.site import Site
from orchestrator.core.runner import run_evaluation
from orchestrator.plan.spec import load_spec
from tests.support.servers import env_server, policy_server

#: Debian's Chromium (``make browser`` installs it).
CHROMIUM = Path("/usr/bin/chromium")
#: Flags of a headless Chromium on a machine without a network or a display.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
GOTO = "BabyAI-MixedTrainLocal-v0/goto"


@contextmanager
def serving(site: Site) -> Iterator[str]:
    """Serve ``site`` on 127.0.0.1 (an ephemeral port) while the block runs; yields its base
    URL (``http://127.0.0.1:PORT/``)."""
    config = uvicorn.Config(build_app(site), host="127.0.0.1", port=0, log_level="warning",
                            lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the viewer's server did not start")
            thread.join(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        thread.join(10)


@contextmanager
def chromium() -> Iterator[Any]:
    """A Playwright browser on Debian's Chromium. Raises RuntimeError naming ``make browser``
    when Chromium is not installed."""
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.is_file():
        raise RuntimeError(f"{CHROMIUM} is missing: `make browser` installs Debian's chromium")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def play_run(out: Path, player: str, *, families: tuple[str, ...] = ("babyai",),
             overrides: tuple[str, ...] = ()) -> None:
    """A small real run into ``out``: ``player`` on BabyAI's goto task, 3 episodes of at most
    12 steps with their frames, on in-process servers. It runs in a thread of its own (its own
    event loop: Playwright's sync API holds one in the test's thread); its errors propagate."""
    async def run() -> None:
        async with env_server(families) as env, policy_server() as pol:
            spec = load_spec(None, [
                f"agent.type={player}", f"envs.names={'-'.join(families)}",
                f"tasks.babyai_tasks=[{GOTO}]", "eval.num_episodes.babyai=3",
                "eval.max_steps_per_episode=12", "eval.save_images=true",
                "eval.num_workers=2", f"eval.output_dir={out}",
                *(f"endpoints.env.{family}=[{env.target}]" for family in families),
                f"endpoints.policy=[{pol.target}]", *overrides])
            outcome = await run_evaluation(spec, console=Console(quiet=True),
                                           show_progress=False)
            assert outcome.verdict is not None and outcome.verdict.succeeded

    with ThreadPoolExecutor(max_workers=1) as pool:
        pool.submit(lambda: asyncio.run(run())).result()
