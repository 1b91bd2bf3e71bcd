"""Checks of the open options every family shares (players, the step limit).

A family's own options (``GameOptions.kwargs``) are checked against its manifest's schema
(``moria.family_options``, through ``Family.check_options``). Every error is a
``GameOptionError`` naming the option and what is allowed.
"""

from __future__ import annotations

from numbers import Real

from env_server.game import GameOptionError, GameOptions
from env_server.single_agent import AGENT_ID as SINGLE_AGENT_ID
from moria.quoting import quote


def check_single_player(family: str, options: GameOptions) -> None:
    """One player at most, named ``agent_0`` (or unnamed); else ``GameOptionError``."""
    if len(options.players) > 1 or any(
        p.agent_id not in ("", SINGLE_AGENT_ID) for p in options.players
    ):
        raise GameOptionError(
            f"players: {family} is single-agent; use one player {SINGLE_AGENT_ID!r}")


#: The longest step limit an Open may ask for: far above any family's own (NetHack's 100,000),
#: far below what a game's counters could overflow on.
MAX_STEP_LIMIT = 10_000_000


def step_limit(options: GameOptions, default: int) -> int:
    """``options.max_steps`` if set (an integer in [1, ``MAX_STEP_LIMIT``]), else ``default``.

    Raises ``GameOptionError`` for anything else but None."""
    limit = options.max_steps
    if limit is None:
        return default
    if (isinstance(limit, bool) or not isinstance(limit, Real) or int(limit) != limit
            or not 1 <= limit <= MAX_STEP_LIMIT):
        raise GameOptionError(
            f"max_steps: must be an integer in [1, {MAX_STEP_LIMIT:,}] or None, got "
            f"{quote(limit, 64)}")
    return int(limit)
