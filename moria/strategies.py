"""What every player (``agent.type``) is, as its strategy class declares it: the generated table.

Each strategy class in ``agent_server/strategies/`` declares ``calls_model`` (its turns take a
model-call slot and it needs a backend), ``reads_tensors`` (it reads the env's tensor
observation, so its env session is opened with ``include_tensors``) and ``keeps_images`` (it can
keep image frames in its history: a VLM-capable prompting strategy). A running policy server
serves them in ``PolicyService.GetInfo`` (``strategy_info``).

Everything that has no policy server at hand (the orchestrator, the workers, ``moria.config``)
reads the same facts from ``moria/strategies.json``, generated from the strategy registry by
``python -m agent_server.strategies`` (``--check`` in ``make checks`` keeps it current), so
``moria`` never imports ``agent_server``. :func:`strategy_facts` loads that table.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

#: The generated table (package data of ``moria``).
TABLE_PATH = Path(__file__).with_name("strategies.json")


@dataclass(frozen=True)
class StrategyFacts:
    """One registered strategy's facts: ``name`` (its ``agent.type``), ``calls_model``,
    ``reads_tensors`` and ``keeps_images`` (see the module docstring)."""

    name: str
    calls_model: bool
    reads_tensors: bool
    keeps_images: bool

    def as_json(self) -> dict[str, Any]:
        """The JSON form stored in ``strategies.json``."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StrategyFacts:
        """Parse :meth:`as_json`'s form. Raises KeyError on a missing key and TypeError on a
        value that is not a string name or a JSON boolean."""
        name = data["name"]
        flags = {key: data[key] for key in ("calls_model", "reads_tensors", "keeps_images")}
        if not isinstance(name, str) or not all(isinstance(v, bool) for v in flags.values()):
            raise TypeError(f"malformed strategy entry {data!r}")
        return cls(name=name, **flags)


def table_text(facts: Iterable[StrategyFacts]) -> str:
    """The ``strategies.json`` text for ``facts`` (sorted by name, stable formatting)."""
    rows = [f.as_json() for f in sorted(facts, key=lambda f: f.name)]
    return json.dumps({"strategies": rows}, indent=1, sort_keys=True) + "\n"


@functools.cache
def strategy_facts() -> dict[str, StrategyFacts]:
    """Every registered strategy's facts, by ``agent.type``, from the generated table.

    Raises FileNotFoundError / ValueError / KeyError / TypeError when the table is missing or
    malformed (regenerate it with ``python -m agent_server.strategies``)."""
    data = json.loads(TABLE_PATH.read_text(encoding="utf-8"))
    return {row["name"]: StrategyFacts.from_json(row) for row in data["strategies"]}
