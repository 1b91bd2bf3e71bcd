"""Crafter's observation text from a BALROG checkout's own code (``agent.protocol=balrog``).

BALROG's Crafter text changed between its commits (the "You face" line before and after its
2025-04 fix, the sleeping and death sentences, the options of its 2025-08 change). Under
``agent.protocol=balrog`` the family is given the checkout (``crafter_kwargs.balrog_source``)
and each observation's text comes from that checkout's ``describe_frame``, called on the step's
``info`` augmented as BALROG's Crafter wrapper augments it (sleeping, facing, dead, the
achievements unlocked, the view size). The text options are passed to ``describe_frame`` only
where that commit's function takes them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from env_server.families.crafter.text import TextOptions
from moria.balrog_source import load_balrog_source

#: The text options BALROG's ``describe_frame`` may take, by its keyword names.
TEXT_KEYWORDS: tuple[str, ...] = ("unique_items", "precise_location", "skip_items",
                                  "edge_only_items")


def augmented_info(env: Any, info: dict[str, Any]) -> dict[str, Any]:
    """``info`` plus what BALROG's Crafter wrapper adds after every step: ``sleeping``,
    ``player_facing``, ``dead``, ``unlocked`` (achievements reached but not yet unlocked in
    the env's own record) and ``view``."""
    player = env._player
    out = dict(info)
    out["sleeping"] = player.sleeping
    out["player_facing"] = player.facing
    out["dead"] = player.health <= 0
    out["unlocked"] = {name for name, count in player.achievements.items()
                       if count > 0 and name not in env._unlocked}
    out["view"] = env._view
    return out


class BalrogCrafterText:
    """The checkout's ``describe_frame`` with this game's text options.

    Raises BalrogSourceError (a ValueError) when the checkout cannot be loaded or has no
    Crafter text module."""

    def __init__(self, balrog_source: str, text: TextOptions) -> None:
        source = load_balrog_source(balrog_source)
        module = source.module("environments.crafter.env")
        describe: Callable[..., tuple[str, str]] = module.describe_frame
        accepted = inspect.signature(describe).parameters
        options = {"unique_items": text.unique_items, "precise_location": text.precise_location,
                   "skip_items": list(text.skip_items),
                   "edge_only_items": list(text.edge_only_items)}
        self._describe = describe
        self._kwargs = {k: v for k, v in options.items() if k in accepted}
        self.commit = source.commit

    def describe(self, env: Any, info: dict[str, Any]) -> tuple[str, str]:
        """``(long_term_context, short_term_context)`` of the step that returned ``info``."""
        long_term, short_term = self._describe(augmented_info(env, info), **self._kwargs)
        return str(long_term), str(short_term)
