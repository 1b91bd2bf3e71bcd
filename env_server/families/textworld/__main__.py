"""Build TextWorld games from the command line and report how long each took.

``python -m env_server.families.textworld [--family F ...] [--index I ...] [--workers N]``
builds the chosen games (default: all 25 of all three families) into ``games.games_dir()``,
skipping built ones, with N worker processes (default 1). One line per game: family, index, seed,
seconds. ``moria prepare`` is the usual way to build games; this is a maintenance tool.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from env_server.families.textworld import games


def _build(family: str, index: int) -> tuple[str, int, float, bool]:
    """Build one game; returns (family, index, seconds, was_already_built)."""
    start = time.perf_counter()
    already = games.is_built(family, index)
    games.build_game(family, index)
    return family, index, time.perf_counter() - start, already


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, build the games, print one line each and a total; returns 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", choices=games.GAME_FAMILIES)
    parser.add_argument("--index", action="append", type=int)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    families = args.family or list(games.GAME_FAMILIES)
    indices = args.index if args.index is not None else list(range(games.GAMES_PER_FAMILY))
    jobs = [(f, i) for f in families for i in indices]
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        futures = [pool.submit(_build, f, i) for f, i in jobs]
        for future in futures:
            family, index, seconds, already = future.result()
            meta = games.read_metadata(family, index)
            note = " (already built)" if already else ""
            print(f"{family:18s} {index:2d} seed {meta['generation_seed']:6d} "
                  f"attempt {meta['attempt']:3d} {seconds:7.1f} s{note}", flush=True)
    size = sum(p.stat().st_size for p in Path(games.games_dir()).rglob("*") if p.is_file())
    print(f"total {time.perf_counter() - start:.1f} s; {games.games_dir()}: {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
