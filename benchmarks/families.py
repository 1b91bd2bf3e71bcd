"""Steps/s of one env family's game, in-process vs through an Env server (part of ``make bench``).

Shared by the family benchmarks: a game is driven by random actions from its action list, or,
for free-text games (empty action list, e.g. TextWorld), by the oracle's ``expert_action``.
Episodes restart with seeds taken in turn from ``seeds``, so a family with built data (TextWorld
games) only plays what is built. The server figures run the game in an Env server process on a
unix socket, as the local stack does, with 1 or more concurrent sessions from this process.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from moria import aio

AGENT = "agent_0"


def _choose(names: Sequence[str], info: dict[str, Any], rng: random.Random) -> str:
    """A random action name, or the oracle's hint for free-text games."""
    return rng.choice(names) if names else str(info["expert_action"])


def inprocess_steps_per_s(family_name: str, task: str, steps: int,
                          seeds: Sequence[int] = (0, 1, 2, 3)) -> float:
    """The family's game called directly in this process (text every step)."""
    from env_server.families import load_family
    from env_server.game import GameOptions

    rng = random.Random(0)
    oracle = _free_text(family_name, task, seeds[0])
    game = load_family(family_name).open(task, GameOptions(seed=seeds[0], oracle=oracle))
    names = [a.name for a in game.actions(AGENT)][:8]
    view = game.reset()[AGENT]
    episode = 0
    start = time.perf_counter()
    for _ in range(steps):
        result = game.step({AGENT: _choose(names, view.info, rng)})
        view = result.transitions[AGENT].view
        if result.done:
            episode += 1
            view = game.reset(seeds[episode % len(seeds)])[AGENT]
    elapsed = time.perf_counter() - start
    game.close()
    return steps / elapsed


def _free_text(family_name: str, task: str, seed: int) -> bool:
    """True when the game has no action list (any text is an action): play the oracle."""
    from env_server.families import load_family
    from env_server.game import GameOptions

    game = load_family(family_name).open(task, GameOptions(seed=seed))
    try:
        return not game.actions(AGENT)
    finally:
        game.close()


async def _session_worker(target: str, family_name: str, task: str, steps: int,
                          seeds: Sequence[int], first: int, oracle: bool) -> int:
    from moria.clients import EnvClient
    from moria.codecs import dict_from_struct, text_action
    from moria.env.v1 import env_service_pb2 as env_pb

    rng = random.Random(first)
    session = EnvClient(target).session()
    opened = await session.open(env_pb.OpenRequest(task=f"{family_name}:{task}",
                                                   seed=seeds[first % len(seeds)], oracle=oracle))
    names = [a.name for a in opened.agents[AGENT].action_space.actions][:8]
    info = dict_from_struct(opened.agents[AGENT].observation.info)
    done, episode = 0, first
    while done < steps:
        response = await session.step({AGENT: text_action(_choose(names, info, rng))})
        done += 1
        info = dict_from_struct(response.agents[AGENT].observation.info)
        if response.HasField("episode_end"):
            episode += 1
            reset = await session.reset(seeds[episode % len(seeds)])
            info = dict_from_struct(reset.agents[AGENT].observation.info)
    await session.close()
    return done


async def server_steps_per_s(family_name: str, task: str, steps: int, sessions: int,
                             seeds: Sequence[int] = (0, 1, 2, 3)) -> float:
    """Through an Env server process hosting ``family_name``, ``sessions`` at once."""
    from orchestrator.core.stack import LocalStack

    oracle = _free_text(family_name, task, seeds[0])
    with tempfile.TemporaryDirectory() as logs:
        async with LocalStack([family_name], Path(logs), with_agent=False) as stack:
            # warm up: the channel, the server's imports, worker processes
            await _session_worker(stack.env_target, family_name, task, 3, seeds, 0, oracle)
            start = time.perf_counter()
            counts = await asyncio.gather(*(
                _session_worker(stack.env_target, family_name, task, steps // sessions, seeds,
                                i, oracle) for i in range(sessions)))
            return sum(counts) / (time.perf_counter() - start)


def compare(family_name: str, task: str, steps: int, seeds: Sequence[int] = (0, 1, 2, 3),
            sessions: int = 4) -> dict[str, float]:
    """In-process vs server (1 and ``sessions`` sessions) steps/s, and their ratios."""
    local = inprocess_steps_per_s(family_name, task, steps, seeds)
    one = aio.run(server_steps_per_s(family_name, task, steps, 1, seeds))
    many = aio.run(server_steps_per_s(family_name, task, steps, sessions, seeds))
    return {"task": task, "in_process": round(local, 1), "env_server_1_session": round(one, 1),
            f"env_server_{sessions}_sessions": round(many, 1),
            "remote_1_over_in_process": round(one / local, 3),
            f"remote_{sessions}_over_in_process": round(many / local, 3)}
