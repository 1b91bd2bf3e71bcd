"""Our own ``BabyAI-MixedTrainLocal-v0`` level on stock minigrid (docs/families/babyai.md).

Stock minigrid lacks this level; BALROG gets it from a minigrid fork. This class rebuilds it as a
``LevelGen`` subclass (so minigrid's ``BabyAIBot`` and verifiers work on it unchanged), with the
task kind fixed at construction instead of drawn from an unseeded RNG.

Layout facts reproduced (num_dists=0 unless told otherwise):
- one 8x8 room (walls included); ``open`` uses two rooms side by side (15x8, shared wall x=7);
- goto/pickup: 1 random key/ball/box; putnext/pick_up_seq_go_to: 2 random objects; plus
  ``num_dists`` random distractors; colours from minigrid's six, types key/ball/box;
- except in ``open`` the agent is placed first and no object lands on or orthogonally next to its
  start cell; the cell the agent faces at the start is never an object;
- open: a locked door (yellow/green/blue/purple) at a random row of the shared wall, a key of its
  colour in the other room, the agent in the key's room; mission names the colour half the time;
- every object must be reachable without moving another; the mission may not contain a banned
  colour-noun pair; putnext is rejected when both descriptions match a common object or the two
  objects already touch (stock ``validate_instrs``);
- "the" vs "a" follows the stock descriptor surface (unique match or not);
- max_steps = navigations x 64 x rooms, i.e. 64 (goto, pickup) or 128 (the others).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from minigrid.core.world_object import Ball, Box, Key, WorldObj
from minigrid.envs.babyai.core.levelgen import LevelGen
from minigrid.envs.babyai.core.roomgrid_level import RejectSampling
from minigrid.envs.babyai.core.verifier import (
    AfterInstr,
    BeforeInstr,
    GoToInstr,
    ObjDesc,
    OpenInstr,
    PickupInstr,
    PutNextInstr,
)

from env_server.families.babyai.quiet import generate_quietly
from env_server.families.babyai.tasks import KINDS

ROOM_SIZE = 8

# Colour-noun pairs held out of MixedTrainLocal missions.
BANNED_PAIRS: tuple[str, ...] = ("yellow box", "red key", "red door", "green ball", "grey door")

# Colours a locked door of the ``open`` kind may take.
OPEN_DOOR_COLORS: tuple[str, ...] = ("yellow", "green", "blue", "purple")

# Objects the mission refers to, per kind (before distractors).
_TARGETS_PER_KIND = {"goto": 1, "pickup": 1, "open": 0, "putnext": 2, "pick_up_seq_go_to": 2}

_OBJ_CLASSES = {"key": Key, "ball": Ball, "box": Box}


class MixedTrainLocalLevel(LevelGen):
    """One kind of the MixedTrainLocal level (``kind`` in ``tasks.KINDS``).

    Args:
        kind: the task kind; fixes the room count (2 columns for ``open``, else 1).
        num_dists: extra random key/ball/box distractors (BALROG runs with 0).
        max_steps: fixed step limit; None recomputes it from the mission at every reset.
        **kwargs: passed to ``MiniGridEnv`` (e.g. ``render_mode``).

    Raises:
        ValueError: unknown ``kind`` or negative ``num_dists``.
    """

    def __init__(self, kind: str, num_dists: int = 0, max_steps: int | None = None, **kwargs: Any):
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}")
        if num_dists < 0:
            raise ValueError("num_dists must be >= 0")
        self.kind = kind
        seq = kind == "pick_up_seq_go_to"
        super().__init__(
            room_size=ROOM_SIZE,
            num_rows=1,
            num_cols=2 if kind == "open" else 1,
            num_dists=num_dists,
            locked_room_prob=0.0,
            locations=False,
            unblocking=False,
            implicit_unlock=False,
            action_kinds=("pickup", "goto") if seq else (kind,),
            instr_kinds=("seq",) if seq else ("action",),
            max_steps=max_steps,
            **kwargs,
        )

    # -- generation -------------------------------------------------------------------------

    def _gen_grid(self, width: int, height: int) -> None:
        generate_quietly(self, width, height)

    def gen_mission(self) -> None:
        """Place agent and objects for ``self.kind`` and set ``self.instrs``.

        Raises ``RejectSampling`` (caught by the generation loop) for unreachable objects or a
        banned colour-noun pair in the mission.
        """
        if self.kind == "open":
            self.instrs = self._gen_open()
        else:
            self.instrs = self._gen_object_task()
        self.check_objs_reachable()
        surface = self.instrs.surface(self)
        if any(pair in surface for pair in BANNED_PAIRS):
            raise RejectSampling("mission uses a held-out colour-noun pair")

    def _gen_object_task(self):
        # Agent first: add_object's placement then keeps objects off and away from its cell.
        self.place_agent(0, 0)
        needed = _TARGETS_PER_KIND[self.kind]
        objs = self.add_distractors(0, 0, num_distractors=needed + self.num_dists, all_unique=False)
        first = _describe(objs[0])
        if self.kind == "goto":
            return GoToInstr(first)
        if self.kind == "pickup":
            return PickupInstr(first)
        second = _describe(objs[1])
        if self.kind == "putnext":
            return PutNextInstr(first, second)
        # pick_up_seq_go_to: "pick up X, then go to Y" or "go to Y after you pick up X".
        if self._rand_bool():
            return BeforeInstr(PickupInstr(first), GoToInstr(second))
        return AfterInstr(GoToInstr(second), PickupInstr(first))

    def _gen_open(self):
        # Objects come before the agent here; forget RoomGrid's provisional centre position so
        # that it does not block a cell.
        self.agent_pos = np.array((-1, -1))
        locked_col = self._rand_int(0, 2)
        key_col = 1 - locked_col
        color = self._rand_elem(OPEN_DOOR_COLORS)
        # Door index 0 = right wall of room 0, 2 = left wall of room 1: the shared wall.
        self.add_door(locked_col, 0, 0 if locked_col == 0 else 2, color=color, locked=True)
        self._place_in(key_col, Key(color))
        for _ in range(self.num_dists):
            obj_cls = _OBJ_CLASSES[self._rand_elem(list(_OBJ_CLASSES))]
            self._place_in(self._rand_int(0, 2), obj_cls(self._rand_color()))
        # Agent last, in the key's room; RoomGrid.place_agent keeps objects out of its front cell.
        self.place_agent(key_col, 0)
        return OpenInstr(ObjDesc("door", color if self._rand_bool() else None))

    def _place_in(self, col: int, obj: WorldObj) -> None:
        room = self.get_room(col, 0)
        self.place_obj(obj, room.top, room.size, max_tries=1000)
        room.objs.append(obj)


def _describe(obj: WorldObj) -> ObjDesc:
    return ObjDesc(obj.type, obj.color)
