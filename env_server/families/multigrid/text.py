"""Text for one agent's multigrid observation, decoded with mosaic-multigrid's own encoding.

The observation ``image`` is an array of shape (V, V, 3) (V = the view size, 3 for Soccer and
Collect) whose channels are the package's ``WorldObj.TYPE``, ``WorldObj.COLOR`` and
``WorldObj.STATE``; values index ``Type``, ``Color`` and, for agents, ``Direction``. An agent
carrying a ball has ``CARRYING_BALL_OFFSET`` (100, from ``mosaic_multigrid.utils.obs``) added to
its state. The view is egocentric: ``image[i, j]`` is ``V-1-j`` cells ahead of the agent and
``i - V//2`` cells to its right; the agent's own cell ``image[V//2, V-1]`` holds the encoding of
what it carries.

Positions are told in **compass directions** (north = up on the map, the package's
``Direction.up``), computed from the agent's facing: ``"2 steps to your north-east (1 north,
1 east)"``; the step count is the number of moves (Manhattan distance). A thing in the agent's
line of sight gets ``(directly in front of you)`` at one step and ``(straight ahead)`` further.
Only cells the agent can see are told; walls are told only when directly in front.

``view_info`` gives the same view as JSON-able data for non-LLM players (the ``scripted`` bot):
``{"facing", "carrying", "wall_ahead", "objects": [...], "walls": [[ahead, right], ...]}``. It
holds exactly what the agent sees (nothing privileged): each object's kind (``ball``, ``goal``,
``agent`` or the package's type name), colour, team relation, map offset (dx east, dy south),
egocentric offset (``ahead``, ``right``) and, for agents, whether they carry the ball.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from mosaic_multigrid.core.constants import DIR_TO_VEC, Color, Direction, Type
from mosaic_multigrid.core.world_object import WorldObj
from mosaic_multigrid.utils.obs import CARRYING_BALL_OFFSET

TYPE, COLOR, STATE = WorldObj.TYPE, WorldObj.COLOR, WorldObj.STATE

#: The package's direction -> the compass word the agent is told.
FACING: dict[int, str] = {
    int(Direction.right): "EAST",
    int(Direction.down): "SOUTH",
    int(Direction.left): "WEST",
    int(Direction.up): "NORTH",
}

_UNSEEN = Type.unseen.to_index()
_EMPTY = Type.empty.to_index()
_WALL = Type.wall.to_index()
_FLOOR = Type.floor.to_index()
_BALL = Type.ball.to_index()
_AGENT = Type.agent.to_index()
_OBJGOAL = Type.objgoal.to_index()

Offset = tuple[int, int]  # (dx, dy) on the map: x grows east, y grows south


def colour_name(index: int) -> str:
    """The package's colour name for a colour index (``Color.from_index``)."""
    return str(Color.from_index(int(index)).value)


def team_colour(team_index: int) -> str:
    """The colour the package gives a team (``Agent.reset``: ``team_index % len(Color)``)."""
    return colour_name(int(team_index) % len(Color))


def facing_name(direction: int) -> str:
    """``EAST``/``SOUTH``/``WEST``/``NORTH`` for the package's direction 0..3.

    Raises ``KeyError`` for anything else."""
    return FACING[int(direction)]


def to_map_offset(ahead: int, right: int, direction: int) -> Offset:
    """Map offset (dx, dy) of the cell ``ahead`` cells forward and ``right`` cells to the right
    of an agent facing ``direction`` (uses the package's ``DIR_TO_VEC``)."""
    fx, fy = (int(v) for v in DIR_TO_VEC[int(direction)])
    rx, ry = -fy, fx  # right-hand side, with y pointing south
    return ahead * fx + right * rx, ahead * fy + right * ry


def relative_position(dx: int, dy: int) -> str:
    """``"2 steps to your north-east (1 north, 1 east)"``, ``"1 step to your west"``, or
    ``"on your cell"`` for (0, 0)."""
    if dx == 0 and dy == 0:
        return "on your cell"
    ns = "north" if dy < 0 else "south" if dy > 0 else ""
    ew = "east" if dx > 0 else "west" if dx < 0 else ""
    steps = abs(dx) + abs(dy)
    unit = "step" if steps == 1 else "steps"
    if ns and ew:
        return f"{steps} {unit} to your {ns}-{ew} ({abs(dy)} {ns}, {abs(dx)} {ew})"
    return f"{steps} {unit} to your {ns or ew}"


