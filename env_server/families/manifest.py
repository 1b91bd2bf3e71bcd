"""Family discovery, and the generated table ``moria/families.json``.

Every package under ``env_server/families/`` that has a ``manifest`` module is a family folder;
its ``MANIFESTS`` list declares the families it hosts (``moria.families.FamilyManifest``).
Nothing else registers a family.

``python -m env_server.families`` writes ``moria/families.json`` from the manifests;
``--check`` exits 1 (saying what differs) when the file is not what they give.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from moria.families import TABLE_PATH, FamilyManifest, table_text
from moria.generated import write_or_check


def discover() -> list[FamilyManifest]:
    """Every family's manifest, from the family folders' ``manifest`` modules (cheap: a
    manifest imports no game package).

    Raises ValueError when two manifests declare the same name."""
    import env_server.families as package

    found: dict[str, FamilyManifest] = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if not info.ispkg:
            continue
        try:
            module = importlib.import_module(f"{package.__name__}.{info.name}.manifest")
        except ModuleNotFoundError as exc:
            if exc.name == f"{package.__name__}.{info.name}.manifest":
                continue  # a helper package, not a family folder
            raise
        for manifest in getattr(module, "MANIFESTS", []):
            if manifest.name in found:
                raise ValueError(f"family {manifest.name!r} is declared twice")
            found[manifest.name] = manifest
    return list(found.values())


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check`` compare) ``moria/families.json``."""
    parser = argparse.ArgumentParser(prog="python -m env_server.families",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when moria/families.json is not current")
    args = parser.parse_args(argv)
    return write_or_check(TABLE_PATH, table_text(discover()), "python -m env_server.families",
                          check=args.check)


if __name__ == "__main__":
    sys.exit(main())
