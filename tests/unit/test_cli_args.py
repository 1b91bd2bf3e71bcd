"""Command-line parsing of ``moria``: flags may sit between KEY=VALUE overrides."""

from __future__ import annotations

import pytest

from orchestrator.apps import cli


def test_overrides_after_a_flag_are_kept(capsys: pytest.CaptureFixture[str]) -> None:
    # the bad value comes after --vlm: it must still reach the spec (and be rejected there)
    code = cli.main(["eval", "envs.names=babyai", "--vlm", "eval.num_workers=0"])
    assert code == 2
    err = capsys.readouterr().err
    assert "eval.num_workers" in err


def test_vlm_sets_one_image_unless_overridden() -> None:
    args = cli.build_parser().parse_args(["eval", "--vlm"])
    assert cli._vlm_overrides(args) == ["agent.max_image_history=1"]
    args = cli.build_parser().parse_args(["eval"])
    assert cli._vlm_overrides(args) == []


def test_unknown_flags_are_still_usage_errors() -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["eval", "a=1", "--bogus"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        cli.main(["tasks", "x=1"])
