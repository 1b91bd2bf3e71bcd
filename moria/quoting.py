"""Bounded quoting of client input in error messages.

An error message that echoes what a client sent must stay small whatever the client sent: a
gRPC status travels in trailing metadata (about 16 KiB in all before the transport refuses it),
and an in-band error is written on every stream that carries it. Every message that quotes a
name, key, value or text from a request goes through these helpers.

Limits: at most ``MAX_NAMES`` names, each cut to ``MAX_NAME_CHARS`` characters, and at most
``MAX_QUOTE_CHARS`` characters of free text; what is left out is counted ("... and 17 more").
Control characters are shown escaped (``repr``), so a message stays one printable line.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice
from typing import Final

#: How many names one message lists before it says how many more there are.
MAX_NAMES: Final[int] = 20
#: How many characters of one quoted name are shown.
MAX_NAME_CHARS: Final[int] = 64
#: How many characters of one quoted free text (a value, a path, a message) are shown.
MAX_QUOTE_CHARS: Final[int] = 1024


def quote(text: object, limit: int = MAX_QUOTE_CHARS) -> str:
    """``repr`` of ``str(text)`` cut to ``limit`` characters of the text, then the count of
    characters left out: ``'abc…' (+1234 chars)``. Never longer than about ``limit + 40``."""
    value = str(text)
    shown = value[:limit]
    quoted = repr(shown)
    if len(quoted) > limit + 2:
        # Escapes (control characters shown as \x00, \u2028, ...) make the repr up to 10x
        # longer than the text: keep the longest prefix whose repr still fits the limit.
        low, high = 0, len(shown)
        while low < high:
            middle = (low + high + 1) // 2
            if len(repr(shown[:middle])) <= limit + 2:
                low = middle
            else:
                high = middle - 1
        shown = shown[:low]
        quoted = repr(shown)
    if len(shown) == len(value):
        return quoted
    return f"{quoted}… (+{len(value) - len(shown)} chars)"


def cut(text: str, limit: int) -> str:
    """``text`` when it has at most ``limit`` characters, else its first ``limit`` followed
    by a line counting the rest (``[… 1,234 more characters cut]``). Unlike ``quote`` no
    escaping: for text shown or stored as text (a page escapes it itself)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[… {len(text) - limit:,} more characters cut]"


def quote_names(names: Iterable[object], limit: int = MAX_NAMES,
                name_chars: int = MAX_NAME_CHARS) -> str:
    """The first ``limit`` of ``names``, each quoted (``quote`` with ``name_chars``), joined
    with ", ", then "and N more" for the rest. Consumes ``names`` lazily up to ``limit`` and
    only counts the rest, so a generator of a million names costs no list."""
    iterator = iter(names)
    shown = [quote(name, name_chars) for name in islice(iterator, limit)]
    rest = sum(1 for _ in iterator)
    text = ", ".join(shown)
    return f"{text} and {rest} more" if rest else text
