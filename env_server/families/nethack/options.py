"""The open options shared by the ``nle`` and ``minihack`` families (their schemas are in the
manifest; ``Family.check_options`` checks them).

The generic helpers come from ``env_server.options`` (re-exported here).
"""

from __future__ import annotations

from env_server.game import GameOptions
from env_server.options import check_single_player, step_limit

__all__ = ["check_single_player", "step_limit", "text_mode"]


def text_mode(options: GameOptions) -> str:
    """``text_mode`` of checked ``options``: ``hybrid`` (ASCII map, BALROG's text-only setting)
    or ``language`` (statistics instead of the map, BALROG's setting with images). Default:
    ``language`` when ``render_image`` is on, else ``hybrid``."""
    chosen = options.kwargs.get("text_mode")
    if chosen:
        return str(chosen)
    return "language" if options.render_image else "hybrid"
