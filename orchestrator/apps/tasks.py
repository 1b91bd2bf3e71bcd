"""``moria tasks``: list env families and their tasks, asked of a real env server."""

from __future__ import annotations

import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from moria import aio
from moria.clients import EnvClient, close_channels
from orchestrator.core.stack import LocalStack
from orchestrator.plan.spec import DEFAULT_NUM_EPISODES


async def _fetch(env: str, endpoint: str) -> list[tuple[str, str, int, str, str]]:
    families = [env] if env else sorted(DEFAULT_NUM_EPISODES)
    try:
        if endpoint:
            tasks = await EnvClient(endpoint).list_tasks(env)
        else:
            with tempfile.TemporaryDirectory(prefix="moria-tasks-") as logs:
                async with LocalStack(families, Path(logs), with_agent=False) as stack:
                    tasks = await EnvClient(stack.env_target).list_tasks(env)
    finally:
        await close_channels()
    return [(t.family, t.task, t.max_steps, t.default_action, t.description) for t in tasks]


def list_tasks(env: str = "", endpoint: str = "") -> int:
    """Print the task table; returns the process exit code."""
    console = Console()
    if env and env not in DEFAULT_NUM_EPISODES and not endpoint:
        Console(stderr=True).print(f"unknown env {env!r}; allowed: "
                                   + ", ".join(sorted(DEFAULT_NUM_EPISODES)))
        return 2
    rows = aio.run(_fetch(env, endpoint))
    table = Table(title="Moria tasks (BALROG evaluation set first)")
    for column in ("env", "task", "max steps", "default action", "description"):
        table.add_column(column)
    for family, task, max_steps, default, description in rows:
        table.add_row(family, task, str(max_steps) if max_steps else "per seed", default,
                      description)
    console.print(table)
    return 0
