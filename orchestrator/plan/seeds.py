"""Episode seeds: one 64-bit seed per (run seed, env, task, episode index), from nothing else."""

from __future__ import annotations

import hashlib

from moria.families import seed_cycles


def derive_seed(run_seed: int, env: str, task: str, episode_index: int) -> int:
    """The 64-bit seed of one episode: sha256 of (run seed, env, task, index), first 8 bytes.

    Independent of time, PIDs, worker order and concurrency (BALROG's pid/time seeding is a
    known defect). For envs that pick one of a fixed set of games by ``seed mod n``
    (``moria.families.seed_cycles``: TextWorld's 25 games per task) the seed is moved to the nearest
    value below with ``seed mod n == episode_index mod n``, so episode i plays game i, as
    BALROG's sequential game choice does, instead of a random draw with repeats.
    """
    digest = hashlib.sha256(f"{run_seed}|{env}|{task}|{episode_index}".encode()).digest()
    seed = int.from_bytes(digest[:8], "little")
    cycle = seed_cycles().get(env)
    if cycle:
        seed = max(0, seed - seed % cycle - cycle) + episode_index % cycle
    return seed
