"""The one flattening of an observation's text channels into a single text.

An ``Observation`` carries ``long_term_context`` (what a prompt keeps in its history) and
``short_term_context`` (shown for the current step only). Trajectories (``StepRecord.observation``,
the CSV's Observation column) and demonstrations (``DemonstrationStep.observation``) store both in
one text: the long-term text, then the short-term text on the next line. Prompt builders keep the
channels apart (they show them differently) and do not use this.
"""

from __future__ import annotations

from typing import Any

#: The names of the two channels in ``Observation.text`` (kept there for older clients).
LONG_TERM = "long_term_context"
SHORT_TERM = "short_term_context"


def text_channels(observation: Any) -> tuple[str, str]:
    """(long-term text, short-term text) of an ``Observation``: its typed fields, or, for a
    message from a client older than them (both empty), the same-named ``text`` entries."""
    long_term, short_term = observation.long_term_context, observation.short_term_context
    if not long_term and not short_term:
        return observation.text.get(LONG_TERM, ""), observation.text.get(SHORT_TERM, "")
    return long_term, short_term


def observation_text(observation: Any) -> str:
    """``observation``'s long-term text, then a newline, then its short-term text, with newlines
    at the very start and end of the result removed; only the long-term text, unchanged, when
    there is no short-term text. ``observation`` is an ``Observation`` message."""
    long_term, short_term = text_channels(observation)
    return f"{long_term}\n{short_term}".strip("\n") if short_term else long_term
