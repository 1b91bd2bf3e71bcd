"""Steps/s of one env family's game, in-process vs through an Env server (part of ``make bench``).

Shared by the family benchmarks: a game is driven by random actions from its action list, or,
for free-text games (empty action list, e.g. TextWorld), by the oracle's ``expert_action``.
Episodes restart with seeds taken in turn from ``seeds``, so a family with built data (TextWorld
games) only plays what is built. The server figures run the game in an Env server process on a
unix socket, as the local stack does, with 1 or more concurrent sessions from this process.
Both paths open their games before the clock starts and reset them inside it, so the steps/s
ratio is the per-step cost; opening sessions is timed as its own figure. Beside steps/s, both
paths report the CPU microseconds a step costs: in-process, this process's own CPU; through the
server, split by process (``client``: this process driving the sessions, ``server``: the Env
server process, ``game_workers``: the worker processes of isolated families, 0 for the others),
read from each process's CPU times (psutil) before and after the timed steps.
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


def inprocess_figures(family_name: str, task: str, steps: int,
                      seeds: Sequence[int] = (0, 1, 2, 3)) -> tuple[float, float]:
    """The family's game called directly in this process (text every step): (steps/s, CPU
    microseconds of this process per step)."""
    from env_server.families import load_family
    from env_server.game import GameOptions

    rng = random.Random(0)
    oracle = _free_text(family_name, task, seeds[0])
    game = load_family(family_name).open(task, GameOptions(seed=seeds[0], oracle=oracle))
    names = [a.name for a in game.actions(AGENT)][:8]
    view = game.reset()[AGENT]
    episode = 0
    cpu, start = time.process_time(), time.perf_counter()
    for _ in range(steps):
        result = game.step({AGENT: _choose(names, view.info, rng)})
        view = result.transitions[AGENT].view
        if result.done:
            episode += 1
            view = game.reset(seeds[episode % len(seeds)])[AGENT]
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    game.close()
    return steps / elapsed, 1e6 * cpu / steps


#: The processes of a server figure, by role (``process_role``).
PROCESS_ROLES = ("client", "server", "game_workers")


def process_role(cmdline: Sequence[str], is_self: bool) -> str:
    """``client`` (this process), ``game_workers`` (a forkserver or a game worker it forked:
    their command line runs ``multiprocessing.forkserver``) or ``server`` (anything else under
    this process: the Env server)."""
    if is_self:
        return "client"
    return "game_workers" if "multiprocessing.forkserver" in " ".join(cmdline) else "server"


def cpu_seconds_by_pid() -> dict[int, tuple[str, float]]:
    """This process and its descendants: pid -> (role, user + system CPU seconds so far).
    A process that ends between the listing and the read is left out."""
    import psutil

    me = psutil.Process()
    out: dict[int, tuple[str, float]] = {}
    for proc in [me, *me.children(recursive=True)]:
        try:
            times = proc.cpu_times()
            out[proc.pid] = (process_role(proc.cmdline(), proc.pid == me.pid),
                             times.user + times.system)
        except psutil.Error:
            continue
    return out


def cpu_us_per_step(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]],
                    steps: int) -> dict[str, float]:
    """CPU microseconds per step by role (every ``PROCESS_ROLES`` entry, 0 when absent) between
    two ``cpu_seconds_by_pid`` readings; a process started in between counts from 0."""
    totals = dict.fromkeys(PROCESS_ROLES, 0.0)
    for pid, (role, seconds) in after.items():
        totals[role] += seconds - before.get(pid, (role, 0.0))[1]
    return {role: round(1e6 * seconds / max(steps, 1), 1) for role, seconds in totals.items()}


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
    seed, as ``inprocess_figures`` does. Returns the steps taken."""
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


@dataclass(frozen=True)
class ServerFigures:
    """One server measurement: ``steps_per_s``, ``open_s`` (seconds to open the sessions, all
    at once) and ``cpu_us_per_step`` by process role (``PROCESS_ROLES``)."""

    steps_per_s: float
    open_s: float
    cpu_us_per_step: dict[str, float]


async def server_figures(family_name: str, task: str, steps: int, sessions: int,
                         seeds: Sequence[int] = (0, 1, 2, 3),
                         env_args: Sequence[str] = ()) -> ServerFigures:
    """Through an Env server process hosting ``family_name`` (started with the extra flags
    ``env_args``, e.g. ``("--isolate", "")``), ``sessions`` at once.

    The sessions are opened before the clock starts, as ``inprocess_figures`` opens its game
    before its clock: steps/s is the per-step cost of both paths (episode resets included in
    both), and the opening cost (for isolated families a worker process and the game's
    construction) is its own figure, as is the CPU per step of each process."""
    from orchestrator.core.stack import LocalStack

    oracle = _free_text(family_name, task, seeds[0])
    with tempfile.TemporaryDirectory() as logs:
        async with LocalStack([family_name], Path(logs), with_agent=False,
                              env_args=env_args) as stack:
            # warm up: the channel, the server's imports, worker processes
            warm = await _open_session(stack.env_target, family_name, task, seeds, 0, oracle)
            await _play(warm, 3, seeds)
            await warm.session.close()
            start = time.perf_counter()
            opened = await asyncio.gather(*(
                _open_session(stack.env_target, family_name, task, seeds, i, oracle)
                for i in range(sessions)))
            open_s = time.perf_counter() - start
            cpu_before, start = cpu_seconds_by_pid(), time.perf_counter()
            counts = await asyncio.gather(*(_play(o, steps // sessions, seeds) for o in opened))
            elapsed, cpu_after = time.perf_counter() - start, cpu_seconds_by_pid()
            await asyncio.gather(*(o.session.close() for o in opened))
            return ServerFigures(sum(counts) / elapsed, open_s,
                                 cpu_us_per_step(cpu_before, cpu_after, sum(counts)))


def compare(family_name: str, task: str, steps: int, seeds: Sequence[int] = (0, 1, 2, 3),
            sessions: int = 4) -> dict[str, Any]:
    """In-process vs server (1 and ``sessions`` sessions) steps/s, their ratios, and the CPU
    microseconds per step of each path (the server's by process, ``cpu_us_per_step``)."""
    local, local_cpu = inprocess_figures(family_name, task, steps, seeds)
    one = aio.run(server_figures(family_name, task, steps, 1, seeds))
    many = aio.run(server_figures(family_name, task, steps, sessions, seeds))
    return {"task": task, "in_process": round(local, 1),
            "env_server_1_session": round(one.steps_per_s, 1),
            f"env_server_{sessions}_sessions": round(many.steps_per_s, 1),
            "remote_1_over_in_process": round(one.steps_per_s / local, 3),
            f"remote_{sessions}_over_in_process": round(many.steps_per_s / local, 3),
            "session_open_s": round(one.open_s, 3),
            f"open_{sessions}_sessions_s": round(many.open_s, 3),
            "cpu_us_per_step": {"in_process": round(local_cpu, 1),
                                "env_server_1_session": one.cpu_us_per_step,
                                f"env_server_{sessions}_sessions": many.cpu_us_per_step}}
