"""The ``minihack`` family: BALROG's eight MiniHack tasks plus the other runnable minihack ids.

Every task runs with BALROG's settings (docs/families/minihack.md): character ``@`` (forced
characters kept), 100 agent steps (``GameOptions.max_steps`` overrides), step penalty -0.01
(constant mode), time penalty 0, autopickup off, explicit observation keys (glyphs, blstats,
tty_chars, tty_colors, tty_cursor, inv_letters, inv_strs; never ``*_crop``). Images
(``render_image``, ``render()``) are MiniHack's ``pixel`` image, 16x16 tiles per map square,
computed by ``render.render_tiles`` (bit-identical to the ``pixel`` key, which minihack builds
with a Python loop costing about 8 ms a step, so the key itself is not requested).

The actions are the 33-name vocabulary intersected with the task's own action set, in the
task's order; the default action is ``north``.

Options (``GameOptions.kwargs``):
- ``text_mode``: ``hybrid`` | ``language`` (default: ``language`` with ``render_image``, else
  ``hybrid``);
- ``progression_rule``: ``balrog`` (default) | ``fixed``: which rule fills ``progression``;
- ``boxoban_levels``: a directory of official Boxoban level files (layout of
  ``boxoban.source.LevelSource.official``); default: our generated levels;
- ``oracle_lookahead`` (bool, default true; MazeWalk/Corridor with ``oracle``): before each
  episode the expert explores a private copy of the level (same seed) and then walks the
  shortest known route; false: it explores live from the agent's observations only.

Progression. BALROG overwrites progression every step with 1.0 if that step's reward >= 1.0,
else 0.0: effectively "the final step's reward >= 1". Its defect: a success on a step where the
turn counter did not advance pays 1 - 0.01 = 0.99 and scores 0. Metrics carry both rules:
``progression_balrog`` (the reference rule, bit for bit) and ``progression_fixed`` (1.0 also when
the episode ended with NLE status TASK_SUCCESSFUL). ``progression`` is ``progression_balrog``
unless ``progression_rule=fixed`` (comparable by default, documented option:
docs/families/minihack.md); ``progression_rule`` names the choice in every result. Other metrics:
``success`` (goal reached, the fixed rule), ``end_reason`` (NLE end status name: RUNNING,
DEATH, TASK_SUCCESSFUL or ABORTED; our step limit reports ABORTED like NLE's own limit),
``steps``, ``episode_return``, ``text_mode``, and ``level_source`` on Boxoban tasks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from env_server.families.nethack import minihack_tasks as mt
from env_server.families.nethack import options as opt
from env_server.families.nethack.actions import (
    MINIHACK_DEFAULT_ACTION,
    MINIHACK_VOCABULARY,
    table_for,
)
from env_server.families.nethack.game import ENV_STEP_LIMIT, TEXT_KEYS, NetHackGame, StepOutcome
from env_server.game import Family, Game, GameOptionError, GameOptions, TaskInfo, TaskNotFoundError
from moria.quoting import quote

_DESCRIPTIONS = {
    "MiniHack-Boxoban-Hard-v0": "push four boulders onto four fountains (hard Boxoban level)",
    "MiniHack-Boxoban-Medium-v0": "push four boulders onto four fountains (medium Boxoban level)",
    "MiniHack-MazeWalk-9x9-v0": "find the down stairs in a dark 9x9 maze",
    "MiniHack-MazeWalk-15x15-v0": "find the down stairs in a dark 15x15 maze",
    "MiniHack-Corridor-R3-v0": "reach the down stairs through three rooms joined by corridors",
    "MiniHack-CorridorBattle-Dark-v0": "fight through giant rats in the dark to the down stairs",
    "MiniHack-Quest-Easy-v0": "cross a lava river (freeze it) and reach the down stairs",
    "MiniHack-Quest-Medium-v0": "fight rats, cross lava and reach the down stairs",
}


class MiniHackFamily(Family):
    """Lists and opens MiniHack tasks (see ``minihack_tasks`` for the names)."""

    name = "minihack"
    packages = ("minihack", "nle")
    #: One worker process per game, so a crash in NLE's C code ends only its own session. NLE
    #: loads a private copy of its C library per game, so games can also share the server
    #: process: an operator who prefers speed to that isolation starts the server with
    #: ``--isolate ''`` (docs/performance.md, "NetHack families: worker processes or inline").
    isolation = "process"
    #: Steps on the event loop when the server runs these games without workers
    #: (``Family.inline_steps``).
    inline_steps = True
    preload = (
        "minihack",
        "env_server.families.nethack.minihack_family",
        "env_server.families.nethack.text",
        "env_server.families.nethack.render",
        "env_server.families.nethack.boxoban.env",
    )

    def __init__(self) -> None:
        self._tasks: list[TaskInfo] | None = None

    def list_tasks(self) -> list[TaskInfo]:
        """BALROG's eight tasks first, then the other runnable registered ids."""
        if self._tasks is None:
            self._tasks = [
                TaskInfo(
                    family=self.name,
                    task=task,
                    description=_DESCRIPTIONS.get(task, f"registered minihack environment {task}"),
                    max_steps=mt.MAX_STEPS,
                    default_action=MINIHACK_DEFAULT_ACTION,
                )
                for task in mt.all_task_names()
            ]
        return list(self._tasks)

    def open(self, task: str, options: GameOptions) -> Game:
        """Create a game (not reset yet; its env is built here).

        Raises:
            TaskNotFoundError: unknown task (``valid`` lists every accepted name).
            GameOptionError: more than one player, a bad ``max_steps`` or ``kwargs`` value, a
                ``boxoban_levels`` directory that cannot be read, or ``oracle`` on a task
                without an expert (the message names the tasks that have one).
        """
        from env_server.families.nethack import oracle

        spec = mt.parse_task(task)
        if spec is None:
            raise TaskNotFoundError(task, mt.all_task_names())
        options = self.check_options(task, options)
        opt.check_single_player(self.name, options)
        limit = opt.step_limit(options, mt.MAX_STEPS)
        kwargs = options.kwargs
        text_mode = opt.text_mode(options)
        rule = kwargs["progression_rule"]
        levels_dir = kwargs.get("boxoban_levels")
        lookahead = kwargs["oracle_lookahead"]
        if options.oracle and not oracle.has_expert(task):
            raise GameOptionError(
                f"oracle: no expert for {task}; tasks with an expert: "
                f"{', '.join(oracle.EXPERT_TASKS)} (and the other MazeWalk/Corridor ids)"
            )
        source = _level_source(levels_dir) if spec.is_boxoban else None
        return MiniHackGame(
            spec,
            options,
            limit=limit,
            text_mode=text_mode,
            rule=rule,
            level_source=source,
            lookahead=lookahead,
        )


