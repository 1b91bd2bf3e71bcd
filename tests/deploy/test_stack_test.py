"""The pure parts of deploy/stack_test.py (the stack itself runs in `make stack-test`)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from tests.deploy.dockerfiles import REPO


@pytest.fixture(scope="module")
def stack_test():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("moria_stack_test",
                                                  REPO / "deploy" / "stack_test.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["moria_stack_test"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_mount_points_and_engine_files_are_not_writes(stack_test) -> None:  # type: ignore[no-untyped-def]
    diff = "C /etc\nA /etc/moria\nA /etc/moria/run.yaml\nC /etc/hosts\nA /data/runs/x.json\n"
    assert stack_test.unexpected_changes(diff, ["/data", "/etc/moria/run.yaml", "/tmp"]) == []


def test_writes_outside_the_mounts_are_reported(stack_test) -> None:  # type: ignore[no-untyped-def]
    diff = "C /etc\nA /etc/passwd2\nC /opt\nA /opt/moria/data/x.lock\nD /etc/moria\n"
    assert stack_test.unexpected_changes(diff, ["/etc/moria/run.yaml", "/tmp"]) == [
        "A /etc/passwd2", "C /opt", "A /opt/moria/data/x.lock", "D /etc/moria"]


def test_the_stack_size_counts_replicas_and_leaves_out_profiles(stack_test) -> None:  # type: ignore[no-untyped-def]
    services = {"env-a": {}, "agent": {"deploy": {"mode": "replicated", "replicas": 2}},
                "orchestrator": {"deploy": {"resources": {}}}, "eval": {"profiles": ["run"]}}
    assert stack_test.expected_containers(services) == 4
