"""Validation of family options (``GameOptions.kwargs``), shared by every family.

The options arrive from JSON/Struct, so numbers may be floats: whole floats are accepted where an
integer is expected. Every error is a ``GameOptionError`` naming the option and what is allowed.
"""

from __future__ import annotations

from numbers import Real
from typing import Any

from env_server.game import GameOptionError, GameOptions
from env_server.single_agent import AGENT_ID as SINGLE_AGENT_ID
from moria.quoting import quote, quote_names


def pop_int(kwargs: dict[str, Any], key: str, default: int, low: int, high: int) -> int:
    """Remove ``kwargs[key]`` and return it as an int in [low, high]."""
    if key not in kwargs:
        return default
    value = kwargs.pop(key)
    if isinstance(value, bool) or not isinstance(value, Real) or int(value) != value:
        raise GameOptionError(
            f"{key}: must be an integer in [{low}, {high}], got {quote(value, 64)}")
    number = int(value)
    if not low <= number <= high:
        raise GameOptionError(f"{key}: must be an integer in [{low}, {high}], got {number}")
    return number


def pop_bool(kwargs: dict[str, Any], key: str, default: bool) -> bool:
    """Remove ``kwargs[key]`` and return it as a bool (only true/false accepted)."""
    if key not in kwargs:
        return default
    value = kwargs.pop(key)
    if not isinstance(value, bool):
        raise GameOptionError(f"{key}: must be true or false, got {quote(value, 64)}")
    return value


def pop_choice(kwargs: dict[str, Any], key: str, default: str, allowed: tuple[str, ...]) -> str:
    """Remove ``kwargs[key]`` and return it if it is one of ``allowed``."""
    if key not in kwargs:
        return default
    value = kwargs.pop(key)
    if value not in allowed:
        raise GameOptionError(f"{key}: must be one of {', '.join(allowed)}; got {quote(value, 64)}")
    return str(value)


def reject_unknown(kwargs: dict[str, Any], task: str, allowed: list[str]) -> None:
    """Raise for any key left in ``kwargs`` after the known ones were popped."""
    if kwargs:
        raise GameOptionError(
            f"kwargs: unknown keys {quote_names(sorted(kwargs), 10)} for {quote(task, 128)}; "
            f"allowed: {', '.join(allowed)}"
        )


def check_single_player(family: str, options: GameOptions) -> None:
    """One player at most, named ``agent_0`` (or unnamed); else ``GameOptionError``."""
    if len(options.players) > 1 or any(
        p.agent_id not in ("", SINGLE_AGENT_ID) for p in options.players
    ):
        raise GameOptionError(
            f"players: {family} is single-agent; use one player {SINGLE_AGENT_ID!r}")


def step_limit(options: GameOptions, default: int) -> int:
    """``options.max_steps`` if set (a positive integer), else ``default``.

    Raises ``GameOptionError`` for anything but a positive integer or None."""
    limit = options.max_steps
    if limit is None:
        return default
    if isinstance(limit, bool) or not isinstance(limit, Real) or int(limit) != limit or limit < 1:
        raise GameOptionError(
            f"max_steps: must be a positive integer or None, got {quote(limit, 64)}")
    return int(limit)
