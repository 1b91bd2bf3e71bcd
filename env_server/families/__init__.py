"""Registry of game families: family name -> ``module:Class`` (imported lazily).

Families are discovered: each family folder's ``manifest.py`` declares the families it hosts
(``env_server.families.manifest``), so adding a family touches only its folder (and the
generated ``moria/families.json``). Heavy game packages are imported only when a family is
first used.
"""

from __future__ import annotations

import importlib

from env_server.families.manifest import discover
from env_server.game import Family
from moria.families import FamilyManifest

#: family name -> its manifest, from the family folders.
MANIFESTS: dict[str, FamilyManifest] = {m.name: m for m in discover()}
Family.manifests = MANIFESTS  # where each family reads its options schema
#: family name -> ``module:Class`` of its ``Family``, from the manifests.
FAMILIES: dict[str, str] = {name: m.entry_point for name, m in MANIFESTS.items()}


class UnknownFamilyError(KeyError):
    """An unknown family name; the message lists the registered ones."""

    def __str__(self) -> str:
        return (f"unknown env family {self.args[0]!r}; available: "
                + ", ".join(sorted(FAMILIES)))


def manifest_of(name: str) -> FamilyManifest:
    """The manifest of family ``name``. Raises UnknownFamilyError."""
    manifest = MANIFESTS.get(name)
    if manifest is None:
        raise UnknownFamilyError(name)
    return manifest


def load_family(name: str) -> Family:
    """Import and instantiate the family ``name``. Raises UnknownFamilyError."""
    target = FAMILIES.get(name)
    if target is None:
        raise UnknownFamilyError(name)
    module_name, _, class_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    family: Family = cls()
    return family
