"""Console lines whose variable parts are printed as written, never read as rich markup.

An f-string passed to ``Console.print`` is parsed as markup: an error text naming a gRPC method
(``[/moria.env.v1.EnvService/Session]``), a path or a run id with brackets either lost its
brackets or raised ``rich.errors.MarkupError`` instead of printing why a command stopped. These
build ``rich.text.Text`` objects, which the console prints without parsing (and without its
highlighter), with only the label styled.
"""

from __future__ import annotations

from rich.text import Text


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
