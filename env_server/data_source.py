"""A family's prebuilt data source (``env_server.prepare`` explains them): the type each
family folder's ``prepare.py`` builds its ``SOURCES`` from. It lives apart from
``env_server.prepare``, which discovers the families, so that a family folder never imports a
module that imports the families."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class DataSource:
    """One kind of prebuilt data of a family (see the module docstring).

    ``name``: unique over all families (``textworld``, ``boxoban``); the manifest's ``prepare``
    entry. ``description``: one line for ``moria prepare``'s summary. ``how_to_fix``: what to do
    when a build fails (install an extra, point an option at prebuilt data). ``location``: the
    folder the items go to.
    """

    name: str
    description: str
    how_to_fix: str
    location: Callable[[], Path]
    all_items: Callable[[], list[str]]
    items_for: Callable[[str, int, Mapping[str, Any]], list[str]]
    is_built: Callable[[str], bool]
    build: Callable[[str], Path]
