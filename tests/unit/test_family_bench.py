"""Smoke test of the family benchmark (benchmarks/families.py) against a real Env server
process: the server figures open every session before the clock starts, play exactly the steps
asked (resetting ended episodes), and report the opening cost apart. Never checks speed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from benchmarks import families
from moria.clients import EnvClient
from orchestrator.core.stack import LocalStack

TASK = "BabyAI-MixedTrainLocal-v0/goto"
#: Steps of ``test_compare_reports_the_opening_cost_apart``: enough that the client's and the
#: server's CPU together span several 10 ms clock ticks (a round trip costs them about 0.1-0.25
#: ms together here, ``benchmarks/results/grpc_roundtrip.json``); with 40 steps both could
#: read 0 ticks, and did once in CI.
STEPS = 400


def test_sessions_are_all_open_before_the_timed_steps(tmp_path: Path) -> None:
    async def scenario() -> tuple[int, list[int], list[int]]:
        async with LocalStack(["babyai"], tmp_path, with_agent=False) as stack:
            opened = await asyncio.gather(*(
                families._open_session(stack.env_target, "babyai", TASK, (0, 1), i, False)
                for i in range(3)))
            held = (await EnvClient(stack.env_target).get_info()).active_sessions
            # 70 steps is more than BabyAI's 64-step limit for goto: at least one reset each
            counts = list(await asyncio.gather(*(families._play(o, 70, (0, 1))
                                                 for o in opened)))
            for o in opened:
                await o.session.close()
            return held, counts, [o.episode for o in opened]

    held, counts, episodes = asyncio.run(scenario())
    assert held == 3
    assert counts == [70, 70, 70]
    assert all(episode > first for episode, first in zip(episodes, range(3), strict=True))


@pytest.mark.slow
def test_compare_reports_the_opening_cost_apart() -> None:
    figures = families.compare("babyai", TASK, STEPS, seeds=(0, 1), sessions=2)
    assert set(figures) == {
        "task", "in_process", "env_server_1_session", "env_server_2_sessions",
        "remote_1_over_in_process", "remote_2_over_in_process", "session_open_s",
        "open_2_sessions_s", "cpu_us_per_step"}
    assert figures["session_open_s"] > 0 and figures["open_2_sessions_s"] > 0
    assert figures["env_server_1_session"] > 0 and figures["env_server_2_sessions"] > 0
    cpu = figures["cpu_us_per_step"]
    assert cpu["in_process"] > 0
    for sessions in ("env_server_1_session", "env_server_2_sessions"):
        # BabyAI runs inside the server process: no game worker
        assert set(cpu[sessions]) == {"client", "server", "game_workers"}
        # psutil reads CPU time in clock ticks (10 ms), each process rounded apart: either may
        # read 0, their sum (STEPS round trips) is several ticks
        assert cpu[sessions]["client"] >= 0 and cpu[sessions]["server"] >= 0
        assert cpu[sessions]["client"] + cpu[sessions]["server"] > 0
        assert cpu[sessions]["game_workers"] == 0


def test_cpu_per_step_is_split_by_process_role() -> None:
    before = {1: ("client", 1.0), 2: ("server", 2.0), 3: ("game_workers", 0.5)}
    after = {1: ("client", 1.5), 2: ("server", 3.0), 3: ("game_workers", 0.5),
             4: ("game_workers", 0.25)}  # a worker started between the readings
    assert families.cpu_us_per_step(before, after, 1000) == {
        "client": 500.0, "server": 1000.0, "game_workers": 250.0}
    assert families.process_role(["python", "-c", "from multiprocessing.forkserver import "
                                  "main; main(3, 4)"], is_self=False) == "game_workers"
    assert families.process_role(["python", "-m", "env_server", "serve"],
                                 is_self=False) == "server"
    assert families.process_role(["anything"], is_self=True) == "client"
