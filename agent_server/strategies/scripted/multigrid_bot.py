"""Scripted players for mosaic-multigrid Soccer and Collect, from the agent's own view.

They read ``info["view"]`` (the env's structured copy of the agent's egocentric view: facing,
carrying, the objects and walls seen, each with ``ahead``/``right`` offsets) and, in Soccer,
``info["target_goal_side"]`` (``east``/``west``, the end the agent scores at, as its
instruction says). Nothing else about the field is known: a scoring run walks to the target end
and along its end wall until the goal comes into view.

Soccer scoring in mosaic-multigrid (``SoccerGameIndAgObsEnv``) is *walk-in*: an agent carrying
the ball scores by stepping onto an opponent goal cell (``drop`` there would pass the ball to a
teammate), so the bot walks **forward** into a goal cell straight ahead of it.

Answers are the env's action names (``left``, ``right``, ``forward``, ``pickup``, ...).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from agent_server.strategies.scripted.base import Bot
from agent_server.turn import EpisodeContext, TurnInput
from moria.quoting import quote

#: the package's direction order: a right turn goes one step forward in it
FACINGS = ("EAST", "SOUTH", "WEST", "NORTH")
SIDES = {"east": "EAST", "west": "WEST"}
LEFT, RIGHT, FORWARD, PICKUP = "left", "right", "forward", "pickup"
REQUIRED_ACTIONS = (LEFT, RIGHT, FORWARD, PICKUP)
#: chance per free step of a random turn while exploring
EXPLORE_TURN_P = 0.1


@dataclass(frozen=True)
class Seen:
    """One object in view: kind (``ball``/``goal``/``agent``/...), team relation
    (``own``/``opponent``/""), egocentric offset and whether it carries the ball."""

    kind: str
    team: str
    ahead: int
    right: int
    carrying_ball: bool


@dataclass(frozen=True)
class View:
    """The decoded ``info["view"]``."""

    facing: str
    carrying: str
    walls: frozenset[tuple[int, int]]
    objects: tuple[Seen, ...]

    @classmethod
    def parse(cls, info: dict[str, Any]) -> View:
        """Read ``info["view"]`` (numbers may come as floats, as JSON carries them).

        Raises:
            ValueError: the view is missing or malformed.
        """
        raw = info.get("view")
        if not isinstance(raw, dict) or raw.get("facing") not in FACINGS:
            raise ValueError("the scripted multigrid player needs info['view'] "
                             "(facing, carrying, objects, walls)")
        walls = frozenset((int(a), int(r)) for a, r in raw.get("walls") or [])
        objects = tuple(
            Seen(kind=str(o.get("kind", "")), team=str(o.get("team", "")),
                 ahead=int(o.get("ahead", 0)), right=int(o.get("right", 0)),
                 carrying_ball=bool(o.get("carrying_ball", False)))
            for o in raw.get("objects") or [])
        return cls(facing=str(raw["facing"]), carrying=str(raw.get("carrying") or ""),
                   walls=walls, objects=objects)

    def at(self, ahead: int, right: int) -> list[Seen]:
        """The objects seen at one egocentric offset."""
        return [o for o in self.objects if o.ahead == ahead and o.right == right]

    @property
    def wall_ahead(self) -> bool:
        """A wall on the cell in front."""
        return (1, 0) in self.walls

    @property
    def blocked_ahead(self) -> bool:
        """The cell in front cannot be entered: a wall, an agent or a ball."""
        return self.wall_ahead or any(o.kind in ("agent", "ball") for o in self.at(1, 0))


def turn_toward(facing: str, wanted: str) -> str | None:
    """``left``/``right`` turning ``facing`` toward the compass direction ``wanted`` (for the
    opposite direction: ``right``); None when already facing it."""
    delta = (FACINGS.index(wanted) - FACINGS.index(facing)) % 4
    return None if delta == 0 else LEFT if delta == 3 else RIGHT


class GridBot(Bot):
    """Shared moves: approach a seen object and explore.

    Raises ``ValueError`` at construction when the game lacks the actions it needs."""

    def __init__(self, ctx: EpisodeContext, rng: random.Random) -> None:
        super().__init__(ctx, rng)
        missing = [a for a in REQUIRED_ACTIONS if a not in ctx.action_names]
        if missing:
            raise ValueError(f"the scripted multigrid player needs the actions "
                             f"{list(REQUIRED_ACTIONS)}; {quote(ctx.task, 128)} lacks "
                             f"{missing}")

    def approach(self, view: View, target: Seen, reach: str) -> str:
        """The move toward ``target``; ``reach`` once it is directly in front of the agent."""
        if target.ahead == 0:
            return RIGHT if target.right > 0 else LEFT
        if target.right == 0 and target.ahead == 1:
            return reach
        if not view.blocked_ahead:
            return FORWARD
        if target.right != 0:
            return RIGHT if target.right > 0 else LEFT
        return self.rng.choice((LEFT, RIGHT))

    def explore(self, view: View) -> str:
        """Forward, turning at walls and obstacles, with an occasional random turn."""
        if view.blocked_ahead or self.rng.random() < EXPLORE_TURN_P:
            return self.rng.choice((LEFT, RIGHT))
        return FORWARD


class CollectBot(GridBot):
    """Collect: pick up a ball in front; else go for the nearest ball in view; else explore."""

    def choose(self, turn: TurnInput) -> tuple[str, str]:
        """The action for this step."""
        view = View.parse(turn.info)
        balls = [o for o in view.objects if o.kind == "ball"]
        if balls:
            action = self.approach(view, balls[0], PICKUP)
            return action, f"{action}: going for the ball {balls[0].ahead} ahead, " \
                           f"{balls[0].right} right"
        return self.explore(view), "no ball in view: exploring"


class SoccerBot(GridBot):
    """Soccer: chase the ball (or an opponent carrying it) and carry it into the target goal.

    Not carrying: ``pickup`` when a loose ball or an opponent with the ball is in front (a
    pickup from a carrier steals); else move toward the nearest of them in view (never toward a
    teammate who carries it); else explore. Carrying: walk into an opponent goal cell in view;
    else head for the target end (``info["target_goal_side"]``), then walk along its end wall
    (turning back at a corner) until the goal comes into view.
    """

    def __init__(self, ctx: EpisodeContext, rng: random.Random) -> None:
        super().__init__(ctx, rng)
        #: the way (NORTH/SOUTH) to search along the target end wall
        self._search = rng.choice(("NORTH", "SOUTH"))

    def choose(self, turn: TurnInput) -> tuple[str, str]:
        """The action for this step.

        Raises:
            ValueError: ``info["view"]`` or ``info["target_goal_side"]`` is missing.
        """
        view = View.parse(turn.info)
        if view.carrying:
            side = SIDES.get(str(turn.info.get("target_goal_side", "")).lower())
            if side is None:
                raise ValueError("the scripted Soccer player needs info['target_goal_side'] "
                                 "(east or west)")
            return self._carry(view, side)
        targets = [o for o in view.objects if o.kind == "ball" or (
            o.kind == "agent" and o.team == "opponent" and o.carrying_ball)]
        if targets:
            target = targets[0]
            action = self.approach(view, target, PICKUP)
            what = "the ball" if target.kind == "ball" else "the opponent carrying the ball"
            return action, f"{action}: going for {what}"
        return self.explore(view), "no ball in view: exploring"

    def _carry(self, view: View, side: str) -> tuple[str, str]:
        goals = [o for o in view.objects if o.kind == "goal" and o.team == "opponent"]
        if goals:
            action = self.approach(view, goals[0], FORWARD)
            return action, f"{action}: carrying the ball into the goal in view"
        facing = view.facing
        if facing == side:
            if view.wall_ahead:
                action = turn_toward(facing, self._search) or RIGHT
                return action, f"{action}: at the {side.lower()} end, searching for the goal"
            if view.blocked_ahead:
                return self.rng.choice((LEFT, RIGHT)), "carrying: way blocked, turning"
            return FORWARD, f"forward: carrying the ball {side.lower()}"
        if FACINGS.index(facing) % 2 != FACINGS.index(side) % 2:  # facing along the end wall
            side_offset = 1 if turn_toward(facing, side) == RIGHT else -1
            if (0, side_offset) in view.walls:  # the end wall is beside us
                self._search = facing
                if view.wall_ahead:
                    self._search = FACINGS[(FACINGS.index(facing) + 2) % 4]
                    action = turn_toward(facing, side) or RIGHT
                    return action, "corner reached: turning back along the end wall"
                if view.blocked_ahead:
                    return self.rng.choice((LEFT, RIGHT)), "carrying: way blocked, turning"
                return FORWARD, "forward: along the end wall, looking for the goal"
        action = turn_toward(facing, side) or RIGHT
        return action, f"{action}: turning {side.lower()} with the ball"
