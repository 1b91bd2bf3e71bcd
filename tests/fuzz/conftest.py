"""Hypothesis profiles of the fuzzers: ``--hypothesis-profile=fuzz-debug`` skips shrinking
(a failure is reported as generated, at once) when hunting a bug by hand.

With ``MORIA_FUZZ_REPORT=FILE`` each fuzz test appends one JSON line to ``FILE`` when it ends:
its node id, outcome, examples run and its control calls' ``LatencyTally`` (what
``benchmarks/fuzz.py`` reports)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import Phase, settings

from tests.fuzz import harness

settings.register_profile("fuzz-debug", phases=[Phase.explicit, Phase.generate])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    harness.TALLY = harness.LatencyTally()
    outcome = "failed"
    try:
        yield
        outcome = "passed"
        return None
    finally:
        _report(item.nodeid, outcome, harness.TALLY)


def _report(nodeid: str, outcome: str, tally: harness.LatencyTally) -> None:
    path = os.environ.get("MORIA_FUZZ_REPORT")
    if not path:
        return
    line: dict[str, Any] = {"test": nodeid, "outcome": outcome, "examples": tally.examples,
                            "control_calls": tally.calls,
                            "control_worst_ms": round(1000 * tally.worst_s, 1),
                            "control_over_goal": tally.over_goal,
                            "goal_ms": 1000 * harness.CONTROL_GOAL_S}
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")
