"""Markdown tables of measured figures, generated from ``benchmarks/results/*.json``.

Measured figures live in machine-readable result files, each with what produced it (the
command, the machine, the commit, the date, the load), never in prose. A document shows one
as a table between two marker comments::

    <!-- table:workload_a -->
    (generated: the table, then one line naming its source)
    <!-- /table:workload_a -->

``python -m benchmarks.tables`` rewrites every such block in ``README.md`` and ``docs/**/*.md``
from its result file; ``--check`` changes nothing and exits 1 when a block differs from what
its file gives, or names a file that does not exist (``make test`` runs it, as it checks
``moria/families.json``).

A result file is one JSON object: ``name``, ``title``, ``command``, ``machine``, ``commit``,
``date``, ``load`` (each may be null when not recorded), ``columns`` (the header) and ``rows``
(lists of cells, as text).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"

BLOCK = re.compile(r"(<!-- table:(?P<name>[a-z0-9_]+) -->\n)(?P<body>.*?)"
                   r"(<!-- /table:(?P=name) -->)", re.DOTALL)


def documents(root: Path = REPO) -> list[Path]:
    """The Markdown files whose tables are generated: the README and every page under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def load(name: str, results: Path = RESULTS) -> dict[str, Any]:
    path = results / f"{name}.json"
    if not path.is_file():
        shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
        raise FileNotFoundError(f"no result file {shown}")
    data = json.loads(path.read_text(encoding="utf-8"))
    columns, rows = data.get("columns"), data.get("rows")
    if not isinstance(columns, list) or not isinstance(rows, list):
        raise ValueError(f"{path}: needs a list of columns and a list of rows")
    for row in rows:
        if len(row) != len(columns):
            raise ValueError(f"{path}: a row has {len(row)} cells for {len(columns)} "
                             f"columns: {row}")
    return data


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def render(data: dict[str, Any]) -> str:
    """The Markdown of one result: its table, then a line saying where it comes from."""
    lines = ["| " + " | ".join(_cell(c) for c in data["columns"]) + " |",
             "|" + "---|" * len(data["columns"])]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in data["rows"]]
    source = [f"`benchmarks/results/{data['name']}.json`"]
    if data.get("command"):
        source.append(f"`{data['command']}`")
    for key, label in (("machine", ""), ("commit", "at "), ("date", ""), ("load", "load: ")):
        if data.get(key):
            source.append(f"{label}{data[key]}")
    return "\n".join(lines) + "\n\nSource: " + "; ".join(source) + ".\n"


def regenerate(text: str, results: Path = RESULTS) -> str:
    """``text`` with every table block rendered again from its result file."""
    def block(match: re.Match[str]) -> str:
        return match.group(1) + render(load(match.group("name"), results)) + match.group(4)
    return BLOCK.sub(block, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tables",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 when a generated table is not current")
    args = parser.parse_args(argv)
    stale: list[str] = []
    used: set[str] = set()
    for path in documents():
        text = path.read_text(encoding="utf-8")
        used.update(m.group("name") for m in BLOCK.finditer(text))
        try:
            new = regenerate(text)
        except (FileNotFoundError, ValueError) as exc:
            print(f"{path.relative_to(REPO)}: {exc}", file=sys.stderr)
            return 1
        if new != text:
            stale.append(str(path.relative_to(REPO)))
            if not args.check:
                path.write_text(new, encoding="utf-8")
    unused = sorted(p.stem for p in RESULTS.glob("*.json") if p.stem not in used)
    if unused:
        print("result files no document shows: " + ", ".join(unused), file=sys.stderr)
        return 1
    if stale and args.check:
        print("generated tables not current (run `python -m benchmarks.tables`): "
              + ", ".join(stale), file=sys.stderr)
        return 1
    for name in stale:
        print(f"rewrote the tables of {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
