"""Registry of game families: family name -> ``module:Class`` (imported lazily).

Heavy game packages are imported only when a family is first used. Adding a family means adding
one line here; nothing else dispatches on family names.
"""

from __future__ import annotations

import importlib

from env_server.game import Family

FAMILIES: dict[str, str] = {
    "babyai": "env_server.families.babyai:BabyAIFamily",
    "babaisai": "env_server.families.babaisai:BabaIsAIFamily",
    "crafter": "env_server.families.crafter:CrafterFamily",
    "minihack": "env_server.families.nethack:MiniHackFamily",
    "multigrid": "env_server.families.multigrid:MultigridFamily",
    "nle": "env_server.families.nethack:NLEFamily",
    "pettingzoo": "env_server.families.pettingzoo:PettingZooFamily",
    "textworld": "env_server.families.textworld:TextWorldFamily",
}


class UnknownFamilyError(KeyError):
    """An unknown family name; the message lists the registered ones."""

    def __str__(self) -> str:
        return (f"unknown env family {self.args[0]!r}; available: "
                + ", ".join(sorted(FAMILIES)))


def load_family(name: str) -> Family:
    """Import and instantiate the family ``name``. Raises UnknownFamilyError."""
    target = FAMILIES.get(name)
    if target is None:
        raise UnknownFamilyError(name)
    module_name, _, class_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    family: Family = cls()
    return family
