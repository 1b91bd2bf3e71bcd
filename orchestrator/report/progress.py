"""The one progress bar of the ``moria`` commands (episodes, games, data items, demos)."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def progress_bar(console: Console, enabled: bool, *, label: str = "{task.description}",
                 eta: bool = True) -> Progress:
    """A rich progress bar on ``console`` (none drawn when not ``enabled``): ``label`` (a rich
    format of the task), the bar, done/total, elapsed time and, with ``eta``, time remaining.
    Kept on screen when done. Use as a context manager."""
    columns = [TextColumn(f"[bold]{label}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), *([TimeRemainingColumn()] if eta else [])]
    return Progress(*columns, console=console, disable=not enabled, transient=False)
