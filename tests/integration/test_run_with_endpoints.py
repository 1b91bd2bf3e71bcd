"""``moria eval`` against running servers (``endpoints``), as under Compose or Kubernetes."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from orchestrator.core.runner import run_evaluation
from orchestrator.plan.spec import load_spec
from tests.support.servers import env_server, policy_server


async def test_endpoints_are_used_and_versions_recorded(tmp_path: Path) -> None:
    async with env_server() as env, policy_server() as pol:
        spec = load_spec(None, [
            "agent.type=oracle", "eval.num_episodes.babyai=1", f"eval.output_dir={tmp_path}",
            f"endpoints.env.babyai=[{env.target}]", f"endpoints.policy=[{pol.target}]"])
        outcome = await run_evaluation(spec, console=Console(quiet=True), show_progress=False)
    assert outcome.ran == 5 and outcome.verdict is not None and outcome.verdict.succeeded
    assert outcome.summary["average_progress"] == 100.0
    assert not (tmp_path / "logs").exists()  # no local stack was started
    episode = json.loads(next(tmp_path.rglob("*_run_00.json")).read_text())
    assert episode["versions"]["env.minigrid"] == "3.2.0"
    assert episode["versions"]["api"] == "moria.v1"
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["spec"]["endpoints"]["env"]["babyai"] == [env.target]


async def test_partial_endpoints_are_rejected(tmp_path: Path) -> None:
    import pytest

    from orchestrator.core.runner import PreflightError

    spec = load_spec(None, [f"eval.output_dir={tmp_path}", "endpoints.policy=[127.0.0.1:1]"])
    with pytest.raises(PreflightError, match=r"endpoints\.env\.<family>"):
        await run_evaluation(spec, console=Console(quiet=True), show_progress=False)


def _refused_target() -> str:
    """A loopback address nothing listens on (a port bound, then let go)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


async def test_an_endpoint_that_does_not_answer_stops_the_run_at_preflight(
        tmp_path: Path) -> None:
    import pytest

    from orchestrator.core.runner import PreflightError

    async with policy_server() as pol:
        down = _refused_target()
        spec = load_spec(None, [
            "agent.type=random", "eval.num_episodes.babyai=1", f"eval.output_dir={tmp_path}",
            f"endpoints.env.babyai=[{down}]", f"endpoints.policy=[{pol.target}]"])
        with pytest.raises(PreflightError) as err:
            await run_evaluation(spec, console=Console(quiet=True), show_progress=False)
    message = str(err.value)
    assert message.startswith(f"the env server for babyai at {down} did not answer the "
                              "preflight (UNAVAILABLE: "), message
    assert message.endswith("start it or fix endpoints.env.babyai") and "\n" not in message
    assert not list(tmp_path.rglob("*_run_00.json"))  # no episode was played
