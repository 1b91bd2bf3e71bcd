"""Text rendering of NLE / MiniHack observations, BALROG-equivalent (docs/families/minihack.md).

Our own Python re-implementation of what BALROG's language wrapper shows the model, built from
stock nle 1.3.0 observation keys (``glyphs``, ``blstats``, ``tty_chars``, ``tty_cursor``,
``inv_letters``, ``inv_strs``):

- ``extract_message`` (message.py): message / menu text from the screen;
- ``skip_more`` (more.py): --More-- skipping after a step;
- ``describe_map`` (language.py): the "language observation";
- ``describe_cursor`` (cursor.py): cursor text;
- ``describe_inventory``, ``describe_stats`` (status.py): inventory and statistics text;
- ``render_observation`` (layout.py): the long-/short-term texts in hybrid or language mode;
- ``NLEProgress`` (progress.py): progression table and end reason.

Glyph tables are built lazily on first use (about 20 ms) from ``nle.nethack``.
"""

from .cursor import describe_cursor
from .language import describe_map
from .layout import MODES, render_map, render_observation
from .message import extract_message
from .more import MoreResult, skip_more
from .progress import PROGRESSION_TABLE, NLEProgress, parse_end_reason
from .status import describe_inventory, describe_stats

__all__ = [
    "MODES",
    "PROGRESSION_TABLE",
    "MoreResult",
    "NLEProgress",
    "describe_cursor",
    "describe_inventory",
    "describe_map",
    "describe_stats",
    "extract_message",
    "parse_end_reason",
    "render_map",
    "render_observation",
    "skip_more",
]
