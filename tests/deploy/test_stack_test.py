"""The pure parts of deploy/stack_test.py (the stack itself runs in `make stack-test`)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

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


def _write_run(out: Path, end_reasons: list[str], progression: float) -> None:
    from moria.records import EpisodeRecord
    from orchestrator.store.episodes import write_episode

    for index, reason in enumerate(end_reasons):
        write_episode(out, EpisodeRecord(run_id="r", env="babyai", task="BabyAI-GoTo-v0",
                                         episode_index=index, seed=7, end_reason=reason,
                                         progression=progression))
    (out / "summary.json").write_text('{"average_progress": 50.0, "standard_error": 0.0}')


def test_results_check_passes_a_scored_run(stack_test, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _write_run(tmp_path, ["terminated", "truncated"], 1.0)
    line = stack_test.check_results(tmp_path, "oracle", min_progress=100.0)
    assert line.startswith("oracle: 2 episodes scored")


@pytest.mark.parametrize(("reasons", "progression", "min_progress", "says"), [
    (["terminated", "env_error"], 1.0, None, "not scored"),
    (["terminated", "terminated"], 0.5, 100.0, "progression below"),
    ([], 1.0, None, "no episode files"),
])
def test_results_check_fails_what_a_user_must_see(  # type: ignore[no-untyped-def]
        stack_test, tmp_path: Path, reasons: list[str], progression: float,
        min_progress: float | None, says: str) -> None:
    _write_run(tmp_path, reasons, progression)
    with pytest.raises(stack_test.StackTestError, match=says):
        stack_test.check_results(tmp_path, "eval", min_progress=min_progress)
