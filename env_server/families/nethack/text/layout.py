"""The text the model reads for one NLE/MiniHack observation (docs/families/minihack.md).

Each block is ``<label>:\\n<value>\\n`` and blocks are joined by one more ``\\n``, as in the
reference.

Hybrid mode (BALROG's default, no image history):

- long-term: ``message`` (the step's message, possibly empty), ``language observation``,
  ``cursor`` (then ``\\n(x=<col>, y=<row>)`` with the raw ``tty_cursor``; the row counts the
  message line) and ``map``: rows 1..23 of ``tty_chars`` (all 80 characters, the two status lines
  at the bottom), each followed by ``\\n``;
- short-term: ``inventory``.

Language mode (used with images): long-term = message, language observation, cursor (no
coordinate line); short-term = ``statistics`` and ``inventory``.

The hybrid view omits the statistics block (the status lines in the map carry them); that is the
reference's layout and kept for comparability.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .cursor import describe_cursor
from .language import describe_map
from .status import describe_inventory, describe_stats

MODES = ("hybrid", "language")

_KEYS = {
    "hybrid": ("glyphs", "blstats", "tty_chars", "tty_cursor", "inv_letters", "inv_strs"),
    "language": ("glyphs", "blstats", "tty_cursor", "inv_letters", "inv_strs"),
}

_NEWLINES = np.full((23, 1), ord("\n"), dtype=np.uint8)


def render_map(tty_chars: np.ndarray) -> str:
    """Rows 1..23 of the 24x80 terminal, each row's 80 characters followed by ``\\n``
    (bytes decoded as Latin-1, i.e. ``chr`` of each byte)."""
    rows = np.asarray(tty_chars, dtype=np.uint8)[1:24]
    return np.concatenate((rows, _NEWLINES), axis=1).tobytes().decode("latin-1")


def _block(label: str, value: str) -> str:
    return f"{label}:\n{value}\n"


def render_observation(
    obs: Mapping[str, np.ndarray], *, message: str, mode: str = "hybrid"
) -> tuple[str, str]:
    """Long-term and short-term text of one observation.

    Args:
        obs: NLE observation holding ``glyphs`` (21, 79), ``blstats`` (27,), ``tty_chars``
            (24, 80; hybrid only), ``tty_cursor`` (2,), ``inv_letters`` (55,) and ``inv_strs``
            (55, 80).
        message: the step's message (from ``skip_more`` or ``extract_message``).
        mode: ``"hybrid"`` (default) or ``"language"``.

    Returns:
        ``(long_term_context, short_term_context)``.

    Raises:
        ValueError: unknown ``mode`` (the message lists the allowed ones), or ``obs`` lacks a key
            the mode needs (the message names it).
    """
    keys = _KEYS.get(mode)
    if keys is None:
        raise ValueError(f"unknown mode {mode!r}; allowed: {', '.join(MODES)}")
    missing = [key for key in keys if key not in obs]
    if missing:
        raise ValueError(f"observation lacks key(s) {', '.join(missing)} needed by mode {mode!r}")
    blstats = obs["blstats"]
    glyphs = obs["glyphs"]
    tty_cursor = obs["tty_cursor"]
    language = describe_map(glyphs, int(blstats[0]), int(blstats[1]))
    cursor = describe_cursor(glyphs, blstats, tty_cursor)
    inventory = _block("inventory", describe_inventory(obs["inv_letters"], obs["inv_strs"]))
    if mode == "hybrid":
        cursor += f"\n(x={int(tty_cursor[1])}, y={int(tty_cursor[0])})"
        long_term = "\n".join((
            _block("message", message),
            _block("language observation", language),
            _block("cursor", cursor),
            _block("map", render_map(obs["tty_chars"])),
        ))  # fmt: skip
        return long_term, inventory
    long_term = "\n".join((
        _block("message", message),
        _block("language observation", language),
        _block("cursor", cursor),
    ))  # fmt: skip
    return long_term, "\n".join((_block("statistics", describe_stats(blstats)), inventory))
