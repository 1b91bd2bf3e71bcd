"""``python -m agent_server.strategies [--check]``: write (or check) ``moria/strategies.json``
from the facts the registered strategy classes declare (``registry_facts``)."""

from __future__ import annotations

import argparse

from agent_server.strategies import registry_facts
from moria.generated import write_or_check
from moria.strategies import TABLE_PATH, table_text


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check`` compare) ``moria/strategies.json``. Returns the exit status:
    1 when ``--check`` finds the file missing or not current."""
    parser = argparse.ArgumentParser(prog="python -m agent_server.strategies",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when moria/strategies.json is not current")
    args = parser.parse_args(argv)
    return write_or_check(TABLE_PATH, table_text(registry_facts()),
                          "python -m agent_server.strategies", check=args.check)
