"""The ``nle`` family: BALROG's ``NetHackChallenge-v0``, built seedably on stock nle 1.3.0.

Stock ``NetHackChallenge`` refuses seeding, so the same configuration is built from
``NetHackScore`` (docs/families/nle.md): the full 121-key action set, character ``@`` (random
role, race, gender and alignment, drawn from the seeded core RNG), every y/n question and menu
passed to the agent, zero reward penalties (reward = score difference), and the challenge's
no-progress abort re-implemented in ``game.NetHackGame`` (150 env steps, --More-- presses
included, without the turn counter advancing => truncated).

Options (``GameOptions.kwargs``):
- ``text_mode``: ``hybrid`` | ``language`` (default: ``language`` with ``render_image``, else
  ``hybrid``, as BALROG);
- ``no_progress_timeout`` (int, 1..100000, default 150);
- ``fixed_levels`` (bool, default false): also seed NetHack's level-generation RNG;
- ``image_scale`` (int, 1..8, default 2): pixel enlargement of the rendered terminal.

Each episode starts with empty high-score files, so the final top-ten screen (where the end
reason is read) lists that episode alone and depends on (task, seed) only.

Metrics: ``progression`` (BALROG's table value of the best Dlvl/Xp reached),
``highest_achievement``, ``keys_seen`` (the progression-table keys reached, in order) and the
reference's ``dlvl_list`` / ``xplvl_list`` (the Dlvl / Xp ones), ``depth``,
``experience_level``, ``gold``, ``score``, ``turns`` (blstats time), ``end_reason``,
``steps``, ``episode_return``. The blstats figures are the last ones of a live game: NetHack
zeroes blstats on the death screen, and the reference then reported zeros (a defect fixed here).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from env_server.families.nethack import options as opt
from env_server.families.nethack.actions import NLE_DEFAULT_ACTION
from env_server.families.nethack.game import (
    BL_DEPTH,
    ENV_STEP_LIMIT,
    TEXT_KEYS,
    NetHackGame,
    StepOutcome,
)
from env_server.game import Family, Game, GameOptionError, GameOptions, TaskInfo, TaskNotFoundError

TASK = "NetHackChallenge-v0"
MAX_STEPS = 100_000

#: How every episode's ``NetHackScore`` is built (besides ``actions``, ``max_episode_steps`` and
#: ``observation_keys``): BALROG's NetHackChallenge settings, plus the
#: determinism switch (moon phase, Friday 13th and night derived from the seed, not the clock).
NLE_KWARGS: dict[str, Any] = {
    "character": "@",
    "allow_all_yn_questions": True,
    "allow_all_modes": True,
    "penalty_mode": "constant",
    "penalty_step": 0.0,
    "penalty_time": 0.0,
    "savedir": None,
    "fix_moon_phase": True,
}

# blstats indices (nethack.NLE_BL_*)
_BL_SCORE, _BL_GOLD, _BL_XP, _BL_TIME = 9, 13, 18, 20


class NLEFamily(Family):
    """Lists and opens the NetHack task."""

    name = "nle"
    packages = ("nle",)
    #: One worker process per game, so a crash in NLE's C code ends only its own session. NLE
    #: loads a private copy of its C library per game, so games can also share the server
    #: process: an operator who prefers speed to that isolation starts the server with
    #: ``--isolate ''`` (docs/performance.md, "NetHack families: worker processes or inline").
    isolation = "process"
    #: Steps on the event loop when the server runs these games without workers
    #: (``Family.inline_steps``).
    inline_steps = True
    preload = (
        "nle.env.tasks",
        "env_server.families.nethack.nle_family",
        "env_server.families.nethack.text",
        "env_server.families.nethack.render",
    )

    def list_tasks(self) -> list[TaskInfo]:
        """One task: ``NetHackChallenge-v0``."""
        return [
            TaskInfo(
                family=self.name,
                task=TASK,
                description="the full game of NetHack with a random character; progress is "
                "measured by the deepest dungeon level and experience level reached",
                max_steps=MAX_STEPS,
                default_action=NLE_DEFAULT_ACTION,
            )
        ]

    def open(self, task: str, options: GameOptions) -> Game:
        """Create a game (not reset yet).

        Raises:
            TaskNotFoundError: any task other than ``NetHackChallenge-v0``.
            GameOptionError: more than one player, a bad ``max_steps`` or ``kwargs`` value, or
                ``oracle`` (NetHack has no expert; see the ``minihack`` family for tasks that
                have one).
        """
        if task != TASK:
            raise TaskNotFoundError(task, [TASK])
        options = self.check_options(task, options)
        opt.check_single_player(self.name, options)
        limit = opt.step_limit(options, MAX_STEPS)
        kwargs = options.kwargs
        text_mode = opt.text_mode(options)
        timeout = kwargs["no_progress_timeout"]
        fixed = kwargs["fixed_levels"]
        scale = kwargs["image_scale"]
        if options.oracle:
            from env_server.families.nethack.oracle import EXPERT_TASKS

            raise GameOptionError(
                f"oracle: no expert for {task}; experts exist only for the minihack tasks "
                f"{', '.join(EXPERT_TASKS)}"
            )
        return NLEGame(
            task,
            options,
            limit=limit,
            text_mode=text_mode,
            timeout=timeout,
            fixed_levels=fixed,
            scale=scale,
        )


class NLEGame(NetHackGame):
    """One NetHack game (see the module docstring for options and metrics)."""

    def __init__(
        self,
        task: str,
        options: GameOptions,
        *,
        limit: int,
        text_mode: str,
        timeout: int,
        fixed_levels: bool,
        scale: int,
    ):
        from nle import nethack

        from env_server.families.nethack.actions import nle_table

        super().__init__(
            task,
            options,
            table=nle_table(nethack.ACTIONS),
            default_action=NLE_DEFAULT_ACTION,
            step_limit=limit,
            text_mode=text_mode,
            no_progress_limit=timeout,
            fixed_levels=fixed_levels,
        )
        self._scale = scale
        self._nle: Any = None
        self._progress: Any = None
        self._live_blstats = np.zeros(27, dtype=np.int64)
        self._end_reason = ""

    def _env_for_episode(self, seed: int) -> Any:
        if self._nle is None:
            from nle import nethack
            from nle.env.tasks import NetHackScore

            self._nle = NetHackScore(
                actions=nethack.ACTIONS,
                max_episode_steps=ENV_STEP_LIMIT,
                observation_keys=TEXT_KEYS,
                **NLE_KWARGS,
            )
        _clear_scores(self._nle)
        return self._nle

    def _instruction(self) -> str:
        from env_server.families.nethack.instructions import nle_instruction

        return nle_instruction(self._text_mode)

    def _on_reset(self, obs: Mapping[str, np.ndarray], info: Mapping[str, Any]) -> None:
        from env_server.families.nethack.text.progress import NLEProgress

        self._progress = NLEProgress()
        self._live_blstats = np.zeros(27, dtype=np.int64)
        self._end_reason = ""
        self._track(obs["blstats"])

    def _on_step(self, out: StepOutcome, truncated: bool) -> None:
        self._track(out.obs["blstats"], ascended=bool(out.info.get("is_ascended", False)))
        if out.terminated:
            from env_server.families.nethack.text.progress import parse_end_reason

            status = getattr(out.info.get("end_status"), "name", "DEATH")
            self._end_reason = parse_end_reason(out.obs["tty_chars"], status)
        elif truncated:
            self._end_reason = f"ABORTED: {self._abort_reason}"

    def _track(self, blstats: np.ndarray, *, ascended: bool = False) -> None:
        # Dead (or not yet started) games show all-zero blstats: keep the last live ones.
        if int(blstats[BL_DEPTH]) > 0:
            self._live_blstats = np.array(blstats, dtype=np.int64)
        self._progress.update(self._live_blstats, ascended=ascended)

    def _metrics(self) -> dict[str, Any]:
        b = self._live_blstats
        p = self._progress
        return {
            "progression": float(p.progression) if p is not None else 0.0,
            "highest_achievement": (p.highest_achievement or "") if p is not None else "",
            "keys_seen": list(p.keys_seen) if p is not None else [],
            "dlvl_list": list(p.dlvl_list) if p is not None else [],
            "xplvl_list": list(p.xplvl_list) if p is not None else [],
            "depth": int(b[BL_DEPTH]),
            "experience_level": int(b[_BL_XP]),
            "gold": int(b[_BL_GOLD]),
            "score": int(b[_BL_SCORE]),
            "turns": int(b[_BL_TIME]),
            "end_reason": self._end_reason,
            "text_mode": self._text_mode,
        }

    def _frame(self, obs: Mapping[str, np.ndarray] | None) -> np.ndarray:
        from env_server.families.nethack.render import render_tty

        if obs is None:
            return render_tty(
                np.full((24, 80), 32, np.uint8), np.zeros((24, 80), np.int8), self._scale
            )
        return render_tty(obs["tty_chars"], obs["tty_colors"], self._scale)


def _clear_scores(env: Any) -> None:
    """Empty the game's high-score files, so that the end-of-game top-ten screen shows this
    episode alone whatever this env played before (NLE keeps them across resets; the screen is
    where ``end_reason`` is read). Uses nle's private ``Nethack._vardir``; skipped if absent."""
    vardir = getattr(env.nethack, "_vardir", None)
    if not vardir:
        return
    for name in ("record", "logfile", "xlogfile"):
        path = os.path.join(vardir, name)
        if os.path.exists(path):
            with open(path, "w"):
                pass
