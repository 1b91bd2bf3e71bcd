"""Validation of the open options shared by the ``nle`` and ``minihack`` families.

The generic ``pop_*`` helpers come from ``env_server.options`` (re-exported here); every error is
a ``GameOptionError`` naming the option and what is allowed.
"""

from __future__ import annotations

from typing import Any

from env_server.families.nethack.game import TEXT_MODES
from env_server.game import GameOptions
from env_server.options import (
    check_single_player,
    pop_bool,
    pop_choice,
    pop_int,
    reject_unknown,
    step_limit,
)

__all__ = ["check_single_player", "pop_bool", "pop_choice", "pop_int", "pop_text_mode",
           "reject_unknown", "step_limit"]


def pop_text_mode(kwargs: dict[str, Any], options: GameOptions) -> str:
    """``text_mode``: ``hybrid`` (ASCII map, BALROG's text-only setting) or ``language``
    (statistics instead of the map, BALROG's setting with images). Default: ``language`` when
    ``render_image`` is on, else ``hybrid``."""
    default = "language" if options.render_image else "hybrid"
    return pop_choice(kwargs, "text_mode", default, TEXT_MODES)
