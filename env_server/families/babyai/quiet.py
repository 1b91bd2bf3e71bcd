"""Level generation without minigrid's stdout chatter.

Stock ``RoomGridLevel._gen_grid`` regenerates a level until its mission validates and prints
"Sampling rejected: ..." to stdout on every rejection. Our servers keep stdout clean, and
redirecting ``sys.stdout`` would be process-wide (it would also swallow other threads' output),
so instead we run the same regenerate-until-valid loop without the print path.
"""

from __future__ import annotations

import types
from typing import Any

from minigrid.core.roomgrid import RoomGrid
from minigrid.envs.babyai.core.roomgrid_level import RejectSampling, RoomGridLevel

MAX_ATTEMPTS = 10_000


def generate_quietly(env: Any, width: int, height: int) -> None:
    """Build ``env``'s grid and mission like ``RoomGridLevel._gen_grid``, printing nothing.

    ``env`` is a ``RoomGridLevel``. Rejected layouts (``RejectSampling``) and placement timeouts
    (``RecursionError``) are retried silently, each attempt drawing on ``env``'s seeded RNG.
    Sets ``env.surface`` and ``env.mission`` to the mission text.

    Raises:
        RuntimeError: no valid layout after ``MAX_ATTEMPTS`` attempts (impossible settings).
    """
    for _ in range(MAX_ATTEMPTS):
        try:
            RoomGrid._gen_grid(env, width, height)
            env.gen_mission()
            env.validate_instrs(env.instrs)
        except (RejectSampling, RecursionError):
            continue
        env.surface = env.instrs.surface(env)
        env.mission = env.surface
        return
    raise RuntimeError(f"no valid level layout after {MAX_ATTEMPTS} attempts")


def silence_generation(env: Any) -> None:
    """Make a registered BabyAI level generate quietly (patches this instance only).

    Applied only when the level uses the stock ``RoomGridLevel._gen_grid``; other envs are left
    untouched (stock minigrid prints nothing elsewhere during reset or step).
    """
    if isinstance(env, RoomGridLevel) and type(env)._gen_grid is RoomGridLevel._gen_grid:
        # a deliberate per-instance patch of the method
        env._gen_grid = types.MethodType(generate_quietly, env)  # type: ignore[method-assign]
