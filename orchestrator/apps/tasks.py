"""``moria tasks``: list env families and their tasks, asked of a real env server.

Task ids are never cut or wrapped, whether stdout is a terminal or a pipe: they are what a run
spec, a worker config and ``llm-worker --task`` take, so ``moria tasks | grep Soccer`` must show
them whole. In a pipe every task is one plain line, its fields separated by a tab (a header line
first: ``env``, ``task``, ``max steps``, ``default action``, ``description``), ready for
``grep``, ``cut -f2`` or a spreadsheet; in a terminal a table where only the description wraps,
never narrower than the env, task, max steps and default-action columns need (a narrower
terminal shows the long lines wrapped by the terminal itself, with the ids intact).

A task the server lists but cannot open (``TaskInfo.unavailable``: Melting Pot's scenarios,
whose bots need tensorflow) is listed all the same, its description cell starting with
``UNAVAILABLE``: in a pipe ``UNAVAILABLE: <reason>.`` on its own line (so ``moria tasks | grep
clean_up_0`` shows why, and ``grep -v UNAVAILABLE`` hides them); in a terminal ``UNAVAILABLE
(note N)``, each distinct reason given once in the table's caption (hundreds of rows repeating
a sentence in a narrow description column would bury the table).
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from moria import aio
from moria.clients import EnvClient, close_channels
from orchestrator.apps.say import stderr_console
from orchestrator.core.stack import LocalStack
from orchestrator.plan.spec import DEFAULT_NUM_EPISODES

#: A listed task: env, task, max steps, default action, description, and why the server cannot
#: open it ("" when it can).
Row = tuple[str, str, str, str, str, str]
#: The cells of one table row (the columns of ``COLUMNS``).
Cells = tuple[str, str, str, str, str]

#: The columns, left to right; the last one (the description) is the only one that may wrap.
COLUMNS: tuple[str, ...] = ("env", "task", "max steps", "default action", "description")

#: In a terminal, the description column is given at least this many characters.
MIN_DESCRIPTION_WIDTH = 24

#: How the description cell of an unavailable task starts.
UNAVAILABLE_MARK = "UNAVAILABLE"


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
             t.default_action, t.description, t.unavailable) for t in tasks]


def cells(rows: list[Row], terminal: bool) -> tuple[list[Cells], list[str]]:
    """The table's cells and its notes (the distinct reasons, terminal only): an unavailable
    task's description starts with ``UNAVAILABLE: <reason>.`` in a pipe, ``UNAVAILABLE (note
    N)`` in a terminal (module doc)."""
    notes: list[str] = []
    table: list[Cells] = []
    for env, task, steps, action, description, unavailable in rows:
        if unavailable:
            reason = unavailable.rstrip(". ")
            if terminal:
                if reason not in notes:
                    notes.append(reason)
                mark = f"{UNAVAILABLE_MARK} (note {notes.index(reason) + 1})"
            else:
                mark = f"{UNAVAILABLE_MARK}: {reason}."
            description = f"{mark} {description}".rstrip()
        table.append((env, task, steps, action, description))
    return table, notes


def caption(rows: list[Row], notes: list[str]) -> str | None:
    """The line under the table: how many tasks are unavailable, and the notes."""
    count = sum(1 for row in rows if row[-1])
    if not count:
        return None
    text = (f"{count} task(s) marked {UNAVAILABLE_MARK} are listed but cannot be opened on "
            "this server")
    if not notes:
        return text + " (the reason follows the mark)."
    return text + ": " + " ".join(f"note {i}: {reason}." for i, reason in enumerate(notes, 1))


def table_width(rows: list[Cells], description_width: int) -> int:
    """The console width at which the table shows every cell of the first four columns whole
    and gives the description ``description_width`` characters (rich's box: one border per
    column plus one, one space of padding on each side of a cell)."""
    fixed = [max([len(header), *(len(row[i]) for row in rows)])
             for i, header in enumerate(COLUMNS[:-1])]
    return sum(fixed) + description_width + 3 * len(COLUMNS) + 1


def render(rows: list[Row], console: Console) -> Table:
    """The task table for ``console``: ids never cut; descriptions wrap in a terminal only."""
    terminal = console.is_terminal
    shown, notes = cells(rows, terminal)
    table = Table(title="Moria tasks (BALROG evaluation set first)",
                  caption=caption(rows, notes), caption_justify="left")
    for column in COLUMNS[:-1]:
        table.add_column(column, no_wrap=True, overflow="ignore")
    table.add_column(COLUMNS[-1], no_wrap=not terminal, overflow="fold")
    for row in shown:
        table.add_row(*(escape(cell) for cell in row))
    return table


def output_console(rows: list[Row]) -> Console:
    """The terminal's console: its own width but never narrower than the id columns need."""
    probe = Console()
    shown, _ = cells(rows, probe.is_terminal)
    longest = max([len(COLUMNS[-1]), *(len(row[-1]) for row in shown)])
    need = table_width(shown, min(longest, MIN_DESCRIPTION_WIDTH))
    return Console(width=max(probe.width, need))


def plain_lines(rows: list[Row]) -> list[str]:
    """The listing for a pipe: a header, then one line per task, fields separated by a tab
    (a tab or line break inside a field becomes a space)."""
    shown, _ = cells(rows, terminal=False)
    return ["\t".join(" ".join(cell.split()) for cell in row)
            for row in [tuple(COLUMNS), *shown]]


def write_all(stream: Any, text: str) -> None:
    """Write ``text`` to ``stream``'s file descriptor whole, however many writes it takes: after
    the local stack's run, a single write of the listing to a pipe whose reader was slower
    came back short (one pipe-full, 64 KiB) and ``print`` dropped the rest without an error,
    so ``moria tasks`` in a pipe lost its last few hundred lines now and then. Raises
    BrokenPipeError when the reader has gone."""
    stream.flush()
    fd = stream.fileno()
    os.set_blocking(fd, True)
    view = memoryview(text.encode(stream.encoding or "utf-8", errors="replace"))
    while view:
        view = view[os.write(fd, view):]


def list_tasks(env: str = "", endpoint: str = "") -> int:
    """Print the task table; returns the process exit code."""
    if env and env not in DEFAULT_NUM_EPISODES and not endpoint:
        stderr_console().print(f"unknown env {env!r}; allowed: "
                               + ", ".join(sorted(DEFAULT_NUM_EPISODES)), highlight=False)
        return 2
    rows = aio.run(_fetch(env, endpoint))
    if not Console().is_terminal:
        note = caption(rows, [])
        if note:  # what the UNAVAILABLE marks mean, beside the lines (not among them)
            stderr_console().print(note, highlight=False, markup=False)
        try:
            write_all(sys.stdout, "\n".join(plain_lines(rows)) + "\n")
        except BrokenPipeError:  # ``moria tasks | head``: the reader had enough
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    console = output_console(rows)
    console.print(render(rows, console))
    return 0
