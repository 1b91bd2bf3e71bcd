"""Observation text of TextWorld games (docs/families/textworld.md), our own code.

BALROG's text: the game's output with the objective removed. The output is split on the exact
objective string and only what follows its *last* occurrence is kept (all of it when the
objective does not occur), then stripped. At reset this drops the ASCII "TextWorld" banner and
the objective paragraph; after the ``goal`` command it leaves an empty text.

Interpreter artefact (checked with TextWorld 1.7.0 / jericho 3.3.1 on all three families, .z8):
every output ends with the Z-machine status line: a ``>`` prompt on its own line, ~128 padding
spaces, then ``-= <Room> =-<score>/<moves>``, e.g. ``"...unblocked.\\n\\n>" + " " * 128 +
"-= Studio =-0/6"``. After a yes/no question (``quit``, ``restart``) the prompt is missing and
only the padding and the banner follow the question. This is not game text, so
:func:`strip_status_line` removes it (BALROG's cooking texts under TextWorld 1.6.2 kept it).
"""

from __future__ import annotations

import re

# The status line at the very end: an optional "\n>" prompt, padding, then the room banner and
# score/moves (the score may be negative in principle).
_STATUS_LINE = re.compile(r"(?:\n>)?[ \t]*-= [^\n]*? =--?\d+/\d+\Z")


def strip_status_line(text: str) -> str:
    """``text`` without the interpreter's trailing status line (see the module docstring).

    Only a trailer at the very end is removed (also a bare ``>`` prompt left without banner);
    trailing whitespace goes too, leading whitespace stays.
    """
    text = text.rstrip()
    match = _STATUS_LINE.search(text)
    if match is not None:
        text = text[: match.start()].rstrip()
    if text.endswith("\n>") or text == ">":
        text = text[:-1].rstrip()
    return text


def strip_objective(text: str, objective: str) -> str:
    """BALROG's objective removal: what follows the last occurrence of ``objective``, stripped.

    Args:
        text: one game output.
        objective: the game's objective text (TextWorld's ``objective`` info); empty: no removal.

    Returns:
        The remaining text, stripped of surrounding whitespace; ``text.strip()`` when the objective
        does not occur.
    """
    if not objective:
        return text.strip()
    return text.split(objective)[-1].strip()


def observation_text(raw: str, objective: str, keep_objective: bool) -> str:
    """The long-term text of one output: status line removed, then the objective handling.

    ``keep_objective`` False: BALROG's text (objective and everything before it removed).
    ``keep_objective`` True (the section-8 defect fix): where the objective occurs, the text is
    the objective, a blank line, then what follows it, so the banner is still dropped but the goal
    stays visible (``goal`` then answers with the objective itself).
    """
    text = strip_status_line(raw)
    rest = strip_objective(text, objective)
    if keep_objective and objective and objective in text:
        return f"{objective.strip()}\n\n{rest}".strip()
    return rest
