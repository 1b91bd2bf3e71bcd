"""Steps/s of one env family's game, in-process vs through an Env server (part of ``make bench``).

Shared by the family benchmarks: a game is driven by random actions from its action list, or,
for free-text games (empty action list, e.g. TextWorld), by the oracle's ``expert_action``.
Episodes restart with seeds taken in turn from ``seeds``, so a family with built data (TextWorld
games) only plays what is built. The server figures run the game in an Env server process on a
unix socket, as the local stack does, with 1 or more concurrent sessions from this process.
Both paths open their games before the clock starts and reset them inside it, so the steps/s
ratio is the per-step cost; opening sessions is timed as its own figure.
"""

from __future__ import annotations

import asyncio
import random
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
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


@dataclass
class _OpenSession:
    """A session opened on an Env server, with what its first steps need."""

    session: Any
    names: list[str]
    info: dict[str, Any]
    rng: random.Random
    episode: int


async def _open_session(target: str, family_name: str, task: str, seeds: Sequence[int],
                        first: int, oracle: bool) -> _OpenSession:
    """Open a session on the game with seed ``seeds[first]``; its rng is seeded with ``first``."""
    from moria.clients import EnvClient
    from moria.codecs import dict_from_struct
    from moria.env.v1 import env_service_pb2 as env_pb

    session = EnvClient(target).session()
    opened = await session.open(env_pb.OpenRequest(task=f"{family_name}:{task}",
                                                   seed=seeds[first % len(seeds)], oracle=oracle))
    names = [a.name for a in opened.agents[AGENT].action_space.actions][:8]
    return _OpenSession(session, names, dict_from_struct(opened.agents[AGENT].observation.info),
                        random.Random(first), first)


async def _play(opened: _OpenSession, steps: int, seeds: Sequence[int]) -> int:
    """``steps`` steps of random (or oracle) actions; an ended episode resets with the next
    seed, as ``inprocess_steps_per_s`` does. Returns the steps taken."""
    from moria.codecs import dict_from_struct, text_action

    session, done = opened.session, 0
    while done < steps:
        response = await session.step(
            {AGENT: text_action(_choose(opened.names, opened.info, opened.rng))})
        done += 1
        opened.info = dict_from_struct(response.agents[AGENT].observation.info)
        if response.HasField("episode_end"):
            opened.episode += 1
            reset = await session.reset(seeds[opened.episode % len(seeds)])
            opened.info = dict_from_struct(reset.agents[AGENT].observation.info)
    return done


async def server_steps_per_s(family_name: str, task: str, steps: int, sessions: int,
                             seeds: Sequence[int] = (0, 1, 2, 3)) -> tuple[float, float]:
    """Through an Env server process hosting ``family_name``, ``sessions`` at once.

    Returns (steps/s, seconds to open the ``sessions`` sessions, all at once). The sessions are
    opened before the clock starts, as ``inprocess_steps_per_s`` opens its game before its
    clock: steps/s is the per-step cost of both paths (episode resets included in both), and
    the opening cost (for isolated families a worker process and the game's construction) is
    the second figure."""
    from orchestrator.core.stack import LocalStack

    oracle = _free_text(family_name, task, seeds[0])
    with tempfile.TemporaryDirectory() as logs:
        async with LocalStack([family_name], Path(logs), with_agent=False) as stack:
            # warm up: the channel, the server's imports, worker processes
            warm = await _open_session(stack.env_target, family_name, task, seeds, 0, oracle)
            await _play(warm, 3, seeds)
            await warm.session.close()
            start = time.perf_counter()
            opened = await asyncio.gather(*(
                _open_session(stack.env_target, family_name, task, seeds, i, oracle)
                for i in range(sessions)))
            open_s = time.perf_counter() - start
            start = time.perf_counter()
            counts = await asyncio.gather(*(_play(o, steps // sessions, seeds) for o in opened))
            steps_per_s = sum(counts) / (time.perf_counter() - start)
            await asyncio.gather(*(o.session.close() for o in opened))
            return steps_per_s, open_s


def compare(family_name: str, task: str, steps: int, seeds: Sequence[int] = (0, 1, 2, 3),
            sessions: int = 4) -> dict[str, Any]:
    """In-process vs server (1 and ``sessions`` sessions) steps/s, and their ratios."""
    local = inprocess_steps_per_s(family_name, task, steps, seeds)
    one, open_one_s = aio.run(server_steps_per_s(family_name, task, steps, 1, seeds))
    many, open_many_s = aio.run(server_steps_per_s(family_name, task, steps, sessions, seeds))
    return {"task": task, "in_process": round(local, 1), "env_server_1_session": round(one, 1),
            f"env_server_{sessions}_sessions": round(many, 1),
            "remote_1_over_in_process": round(one / local, 3),
            f"remote_{sessions}_over_in_process": round(many / local, 3),
            "session_open_s": round(open_one_s, 3),
            f"open_{sessions}_sessions_s": round(open_many_s, 3)}
