"""Console lines whose variable parts are printed as written, never read as rich markup.

An f-string passed to ``Console.print`` is parsed as markup: an error text naming a gRPC method
(``[/moria.env.v1.EnvService/Session]``), a path or a run id with brackets either lost its
brackets or raised ``rich.errors.MarkupError`` instead of printing why a command stopped. These
build ``rich.text.Text`` objects, which the console prints without parsing (and without its
highlighter), with only the label styled.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

from rich.console import Console
from rich.text import Text

#: The module ``python -m`` runs for ``moria``.
CLI_MODULE = "orchestrator.apps.cli"


def labelled(style: str, label: str, message: object) -> Text:
    """``label`` (e.g. ``"error:"``) in rich ``style``, a space, then ``str(message)`` as is."""
    return Text.assemble((label, style), " ", str(message))


def error_line(message: object) -> Text:
    """``error: <message>``, the label red: how every ``moria`` command reports a failure."""
    return labelled("red", "error:", message)


def warning(message: object) -> Text:
    """``str(message)`` in yellow: a result that is kept but short of what was asked."""
    return Text(str(message), style="yellow")


def literal(message: object) -> Text:
    """``str(message)`` unstyled and unparsed (paths, run ids, addresses, counts)."""
    return Text(str(message))


def invocation(argv0: str | None = None) -> str:
    """How the user can run ``moria`` again from where they are, for commands printed in hints:
    ``moria`` when that name on PATH is this very program; the path as they typed it otherwise
    (a relative path stays relative: it is right from the directory they are in); the
    interpreter and ``-m orchestrator.apps.cli`` when they ran the module. ``argv0``: default
    ``sys.argv[0]``."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    if not argv0 or argv0 == "-m" or argv0.endswith(".py"):
        return f"{shlex.quote(sys.executable)} -m {CLI_MODULE}"
    found = shutil.which("moria")
    typed = shutil.which(argv0) if "/" not in argv0 else argv0
    if found and typed and Path(found).resolve() == Path(typed).resolve():
        return "moria"
    return shlex.quote(argv0)


def stderr_console() -> Console:
    """The console for messages and progress on stderr (every ``moria`` command prints its
    errors and hints with it): a message is never wrapped, so an error stays one line that a
    script can grep and a command in a hint stays one line that can be pasted."""
    return Console(stderr=True, soft_wrap=True)
