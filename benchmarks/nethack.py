"""NetHack-family figures (part of ``make bench``).

- the cost of our text rendering per step (µs, message extraction included) next to the raw
  env step;
- steps/s for MiniHack (MazeWalk-9x9) and NLE (NetHackChallenge): the raw env with our
  observation keys (no text), the family's game in-process (text rendering every step), and the
  game through an Env server process whose games run in worker processes (1 and 8 sessions),
  the sessions opened before the clock starts as the in-process game is, and the seconds to open
  them (a worker process and the game's construction each) as their own figure; the same
  server figures again with ``--isolate ''`` (games in the server process, steps on its event
  loop: faster, without per-session crash isolation), under ``without_workers``;
- CPU microseconds per step: in-process, and through the server by process (the client driving
  the sessions, the Env server, the game workers), to show where a step's time goes;
- memory per session: proportional set size (PSS) and unique set size (USS) of the game worker
  processes with 16 MiniHack sessions open;
- sessions per server: MiniHack sessions opened on one server at its default capacity until it
  answers RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

import functools
import random
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.rounds import alternate, median, median_by_role, spread
from moria import aio

if TYPE_CHECKING:
    from benchmarks.families import ServerFigures

MINIHACK = "MiniHack-MazeWalk-9x9-v0"
NLE = "NetHackChallenge-v0"
FAMILY_OF = {MINIHACK: "minihack", NLE: "nle"}
SEEDS = tuple(range(1, 1000))


def raw_env_steps_per_s(task: str, steps: int) -> float:
    """The bare NLE/MiniHack env with the observation keys the families use, random moves."""
    import gymnasium as gym
    import minihack  # noqa: F401 - registers MiniHack ids
    import nle  # noqa: F401 - registers NLE ids

    from env_server.families.nethack.game import TEXT_KEYS

    env_id = "NetHackScore-v0" if task == NLE else task
    env = gym.make(env_id, observation_keys=TEXT_KEYS)
    rng = random.Random(0)
    moves = list(range(8))
    env.reset(seed=0)
    start = time.perf_counter()
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(rng.choice(moves))
        if terminated or truncated:
            env.reset()
    elapsed = time.perf_counter() - start
    env.close()
    return steps / elapsed


def text_render_us(task: str, samples: int) -> dict[str, float]:
    """Microseconds per ``render_observation`` call (hybrid and language) on real observations
    recorded from random play, and per raw env step for comparison."""
    import gymnasium as gym
    import minihack  # noqa: F401 - registers MiniHack ids
    import nle  # noqa: F401 - registers NLE ids

    from env_server.families.nethack.game import TEXT_KEYS
    from env_server.families.nethack.text import render_observation
    from env_server.families.nethack.text.message import extract_message

    env = gym.make("NetHackScore-v0" if task == NLE else task, observation_keys=TEXT_KEYS)
    rng = random.Random(1)
    obs, _ = env.reset(seed=1)
    recorded = []
    start = time.perf_counter()
    for _ in range(samples):
        obs, _, terminated, truncated, _ = env.step(rng.randrange(8))
        recorded.append({k: v.copy() for k, v in obs.items()})
        if terminated or truncated:
            obs, _ = env.reset()
    step_us = (time.perf_counter() - start) / samples * 1e6
    env.close()
    out = {"raw_env_step_us": round(step_us, 1)}
    for mode in ("hybrid", "language"):
        start = time.perf_counter()
        for o in recorded:
            render_observation(o, message=extract_message(o["tty_chars"]), mode=mode)
        out[f"render_{mode}_us"] = round((time.perf_counter() - start) / samples * 1e6, 1)
    return out


def game_figures(task: str, steps: int) -> tuple[float, float]:
    """The family's game in this process, text rendering on every step: (steps/s, CPU
    microseconds per step), as ``benchmarks.families.inprocess_figures``."""
    from benchmarks.families import inprocess_figures

    return inprocess_figures(FAMILY_OF[task], task, steps, seeds=SEEDS)


#: The Env server settings measured: its default (each game in a worker process) and
#: ``--isolate ''`` (games in the server process, steps on its event loop), by figure suffix.
SERVER_SETTINGS: dict[str, tuple[str, ...]] = {"": (), "_without_workers": ("--isolate", "")}


async def server_figures(task: str, steps: int, sessions: int,
                         env_args: Sequence[str] = ()) -> ServerFigures:
    """Through an Env server process (by default games in worker processes; ``env_args``:
    extra server flags, ``SERVER_SETTINGS``), ``sessions`` at once:
    ``benchmarks.families.ServerFigures`` (steps/s, seconds to open the sessions, CPU
    microseconds per step of the client, the server and the game workers)."""
    from benchmarks.families import server_figures as family_server_figures

    return await family_server_figures(FAMILY_OF[task], task, steps, sessions, SEEDS,
                                       env_args)


def _workers_memory(server_pid: int) -> dict[str, float]:
    import psutil

    server = psutil.Process(server_pid)
    # game workers are the children of the server's forkserver process
    forkservers = [p for p in server.children() if "forkserver" in " ".join(p.cmdline())]
    workers = [w for f in forkservers for w in f.children()]
    pss = sum(p.memory_full_info().pss for p in workers)
    uss = sum(p.memory_full_info().uss for p in workers)
    rss = sum(p.memory_info().rss for p in workers)
    return {"workers": len(workers), "pss_mib": pss / 2**20, "uss_mib": uss / 2**20,
            "rss_mib": rss / 2**20}


async def memory_and_capacity(per_session_sample: int = 16) -> dict[str, Any]:
    """Memory per session with ``per_session_sample`` sessions, and how many sessions one server
    takes at its default capacity before RESOURCE_EXHAUSTED."""
    import grpc

    from moria.clients import EnvClient
    from moria.env.v1 import env_service_pb2 as env_pb
    from orchestrator.core.stack import LocalStack

    with tempfile.TemporaryDirectory() as logs:
        # env_capacity=None: the server's own default
        async with LocalStack(["minihack"], Path(logs), with_agent=False,
                              env_capacity=None) as stack:
            client = EnvClient(stack.env_target)
            capacity = (await client.get_info()).capacity
            sessions = []
            memory: dict[str, float] = {}
            start = time.perf_counter()
            refused_at = None
            while refused_at is None and len(sessions) < capacity + 1:
                session = client.session()
                try:
                    await session.open(env_pb.OpenRequest(task=f"minihack:{MINIHACK}",
                                                          seed=len(sessions)))
                except grpc.aio.AioRpcError as exc:
                    if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                        raise
                    refused_at = len(sessions)
                    break
                sessions.append(session)
                if len(sessions) == per_session_sample:
                    memory = _workers_memory(stack.children[0].process.pid)
            open_s = time.perf_counter() - start
            full = _workers_memory(stack.children[0].process.pid)
            for session in sessions:
                await session.close()
    sample = max(1, int(memory.get("workers", 1)))
    return {
        "default_capacity": capacity, "sessions_opened": len(sessions),
        "refused_with_resource_exhausted_at": refused_at,
        "seconds_to_open_all": round(open_s, 2),
        "memory_per_session_mib": {
            "pss": round(memory.get("pss_mib", 0.0) / sample, 1),
            "uss": round(memory.get("uss_mib", 0.0) / sample, 1),
            "rss": round(memory.get("rss_mib", 0.0) / sample, 1),
            "sample_sessions": sample},
        "all_sessions_pss_mib": round(full["pss_mib"], 1),
    }


def _round(task: str, steps: int) -> dict[str, Any]:
    """One round of the P1 figures of ``task``: the game in-process, then through the Env
    server with 1 and with 8 sessions under each of ``SERVER_SETTINGS`` (steps/s, ratios,
    opening seconds, CPU per step; keys suffixed with the setting's suffix)."""
    game, game_cpu_us = game_figures(task, steps)
    row: dict[str, Any] = {"in_process": game, "in_process_cpu": game_cpu_us}
    for suffix, env_args in SERVER_SETTINGS.items():
        one = aio.run(server_figures(task, steps, 1, env_args))
        eight = aio.run(server_figures(task, steps, 8, env_args))
        row.update({
            f"one{suffix}": one.steps_per_s, f"eight{suffix}": eight.steps_per_s,
            f"one_ratio{suffix}": one.steps_per_s / game,
            f"eight_ratio{suffix}": eight.steps_per_s / game,
            f"open_one_s{suffix}": one.open_s, f"open_eight_s{suffix}": eight.open_s,
            f"one_cpu{suffix}": one.cpu_us_per_step, f"eight_cpu{suffix}": eight.cpu_us_per_step})
    return row


def _server_medians(rows: list[dict[str, Any]], suffix: str) -> dict[str, Any]:
    """The medians of ``_round``'s server figures under the setting of ``suffix``
    (``SERVER_SETTINGS``), with each round's ratio beside them."""
    return {
        "env_server_1_session": median(rows, f"one{suffix}", 1),
        "env_server_8_sessions": median(rows, f"eight{suffix}", 1),
        "server_1_over_in_process": median(rows, f"one_ratio{suffix}"),
        "server_8_over_in_process": median(rows, f"eight_ratio{suffix}"),
        "server_1_over_in_process_rounds": spread(rows, f"one_ratio{suffix}"),
        "server_8_over_in_process_rounds": spread(rows, f"eight_ratio{suffix}"),
        "session_open_s": median(rows, f"open_one_s{suffix}"),
        "open_8_sessions_s": median(rows, f"open_eight_s{suffix}"),
        "cpu_us_per_step": {"env_server_1_session": median_by_role(rows, f"one_cpu{suffix}"),
                            "env_server_8_sessions": median_by_role(rows, f"eight_cpu{suffix}")}}


def run(steps: int, rounds: int = 3) -> dict[str, Any]:
    """All NetHack figures; the in-process and server figures in ``rounds`` alternated rounds
    (``benchmarks.rounds``), reported as medians with each round's ratio beside them: the
    server's default setting at the top level of each task, every other setting of
    ``SERVER_SETTINGS`` under its suffix's name (``without_workers``)."""
    figures: dict[str, Any] = {}
    for task in (MINIHACK, NLE):
        raw = raw_env_steps_per_s(task, steps * 4)
        rows = alternate(functools.partial(_round, task, steps), rounds)
        game = median(rows, "in_process", 1)
        default = _server_medians(rows, "")
        default["cpu_us_per_step"] = {"in_process": median(rows, "in_process_cpu", 1),
                                      **default["cpu_us_per_step"]}
        figures[task] = {
            "text_rendering_cost": text_render_us(task, 1000),
            "raw_env_no_text": round(raw, 1), "game_in_process_text": game,
            "text_game_over_raw": round(game / raw, 3), "rounds": rounds, **default,
            **{suffix.lstrip("_"): _server_medians(rows, suffix)
               for suffix in SERVER_SETTINGS if suffix}}
    figures["memory_and_capacity"] = aio.run(memory_and_capacity())
    return figures
