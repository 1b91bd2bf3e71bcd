"""Family options of ``crafter`` (``GameOptions.kwargs``): validation into ``CrafterConfig``.

Accepted keys (BALROG's ``envs.crafter_kwargs`` where they make sense, plus the text options):

- ``text_format``: ``"legacy"`` (default; the format behind BALROG's published numbers) or
  ``"current"`` (BALROG after its PR #55); see ``text.py``;
- ``unique_items`` (bool, default true), ``precise_location`` (bool, default false),
  ``skip_items`` / ``edge_only_items`` (lists of item names from ``vocab.LISTABLE_ITEMS``,
  default empty): current format only; another value with the legacy format is an error;
- ``size``: rendered frame size ``[width, height]`` in pixels, each 16..1024 (default
  [256, 256], BALROG's). As in crafter, the size also fixes how many night-noise random draws
  each render takes from the world RNG, so it is part of the episode's definition;
- ``area``: world size ``[width, height]`` in cells, each 16..256 (default [64, 64]);
- ``view``: only ``[9, 9]`` (the text window is built for it);
- ``reward``: only ``true`` (crafter's reward is always reported);
- ``seed``: only ``null``: the world comes from the episode seed;
- ``max_episode_steps``: the step limit, 1..1,000,000 (default 2000; ``GameOptions.max_steps``
  wins over it);
- ``balrog_source``: a BALROG checkout (as ``agent.balrog_source``): the text then comes from
  that checkout's own code (``balrog_text.py``) and ``text_format`` may not be given. The
  orchestrator sets it for runs with ``agent.protocol=balrog``.

Any other key is an error. Every error is a ``GameOptionError`` naming the option.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from env_server.families.crafter.text import TEXT_FORMATS, TextOptions
from env_server.families.crafter.vocab import LISTABLE_ITEMS
from env_server.game import GameOptionError
from env_server.options import pop_bool, pop_choice, pop_int, reject_unknown

DEFAULT_MAX_STEPS = 2000
DEFAULT_SIZE = (256, 256)
DEFAULT_AREA = (64, 64)
VIEW = (9, 9)
SIZE_RANGE = (16, 1024)
AREA_RANGE = (16, 256)
MAX_STEPS_LIMIT = 1_000_000

ALLOWED_KEYS: list[str] = [
    "text_format",
    "unique_items",
    "precise_location",
    "skip_items",
    "edge_only_items",
    "size",
    "area",
    "view",
    "reward",
    "seed",
    "max_episode_steps",
    "balrog_source",
]


@dataclass(frozen=True)
class CrafterConfig:
    """Validated family options (see the module docstring for meanings and ranges)."""

    text: TextOptions = field(default_factory=TextOptions)
    size: tuple[int, int] = DEFAULT_SIZE
    area: tuple[int, int] = DEFAULT_AREA
    max_episode_steps: int = DEFAULT_MAX_STEPS
    balrog_source: str | None = None

    def text_metrics(self) -> dict[str, Any]:
        """The text settings every result records: ``text_format`` and the four options as
        applied (the legacy format always applies the defaults)."""
        return {
            "text_format": "balrog" if self.balrog_source else self.text.text_format,
            "unique_items": self.text.unique_items,
            "precise_location": self.text.precise_location,
            "skip_items": list(self.text.skip_items),
            "edge_only_items": list(self.text.edge_only_items),
        }


def _pop_pair(kwargs: dict[str, Any], key: str, default: tuple[int, int],
              low: int, high: int) -> tuple[int, int]:
    """Remove ``kwargs[key]`` and return it as two integers in [low, high]."""
    if key not in kwargs:
        return default
    value = kwargs.pop(key)
    ok = (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and len(value) == 2
        and all(
            isinstance(v, int | float) and not isinstance(v, bool) and low <= v <= high
            and v == int(v)
            for v in value
        )
    )
    if not ok:
        raise GameOptionError(
            f"{key}: must be two integers [width, height], each in [{low}, {high}]; got {value!r}"
        )
    return int(value[0]), int(value[1])


def _pop_names(kwargs: dict[str, Any], key: str) -> tuple[str, ...]:
    """Remove ``kwargs[key]`` and return it as a tuple of item names (default empty)."""
    if key not in kwargs:
        return ()
    value = kwargs.pop(key)
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise GameOptionError(f"{key}: must be a list of item names; got {value!r}")
    unknown = [v for v in value if v not in LISTABLE_ITEMS]
    if unknown:
        raise GameOptionError(
            f"{key}: unknown item names {unknown!r}; allowed: {', '.join(LISTABLE_ITEMS)}"
        )
    return tuple(dict.fromkeys(str(v) for v in value))


def _pop_fixed(kwargs: dict[str, Any], key: str, allowed: Any, why: str) -> None:
    """Remove ``kwargs[key]``; it may only equal ``allowed`` (lists compare as tuples)."""
    if key not in kwargs:
        return
    value = kwargs.pop(key)
    same = (
        tuple(value) == allowed
        if isinstance(allowed, tuple) and isinstance(value, Sequence)
        else value is allowed
    )
    if not same:
        shown = list(allowed) if isinstance(allowed, tuple) else allowed
        raise GameOptionError(f"{key}: only {shown!r} is supported ({why}); got {value!r}")


def parse_kwargs(kwargs: dict[str, Any], task: str) -> CrafterConfig:
    """Validate a copy of ``kwargs`` into a ``CrafterConfig``.

    Raises:
        GameOptionError: a bad value, a current-format option with ``text_format`` legacy, or
            an unknown key (the message lists the allowed keys).
    """
    kwargs = dict(kwargs)
    balrog_source = kwargs.pop("balrog_source", None)
    if balrog_source is not None and (not isinstance(balrog_source, str) or not balrog_source):
        raise GameOptionError("balrog_source: expected the path of a BALROG checkout")
    if balrog_source is not None and "text_format" in kwargs:
        raise GameOptionError("text_format: not with balrog_source (the BALROG checkout's own "
                              "code writes the text)")
    text_format = pop_choice(kwargs, "text_format", "legacy", TEXT_FORMATS)
    defaults = TextOptions()
    text = TextOptions(
        text_format=text_format,
        unique_items=pop_bool(kwargs, "unique_items", defaults.unique_items),
        precise_location=pop_bool(kwargs, "precise_location", defaults.precise_location),
        skip_items=_pop_names(kwargs, "skip_items"),
        edge_only_items=_pop_names(kwargs, "edge_only_items"),
    )
    if text_format == "legacy" and balrog_source is None:
        for name in ("unique_items", "precise_location", "skip_items", "edge_only_items"):
            if getattr(text, name) != getattr(defaults, name):
                raise GameOptionError(
                    f"{name}: needs text_format=current (the legacy format has no options)"
                )
    size = _pop_pair(kwargs, "size", DEFAULT_SIZE, *SIZE_RANGE)
    area = _pop_pair(kwargs, "area", DEFAULT_AREA, *AREA_RANGE)
    _pop_fixed(kwargs, "view", VIEW, "the text window is built for a 9x9 view")
    _pop_fixed(kwargs, "reward", True, "crafter's reward is always reported")
    _pop_fixed(kwargs, "seed", None, "the world comes from the episode seed")
    max_steps = pop_int(kwargs, "max_episode_steps", DEFAULT_MAX_STEPS, 1, MAX_STEPS_LIMIT)
    reject_unknown(kwargs, task, ALLOWED_KEYS)
    return CrafterConfig(text=text, size=size, area=area, max_episode_steps=max_steps,
                         balrog_source=balrog_source)
