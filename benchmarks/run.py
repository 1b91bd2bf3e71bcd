"""Moria's performance suite (``make bench``). Prints figures and writes them to
``benchmarks/out/results.json``; it asserts nothing about speed.

1. BabyAI steps/s, oracle policy (playing ``expert_action``): in-process vs through the Env
   server over loopback gRPC, with 1 session and with 16 concurrent sessions.
2. 64 concurrent episodes against chat-completions servers that answer after a fixed 100 ms,
   through the local stack as ``moria eval`` sizes it (``benchmarks/concurrent_episodes.py``:
   this process as orchestrator -> Policy server processes -> HTTP server processes; Env server
   processes), compared with the ideal wall time (longest episode x 100 ms).

3. NetHack families (``benchmarks/nethack.py``): MiniHack and NLE steps/s raw, with text, and
   through the Env server; memory per session; sessions per server at the default capacity.
4. Crafter, TextWorld and BabaIsAI (``benchmarks/families.py``): steps/s in-process vs through
   the Env server (1 and 4 sessions), and the one-time cost of generating TextWorld games with
   BALROG's recipes (seconds per game per family, into an empty cache).
5. Agent server (``benchmarks/policy.py``): acts/s of one Policy server against a zero-latency
   model at 1, 16 and 256 concurrent Play streams, and its overhead per act in ms.
6. Env load (``benchmarks/env_load.py``): one BabyAI env server process holding 500 concurrent
   sessions, each stepping random actions: steps/s, p50/p99 step latency, peak server RSS.
7. gRPC round trip (``benchmarks/grpc_roundtrip.py``): one Env server ``ping`` round trip
   (1 and 16 streams), wall and CPU microseconds per round trip of client and server, under
   Moria's gRPC core settings (``moria.grpc_defaults``) and under gRPC's own defaults.
8. Model client (``benchmarks/model_client.py``): CPU microseconds per chat-completions call
   against a server that answers at once, layer by layer: aiohttp alone (reference), the
   openai SDK's ``post`` (as Moria sends), Moria's whole OpenAI-compatible backend.
9. Server info (``benchmarks/server_info.py``): wall and server CPU milliseconds of the
   ``GetInfo`` the orchestrator sends to every Env and Policy server before each episode.
10. Workload A (``benchmarks/workload_a.py``): the real ``moria eval`` on BALROG's side-by-side
   workload (50 BabyAI episodes against a 100 ms model) with only ``eval.num_workers`` set:
   wall time, wall over ideal, CPU per step of each process, peak memory; with
   ``--balrog-checkout DIR`` BALROG's own evaluator (a checkout outside this repository) runs
   the same workload alternated with Moria, and P3's ratio to BALROG's best is judged.
11. Local model (``benchmarks/local_model.py``): the embedded model under BALROG's history
   window: prompt tokens served from the KV cache vs evaluated, per step, and time per step.

The run ends with the goals table (``benchmarks/goals.py``: P1, P2, P3, P6), each figure next
to its target, and the load average before and after.

Servers run as separate processes on unix sockets, as the local stack runs them.

Figures are ratios measured in one run on one machine; absolute numbers vary with load. The
Env server's P1 ratios (BabyAI, MiniHack, NLE) are measured in ``--rounds`` alternated rounds
(default 3) and reported as the median, with each round's ratio beside it
(``benchmarks/rounds.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import concurrent_episodes
from benchmarks.common import oracle_episode
from benchmarks.rounds import alternate, median, spread
from moria import aio

OUT = Path(__file__).resolve().parent / "out"
#: The suites ``make bench`` runs, in order.
SUITES = ("babyai", "nethack", "families", "policy", "env_load", "grpc", "model_client",
          "server_info", "workload_a", "local_model")
TASK = "BabyAI-MixedTrainLocal-v0/goto"


def inprocess_steps_per_s(total_steps: int) -> float:
    """Steps/s of the BabyAI family called directly (oracle hints on, text observations)."""
    from env_server.families import load_family
    from env_server.game import GameOptions

    family = load_family("babyai")
    steps, seed = 0, 0
    start = time.perf_counter()
    while steps < total_steps:
        game = family.open(TASK, GameOptions(seed=seed, oracle=True))
        views = game.reset()
        done = False
        while not done and steps < total_steps:
            result = game.step({"agent_0": views["agent_0"].info["expert_action"]})
            views = {a: t.view for a, t in result.transitions.items()}
            done = result.done
            steps += 1
        seed += 1
    return steps / (time.perf_counter() - start)


async def _remote_worker(target: str, steps_wanted: int, first_seed: int) -> int:
    from moria.clients import EnvClient

    client = EnvClient(target)
    steps, seed = 0, first_seed

    def count() -> None:
        nonlocal steps
        steps += 1

    while steps < steps_wanted:
        await oracle_episode(client.session(), f"babyai:{TASK}", seed,
                             lambda: steps < steps_wanted, count)
        seed += 1000
    return steps


async def remote_steps_per_s(total_steps: int, sessions: int) -> float:
    """Steps/s through a real Env server process (unix socket) with ``sessions`` concurrent
    sessions driven from this process."""
    from orchestrator.core.stack import LocalStack

    with tempfile.TemporaryDirectory() as logs:
        async with LocalStack(["babyai"], Path(logs), with_agent=False) as stack:
            per = total_steps // sessions
            await _remote_worker(stack.env_target, 10, 10**6)  # warm up the channel and server
            start = time.perf_counter()
            done = await asyncio.gather(*(_remote_worker(stack.env_target, per, i)
                                          for i in range(sessions)))
            return sum(done) / (time.perf_counter() - start)


def main() -> None:
    """Run the suite and print/write the figures."""
    from benchmarks.workload_a import add_balrog_arguments, balrog_from, positive_int

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4000, help="steps per throughput figure")
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--suites", default=",".join(SUITES),
                        help="comma-separated: " + ", ".join(SUITES))
    parser.add_argument("--balrog-best-wall-s", type=float, default=None,
                        help="BALROG's best wall time on workload A measured in the same sitting "
                        "(seconds; see README): adds the P3 ratio to the goals table")
    parser.add_argument("--workload-a-repeat", type=positive_int, default=1,
                        help="passes of workload A (with --balrog-checkout: Moria and BALROG "
                        "alternated)")
    add_balrog_arguments(parser)
    parser.add_argument("--tw-games", type=int, default=2,
                        help="TextWorld games generated per family for the generation cost")
    parser.add_argument("--rounds", type=positive_int, default=3,
                        help="alternated rounds of the P1 figures (in-process vs through the "
                        "Env server); their medians are reported, each round's ratio beside")
    parser.add_argument("--record", action="store_true",
                        help="write benchmarks/results/goals.json and side_by_side.json (the "
                        "docs' generated tables) from this sitting")
    args = parser.parse_args()
    balrog = balrog_from(args, parser)
    suites = set(args.suites.split(","))
    unknown = suites - set(SUITES)
    if unknown:
        parser.error(f"unknown suite(s) {', '.join(sorted(unknown))}; allowed: "
                     + ", ".join(SUITES))
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_average_before": [round(x, 2) for x in os.getloadavg()]}
    if "babyai" in suites:
        results.update(babyai_figures(args))
    if "nethack" in suites:
        from benchmarks.nethack import run as nethack_figures

        results["nethack_steps_per_s_and_memory"] = nethack_figures(args.steps // 2,
                                                                    args.rounds)
    if "families" in suites:
        results.update(family_figures(args))
    if "policy" in suites:
        from benchmarks.policy import run as policy_figures

        results["policy_acts_per_s_zero_latency_model"] = aio.run(policy_figures())
    if "env_load" in suites:
        from benchmarks.env_load import run as env_load_figures

        results["env_load_500_sessions"] = aio.run(env_load_figures(500, 20))
    if "grpc" in suites:
        from benchmarks.grpc_roundtrip import run as grpc_roundtrip

        results["grpc_round_trip"] = grpc_roundtrip()
    if "model_client" in suites:
        from benchmarks.model_client import run as model_client

        results["model_client"] = model_client()
    if "server_info" in suites:
        from benchmarks.server_info import run as server_info

        results["server_info"] = server_info()
    if "workload_a" in suites:
        from benchmarks.workload_a import run as workload_a

        results["workload_a"] = workload_a([50], args.latency, balrog, args.balrog_workers,
                                           args.workload_a_repeat)
    if "local_model" in suites:
        from benchmarks.local_model import run as local_model

        results["local_model"] = local_model()
    results["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    OUT.mkdir(exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))
    from benchmarks.goals import evaluate, print_table

    goals = evaluate(results, args.balrog_best_wall_s)
    print_table(goals)
    print(f"load average: {results['load_average_before']} before, "
          f"{results['load_average_after']} after")
    if args.record:
        from benchmarks.record import write

        for path in write(results, goals, "python -m benchmarks.run " + " ".join(sys.argv[1:])):
            print(f"wrote {path}")


def _babyai_round(steps: int) -> dict[str, float]:
    """One round of the BabyAI throughput figures: in-process, then through the Env server
    with 1 and with 16 sessions."""
    inproc = inprocess_steps_per_s(steps)
    remote_1 = aio.run(remote_steps_per_s(steps, 1))
    remote_16 = aio.run(remote_steps_per_s(steps, 16))
    return {"in_process": inproc, "one": remote_1, "sixteen": remote_16,
            "one_ratio": remote_1 / inproc, "sixteen_ratio": remote_16 / inproc}


def babyai_figures(args: argparse.Namespace) -> dict[str, Any]:
    """The BabyAI throughput figures (``args.rounds`` alternated rounds, medians with each
    round's ratio beside them) and the concurrent-episode figure."""
    rows = alternate(lambda: _babyai_round(args.steps), args.rounds)
    episodes = aio.run(concurrent_episodes.run(args.episodes, args.latency))
    return {
        "babyai_oracle_steps_per_s": {
            "rounds": args.rounds,
            "in_process": median(rows, "in_process", 1),
            "env_server_1_session": median(rows, "one", 1),
            "env_server_16_sessions": median(rows, "sixteen", 1),
            "remote_1_over_in_process": median(rows, "one_ratio"),
            "remote_16_over_in_process": median(rows, "sixteen_ratio"),
            "remote_1_over_in_process_rounds": spread(rows, "one_ratio"),
            "remote_16_over_in_process_rounds": spread(rows, "sixteen_ratio")},
        "concurrent_episodes_fixed_latency": episodes,
    }


def family_figures(args: argparse.Namespace) -> dict[str, Any]:
    """Crafter, TextWorld and BabaIsAI throughput, and the TextWorld generation cost."""
    from benchmarks.families import compare

    generation = textworld_generation_cost(args.tw_games)
    steps = max(200, args.steps // 4)
    return {
        "textworld_generation_s_per_game": generation,
        "crafter_steps_per_s": compare("crafter", "default", steps),
        # TextWorld plays the walkthrough of the games built above (indices 0..tw_games-1)
        "textworld_steps_per_s": compare("textworld", "the_cooking_game", steps // 4,
                                         seeds=tuple(range(args.tw_games))),
        "babaisai_steps_per_s": compare("babaisai", "env/two_room-break_stop-make_win", steps),
    }


def textworld_generation_cost(games_per_family: int) -> dict[str, Any]:
    """Seconds to generate games 0..N-1 of each TextWorld family into an empty cache, with the
    cache size; the games are then copied into the real cache so later figures can play them."""
    import shutil

    from env_server.families.textworld import games

    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        previous = os.environ.get("MORIA_CACHE_DIR")
        os.environ["MORIA_CACHE_DIR"] = tmp
        try:
            for family in games.GAME_FAMILIES:
                start = time.perf_counter()
                for index in range(games_per_family):
                    games.build_game(family, index)
                figures[family] = round((time.perf_counter() - start) / games_per_family, 2)
            built = games.games_dir()
            size = sum(p.stat().st_size for p in built.rglob("*") if p.is_file())
            figures["cache_bytes_per_game"] = size // (games_per_family * len(figures))
        finally:
            if previous is None:
                os.environ.pop("MORIA_CACHE_DIR", None)
            else:
                os.environ["MORIA_CACHE_DIR"] = previous
        shutil.copytree(built, games.games_dir(), dirs_exist_ok=True)
    return figures


if __name__ == "__main__":
    main()