@dataclass(frozen=True)
class SeenAgent:
    """An agent decoded from a view cell: map offset, colour, facing and whether it carries
    the ball; ``name`` is its id when the caller identified it, else ""."""

    offset: Offset
    colour: str
    facing: str
    carrying_ball: bool
    name: str = ""


@dataclass
class ViewText:
    """The decoded view: ``lines`` (text, in order) and the agents seen in it."""

    lines: list[str] = field(default_factory=list)
    agents: list[SeenAgent] = field(default_factory=list)


def carried_object(image: np.ndarray) -> str:
    """What the agent carries, from its own cell of the view: ``"a red ball"`` or
    ``"nothing"``."""
    size = image.shape[0]
    cell = image[size // 2, size - 1]
    kind = int(cell[TYPE])
    if kind in (_UNSEEN, _EMPTY):
        return "nothing"
    return f"a {colour_name(int(cell[COLOR]))} {Type.from_index(kind).value}"


def _position_note(ahead: int, right: int) -> str:
    if right != 0 or ahead <= 0:
        return ""
    return " (directly in front of you)" if ahead == 1 else " (straight ahead)"


def _agent_state(state: int) -> tuple[str, bool]:
    carrying = state >= CARRYING_BALL_OFFSET
    direction = state - CARRYING_BALL_OFFSET if carrying else state
    return FACING.get(direction, "an unknown direction"), carrying


def _check_view(image: np.ndarray) -> int:
    """The view size V of an observation image. Raises ``ValueError`` unless it is (V, V, 3)
    with V odd and >= 3."""
    if image.ndim != 3 or image.shape[0] != image.shape[1] or image.shape[2] != 3 \
            or image.shape[0] < 3 or image.shape[0] % 2 == 0:
        raise ValueError(f"expected a (V, V, 3) view with V odd >= 3, got {image.shape}")
    return int(image.shape[0])


@dataclass(frozen=True)
class _Cell:
    """One cell of the view (not the agent's own): where it is, ``ahead``/``right`` of the
    agent and ``dx``/``dy`` on the map, and its type, colour name and state codes."""

    ahead: int
    right: int
    dx: int
    dy: int
    kind: int
    colour: str
    state: int

    @property
    def order(self) -> tuple[int, int, int]:
        """Nearest first (steps), then the farther ahead, then left to right."""
        return abs(self.dx) + abs(self.dy), -self.ahead, self.right


def _cells(image: np.ndarray, direction: int) -> list[_Cell]:
    """Every cell of the view but the agent's own (which holds what it carries)."""
    size = _check_view(image)
    out = []
    for i in range(size):
        for j in range(size):
            ahead, right = size - 1 - j, i - size // 2
            if ahead == 0 and right == 0:
                continue
            kind, colour_idx, state = (int(v) for v in image[i, j])
            dx, dy = to_map_offset(ahead, right, direction)
            out.append(_Cell(ahead, right, dx, dy, kind, colour_name(colour_idx), state))
    return out


def describe_view(
    image: np.ndarray,
    direction: int,
    own_colour: str,
    names: Mapping[Offset, str] | None = None,
) -> ViewText:
    """Decode one agent's view into text lines.

    Args:
        image: the agent's observation ``image``, shape (V, V, 3), integer codes.
        direction: the agent's ``direction`` (0 east, 1 south, 2 west, 3 north).
        own_colour: the agent's team colour, to tell teammates, opponents and goals apart.
        names: optional map offset (dx, dy) -> agent id, to name the agents seen (the game
            passes the real positions); an unnamed agent is "a <colour> agent".

    Returns:
        ``ViewText``: ``"You are facing: NORTH"``, ``"You are carrying: ..."``, the things in
        view (balls, goal cells, agents, other objects; nearest first), and ``"There is a wall
        directly in front of you."`` when so.

    Raises ``ValueError`` for an image that is not (V, V, 3) with V odd and >= 3, and
    ``KeyError`` for a direction outside 0..3.
    """
    _check_view(image)
    out = ViewText()
    out.lines.append(f"You are facing: {facing_name(direction)}")
    out.lines.append(f"You are carrying: {carried_object(image)}")

    seen: list[tuple[tuple[int, int, int], str]] = []
    wall_ahead = False
    for cell in _cells(image, direction):
        if cell.kind == _WALL and (cell.ahead, cell.right) == (1, 0):
            wall_ahead = True
        if cell.kind in (_UNSEEN, _EMPTY, _WALL, _FLOOR):
            continue
        dx, dy, colour = cell.dx, cell.dy, cell.colour
        where = relative_position(dx, dy) + _position_note(cell.ahead, cell.right)
        if cell.kind == _BALL:
            text = f"a {colour} ball: {where}"
        elif cell.kind == _OBJGOAL:
            whose = ("your own team's goal: defend it" if colour == own_colour
                     else "the goal you score in")
            text = f"a goal cell of the {colour} team ({whose}): {where}"
        elif cell.kind == _AGENT:
            facing, carrying = _agent_state(cell.state)
            name = (names or {}).get((dx, dy), "")
            relation = "your teammate" if colour == own_colour else "opponent"
            label = f"{name} ({colour} team, {relation})" if name else \
                f"a {colour} agent ({relation})"
            holds = "carrying the ball" if carrying else "carrying nothing"
            text = f"{label}: {where}; facing {facing}; {holds}"
            out.agents.append(SeenAgent((dx, dy), colour, facing, carrying, name))
        else:
            text = f"a {colour} {Type.from_index(cell.kind).value}: {where}"
        seen.append((cell.order, text))

    if seen:
        out.lines.append("You see:")
        out.lines.extend(f"- {text}" for *_, text in sorted(seen))
    else:
        out.lines.append("You see: nothing but floor and walls.")
    if wall_ahead:
        out.lines.append("There is a wall directly in front of you.")
    return out


def _kind_name(kind: int) -> str:
    """``goal`` for the Soccer goal cell (``objgoal``), else the package's type name."""
    return "goal" if kind == _OBJGOAL else str(Type.from_index(kind).value)


def view_info(image: np.ndarray, direction: int, own_colour: str) -> dict[str, Any]:
    """The agent's view as structured data (for ``info["view"]``), from its own observation.

    Args:
        image: the agent's observation ``image``, shape (V, V, 3), integer codes.
        direction: the agent's ``direction`` (0 east, 1 south, 2 west, 3 north).
        own_colour: the agent's team colour (goals and agents of that colour are ``own``).

    Returns:
        ``{"facing": "EAST"|"SOUTH"|"WEST"|"NORTH", "carrying": "ball"|""|<type name>,
        "wall_ahead": bool, "objects": [...], "walls": [[ahead, right], ...]}``. ``objects``
        lists every ball, goal cell, agent or other object in view, nearest first (steps, then
        the farther ahead, then left to right), each as ``{"kind", "colour", "team"
        ("own"|"opponent"; "" for balls and other objects), "dx", "dy" (map cells: x grows
        east, y south), "ahead", "right" (cells forward and to the right of the agent; ahead
        >= 0), "carrying_ball" (agents only; else False)}``. ``walls``: every wall cell seen,
        as ``[ahead, right]``, sorted.

    Raises ``ValueError`` for an image that is not (V, V, 3) with V odd and >= 3, and
    ``KeyError`` for a direction outside 0..3.
    """
    size = _check_view(image)
    own = image[size // 2, size - 1]
    own_kind = int(own[TYPE])
    carrying = "" if own_kind in (_UNSEEN, _EMPTY) else _kind_name(own_kind)
    found: list[tuple[tuple[int, int, int], dict[str, Any]]] = []
    walls: list[list[int]] = []
    for cell in _cells(image, direction):
        if cell.kind == _WALL:
            walls.append([cell.ahead, cell.right])
            continue
        if cell.kind in (_UNSEEN, _EMPTY, _FLOOR):
            continue
        team = ""
        if cell.kind in (_AGENT, _OBJGOAL):
            team = "own" if cell.colour == own_colour else "opponent"
        entry: dict[str, Any] = {
            "kind": _kind_name(cell.kind), "colour": cell.colour, "team": team,
            "dx": cell.dx, "dy": cell.dy, "ahead": cell.ahead, "right": cell.right,
            "carrying_ball": cell.kind == _AGENT and _agent_state(cell.state)[1],
        }
        found.append((cell.order, entry))
    found.sort(key=lambda item: item[0])
    return {
        "facing": facing_name(direction),
        "carrying": carrying,
        "wall_ahead": [1, 0] in walls,
        "objects": [entry for _, entry in found],
        "walls": sorted(walls),
    }