def _level_source(levels_dir: Any) -> Any:
    from env_server.families.nethack.boxoban.source import LevelSource

    if levels_dir is None:
        return LevelSource.generated()
    try:
        return LevelSource.official(levels_dir)
    except (OSError, ValueError) as exc:
        raise GameOptionError(f"boxoban_levels: cannot use {quote(levels_dir, 128)}: "
                              f"{quote(exc, 200)}") from None


class MiniHackGame(NetHackGame):
    """One MiniHack game (see the module docstring for options and metrics).

    The env is built at construction (its action set is needed before the first reset). A
    Boxoban game rebuilds it whenever an episode's seed selects another level.
    """

    def __init__(
        self,
        spec: mt.TaskSpec,
        options: GameOptions,
        *,
        limit: int,
        text_mode: str,
        rule: str,
        level_source: Any,
        lookahead: bool = True,
    ):
        self._spec = spec
        self._lookahead = lookahead
        self._shadow: Any = None  # private copy of the env for the oracle's lookahead
        self._rule = rule
        self._source = level_source
        self._keys = TEXT_KEYS
        self._level_text = ""
        self._level_id = ""
        self._mh: Any = None
        if spec.is_boxoban:
            self._load_level(options.seed)
        else:
            self._mh = mt.build_registered(spec.task, self._keys, ENV_STEP_LIMIT)
        table = table_for(MINIHACK_VOCABULARY, self._mh.unwrapped.actions)
        super().__init__(
            spec.task,
            options,
            table=table,
            default_action=MINIHACK_DEFAULT_ACTION,
            step_limit=limit,
            text_mode=text_mode,
        )
        self._table_keys = tuple(a.name for a, _ in table)
        self._last_reward = 0.0
        self._succeeded = False
        self._status = "RUNNING"

    # -- env --------------------------------------------------------------------------------

    def _load_level(self, seed: int) -> None:
        """Make the env play the Boxoban level that ``seed`` selects (rebuilt if it changed)."""
        from env_server.families.nethack.game import reduce_seed

        level_text, level_id = self._source.level_for(self._spec.difficulty, reduce_seed(seed))
        if self._mh is not None and level_text == self._level_text:
            self._level_id = level_id
            return
        if self._mh is not None:
            self._mh.close()
            self._mh = None
        difficulty = self._spec.difficulty
        assert difficulty is not None  # levels are loaded for the Boxoban tasks only
        self._mh = mt.build_boxoban(level_text, difficulty, self._keys, ENV_STEP_LIMIT)
        self._level_text, self._level_id = level_text, level_id

    def _env_for_episode(self, seed: int) -> Any:
        if self._spec.is_boxoban:
            self._load_level(seed)
        return self._mh

    def _close_env(self) -> None:
        if self._mh is not None:
            self._mh.close()
            self._mh = None

    def close(self) -> None:
        """Close the env (and the oracle's private copy); safe to call twice."""
        super().close()
        self._close_env()
        if self._shadow is not None:
            self._shadow.close()
            self._shadow = None

    # -- text, metrics, image -----------------------------------------------------------------

    def _instruction(self) -> str:
        from env_server.families.nethack.instructions import minihack_instruction

        return minihack_instruction(self._spec.task, [a for a, _ in self._table], self._text_mode)

    def _on_reset(self, obs: Mapping[str, np.ndarray], info: Mapping[str, Any]) -> None:
        self._last_reward = 0.0
        self._succeeded = False
        self._status = _status_name(info.get("end_status"), "RUNNING")

    def _on_step(self, out: StepOutcome, truncated: bool) -> None:
        self._last_reward = out.reward
        status = _status_name(out.info.get("end_status"), "RUNNING")
        if status == "RUNNING" and truncated:
            status = "ABORTED"  # our step limit, reported as NLE reports its own
        self._status = status
        if status == "TASK_SUCCESSFUL" or out.reward >= 1.0:
            self._succeeded = True

    def _metrics(self) -> dict[str, Any]:
        balrog = 1.0 if self._last_reward >= 1.0 else 0.0
        fixed = 1.0 if self._succeeded else 0.0
        metrics: dict[str, Any] = {
            "progression": fixed if self._rule == "fixed" else balrog,
            "progression_balrog": balrog,
            "progression_fixed": fixed,
            "progression_rule": self._rule,
            "success": self._succeeded,
            "end_reason": self._status,
            "text_mode": self._text_mode,
        }
        if self._spec.is_boxoban:
            metrics["level_source"] = self._level_id
        return metrics

    def _frame(self, obs: Mapping[str, np.ndarray] | None) -> np.ndarray:
        from env_server.families.nethack.render import render_tiles

        # before any episode: a blank map (2359 = S_stone, nethack.GLYPH_CMAP_OFF in nle 1.3.0)
        glyphs = obs["glyphs"] if obs is not None else np.full((21, 79), 2359, np.int16)
        return render_tiles(glyphs)

    # -- oracle -----------------------------------------------------------------------------

    def _make_expert(self, obs: Mapping[str, np.ndarray]) -> Any:
        from env_server.families.nethack import oracle
        from env_server.families.nethack.game import nethack_seeds

        prior = None
        if self._lookahead and oracle.is_navigation(self._spec.task):
            if self._shadow is None:
                self._shadow = mt.build_registered(self._spec.task, TEXT_KEYS, ENV_STEP_LIMIT)
            core, disp, _ = nethack_seeds(self._episode_seed)
            table = [(a.name, i) for a, i in self._table]
            prior = oracle.explore_ahead(self._shadow, (core, disp), table)
        return oracle.make_expert(
            self._spec.task, self._table_keys, level_text=self._level_text, prior=prior
        )


def _status_name(status: Any, default: str) -> str:
    """The name of an NLE ``StepStatus`` (``RUNNING`` ...), or ``default`` when absent."""
    if status is None:
        return default
    return str(getattr(status, "name", status))
