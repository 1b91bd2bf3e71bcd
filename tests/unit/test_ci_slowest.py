"""``.ci/slowest.py``: what ``.ci/run`` prints when its wall time passed the budget."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / ".ci" / "slowest.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("moria_ci_slowest", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3">
<testcase classname="tests.unit.test_a" name="test_quick" time="0.010" />
<testcase classname="tests.integration.test_b" name="test_slow[x]" time="42.500" />
<testcase classname="tests.integration.test_c" name="test_middle" time="7.250">
<skipped /></testcase>
</testsuite></testsuites>
"""


def test_the_warning_names_the_slowest_stages_and_tests(tmp_path: Path) -> None:
    stages = tmp_path / "stages"
    stages.write_text("faketime          0 s\ninstall         700 s\ntest           1500 s\n"
                      "images         1400 s  FAILED\nkube-test        40 s\n")
    junit = tmp_path / "junit.xml"
    junit.write_text(JUNIT)
    out = subprocess.run([sys.executable, str(SCRIPT), "--budget", "3600", "--total", "3900",
                          "--stages", str(stages), "--junit", str(junit)],
                         capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert "3900 s, past its budget of 3600 s (300 s over)" in lines[0]
    assert [line.split()[1] for line in lines[1:4]] == ["test", "images", "install"]
    tests = [line for line in lines if line.strip().endswith(("test_slow[x]", "test_middle",
                                                              "test_quick"))]
    assert tests[0].split() == ["42.5", "s", "tests.integration.test_b::test_slow[x]"]
    assert tests[1].split()[0] == "7.2"


def test_missing_or_broken_junit_is_said_not_raised(tmp_path: Path) -> None:
    module = _module()
    assert module.read_tests(tmp_path / "absent.xml") == []
    broken = tmp_path / "broken.xml"
    broken.write_text("<testsuites><testcase time=")
    assert module.read_tests(broken) == []
    text = module.report(3600, 3700, [("test", 2000)], [])
    assert "no test timings" in text and "stage test" in text
