"""benchmarks/concurrent_episodes.py (P2): a small real run through a local stack sized as
``moria eval`` sizes it, against real fake-model server processes, and the CLI's refusals."""

from __future__ import annotations

import pytest

from benchmarks import concurrent_episodes
from orchestrator.plan.spec import load_spec, local_server_counts


async def test_a_small_run_plays_every_episode_on_the_auto_sized_stack() -> None:
    figures = await concurrent_episodes.run(6, 0.02)
    auto = local_server_counts(load_spec(None, ["client.client_name=vllm",
                                                "client.base_url=http://127.0.0.1:1/v1",
                                                "eval.num_workers=6"]))
    assert (figures["env_servers"], figures["policy_servers"]) == auto
    assert figures["episodes"] == 6 and figures["latency_s"] == 0.02
    # every episode answered each of its steps: 6 episodes of at least one step each
    assert figures["model_calls"] >= 6
    assert figures["ideal_s"] == pytest.approx(figures["longest_episode_steps"] * 0.02,
                                               abs=1e-3)
    # no step is answered before the model's latency: the wall can never beat the ideal
    assert figures["wall_s"] >= figures["ideal_s"]
    assert figures["wall_over_ideal"] == pytest.approx(figures["wall_s"] / figures["ideal_s"],
                                                       abs=1e-2)


@pytest.mark.parametrize(("argv", "message"), [
    (["--episodes", "0"], "--episodes must all be >= 1, got [0]"),
    (["--episodes", "64", "-3"], "--episodes must all be >= 1, got [64, -3]"),
    (["--latency", "0"], "--latency must be > 0, got 0.0"),
])
def test_the_cli_refuses_counts_and_latencies_it_cannot_measure(
        argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        concurrent_episodes.main(argv)
    assert exit_.value.code == 2 and message in capsys.readouterr().err
