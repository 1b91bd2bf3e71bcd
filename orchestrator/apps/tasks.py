"""``moria tasks``: list env families and their tasks, asked of a real env server.

Task ids are never cut or wrapped, whether stdout is a terminal or a pipe: they are what a run
spec, a worker config and ``llm-worker --task`` take, so ``moria tasks | grep Soccer`` must show
them whole. In a pipe every task is one line (the table is as wide as its widest row); in a
terminal only the description wraps, and the table is never narrower than the env, task, max
steps and default-action columns need (a narrower terminal shows the long lines wrapped by the
terminal itself, with the ids intact).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

from moria import aio
from moria.clients import EnvClient, close_channels
from orchestrator.core.stack import LocalStack
from orchestrator.plan.spec import DEFAULT_NUM_EPISODES

Row = tuple[str, str, str, str, str]

#: The columns, left to right; the last one (the description) is the only one that may wrap.
COLUMNS: tuple[str, ...] = ("env", "task", "max steps", "default action", "description")

#: In a terminal, the description column is given at least this many characters.
MIN_DESCRIPTION_WIDTH = 24


async def _fetch(env: str, endpoint: str) -> list[Row]:
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
    return [(t.family, t.task, str(t.max_steps) if t.max_steps else "per seed",
             t.default_action, t.description) for t in tasks]


def table_width(rows: list[Row], description_width: int) -> int:
    """The console width at which the table shows every cell of the first four columns whole
    and gives the description ``description_width`` characters (rich's box: one border per
    column plus one, one space of padding on each side of a cell)."""
    fixed = [max([len(header), *(len(row[i]) for row in rows)])
             for i, header in enumerate(COLUMNS[:-1])]
    return sum(fixed) + description_width + 3 * len(COLUMNS) + 1


def render(rows: list[Row], console: Console) -> Table:
    """The task table for ``console``: ids never cut; descriptions wrap in a terminal only."""
    terminal = console.is_terminal
    table = Table(title="Moria tasks (BALROG evaluation set first)")
    for column in COLUMNS[:-1]:
        table.add_column(column, no_wrap=True, overflow="ignore")
    table.add_column(COLUMNS[-1], no_wrap=not terminal, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def output_console(rows: list[Row]) -> Console:
    """The stdout console: in a pipe, as wide as the widest row (one line per task); in a
    terminal, its own width but never narrower than the id columns need."""
    probe = Console()
    longest = max([len(COLUMNS[-1]), *(len(row[-1]) for row in rows)])
    if not probe.is_terminal:
        return Console(width=table_width(rows, longest), soft_wrap=False)
    need = table_width(rows, min(longest, MIN_DESCRIPTION_WIDTH))
    return Console(width=max(probe.width, need))


def list_tasks(env: str = "", endpoint: str = "") -> int:
    """Print the task table; returns the process exit code."""
    from orchestrator.apps.cli import stderr_console

    if env and env not in DEFAULT_NUM_EPISODES and not endpoint:
        stderr_console().print(f"unknown env {env!r}; allowed: "
                               + ", ".join(sorted(DEFAULT_NUM_EPISODES)), highlight=False)
        return 2
    rows = aio.run(_fetch(env, endpoint))
    console = output_console(rows)
    console.print(render(rows, console))
    return 0
