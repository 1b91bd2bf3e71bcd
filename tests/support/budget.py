"""``--max-test-seconds S``: the run fails when any test took longer than ``S`` seconds.

``make test-fast`` (the tier run while working) passes it, so a test that would make the tier
slow fails a check rather than creeping in: such a test belongs in tests/integration. The time
of a test is its setup, call and teardown together (pytest's report durations), as measured on
whichever pytest-xdist worker ran it; the controller adds them up and judges at the end. The
bound is generous against the tier's tests (most take milliseconds) so that a busy machine does
not fail it; the offenders are listed slowest first.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

OPTION = "--max-test-seconds"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(OPTION, type=float, default=None, metavar="S",
                     help="fail the run when a test (setup + call + teardown) takes longer "
                          "than S seconds (make test-fast)")


class TestBudget:
    """The per-test durations of this run and the bound they are held to (seconds)."""

    __test__ = False  # not a test class, whatever its name

    def __init__(self, limit: float):
        self.limit = limit
        self.seconds: defaultdict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid] += report.duration

    def over(self) -> list[tuple[str, float]]:
        """(node id, seconds) of the tests past the bound, slowest first."""
        return sorted(((n, s) for n, s in self.seconds.items() if s > self.limit),
                      key=lambda item: -item[1])

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.over() and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        over = self.over()
        if not over:
            return
        terminalreporter.section(f"tests over {self.limit:g} s ({OPTION})", red=True)
        for nodeid, seconds in over:
            terminalreporter.line(f"{seconds:7.1f} s  {nodeid}")
        terminalreporter.line("make it faster, or move it where slow tests belong "
                              "(tests/integration): this tier runs while working")


def pytest_configure(config: pytest.Config) -> None:
    limit = config.getoption(OPTION)
    if limit is None or hasattr(config, "workerinput"):  # judged on the controller only
        return
    config.pluginmanager.register(TestBudget(limit), "moria-test-budget")
