"""Dotted ``key=value`` overrides in Hydra's override syntax.

- ``a.b.c=value`` sets a nested key (``+a.b=value`` and ``++a.b=value`` are accepted too);
- values are parsed as YAML flow scalars: ``1``, ``0.5``, ``true``, ``null``, ``[a,b]``,
  ``{k: v}``, ``'quoted'``; anything else stays a string (``babyai-minihack``,
  ``BabyAI-MixedTrainLocal-v0/goto``).
"""

from __future__ import annotations

import copy
from typing import Any

import yaml


class OverrideError(ValueError):
    """A malformed override; the message shows the expected form."""


def parse_value(text: str) -> Any:
    """Parse one override value (YAML flow syntax, falling back to the raw string)."""
    if text == "":
        return ""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of ``data`` with every override applied in order.

    Raises OverrideError for items without ``=``, empty keys, or a key that descends into a
    non-mapping value.
    """
    out = copy.deepcopy(data)
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.lstrip("+").strip()
        if not sep or not key or any(not part for part in key.split(".")):
            raise OverrideError(f"bad override {item!r}; expected key.path=value, e.g. "
                                "eval.num_episodes.babyai=2")
        node = out
        parts = key.split(".")
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                prefix = ".".join(parts[: i + 1])
                raise OverrideError(f"cannot set {key!r}: {prefix!r} is a value, not a section")
            node = child
        node[parts[-1]] = parse_value(raw)
    return out
