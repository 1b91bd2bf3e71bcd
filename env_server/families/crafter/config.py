"""Family options of ``crafter`` (``GameOptions.kwargs``): checked options into ``CrafterConfig``.

The schema (keys, kinds, ranges, defaults) is the manifest's ``OPTIONS``; ``Family.check_options``
applies it first. This module adds what a schema cannot say:

- ``unique_items``, ``precise_location``, ``skip_items`` and ``edge_only_items`` belong to the
  ``current`` text format: another value with the ``legacy`` format is an error;
- ``balrog_source`` (a BALROG checkout, a server file): the text then comes from that
  checkout's own code (``balrog_text.py``) and ``text_format`` may not be given. The
  orchestrator sets it for runs with ``agent.protocol=balrog``.

Every error is a ``GameOptionError`` naming the option.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from env_server.families.crafter.manifest import (
    DEFAULT_AREA,
    DEFAULT_MAX_STEPS,
    DEFAULT_SIZE,
    TEXT_FORMATS,
)
from env_server.families.crafter.text import TextOptions
from env_server.game import GameOptionError

__all__ = ["DEFAULT_MAX_STEPS", "TEXT_FORMATS", "CrafterConfig", "parse_kwargs"]


@dataclass(frozen=True)
class CrafterConfig:
    """Validated family options (see the manifest's ``OPTIONS`` for meanings and ranges)."""

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


def parse_kwargs(kwargs: dict[str, Any], task: str) -> CrafterConfig:
    """``kwargs`` checked by the manifest's schema (``CrafterFamily.check_options``) as a
    ``CrafterConfig``.

    Raises:
        GameOptionError: a current-format option with ``text_format`` legacy, or
            ``text_format`` together with ``balrog_source``.
    """
    del task
    balrog_source = kwargs.get("balrog_source")
    if balrog_source is not None and "text_format" in kwargs:
        raise GameOptionError("text_format: not with balrog_source (the BALROG checkout's own "
                              "code writes the text)")
    text_format = kwargs.get("text_format", TEXT_FORMATS[0])
    defaults = TextOptions()
    text = TextOptions(
        text_format=text_format,
        unique_items=kwargs.get("unique_items", defaults.unique_items),
        precise_location=kwargs.get("precise_location", defaults.precise_location),
        skip_items=tuple(kwargs.get("skip_items", ())),
        edge_only_items=tuple(kwargs.get("edge_only_items", ())),
    )
    if text_format == "legacy" and balrog_source is None:
        for name in ("unique_items", "precise_location", "skip_items", "edge_only_items"):
            if getattr(text, name) != getattr(defaults, name):
                raise GameOptionError(
                    f"{name}: needs text_format=current (the legacy format has no options)"
                )
    return CrafterConfig(text=text, size=kwargs.get("size", DEFAULT_SIZE),
                         area=kwargs.get("area", DEFAULT_AREA),
                         max_episode_steps=kwargs.get("max_episode_steps", DEFAULT_MAX_STEPS),
                         balrog_source=balrog_source)
