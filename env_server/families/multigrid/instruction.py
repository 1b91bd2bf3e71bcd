"""Actions and per-agent instructions for multigrid Soccer and Collect (Moria's own wording).

Coordination levels (player option ``coordination_level``):
1. emergent: who the agent is, its team and opponents, the rules and mechanics of the real env,
   the observation format and the action list;
2. level 1 plus cooperation hints (Soccer: spread out, get open for passes, intercept, one
   attacker and one supporter, do not all chase the ball; Collect: nearest ball first,
   anticipate opponents);
3. level 2 plus an explicit role (``forward`` or ``defender``) with its strategy, and a
   coordination protocol naming each teammate's id and role. Only Soccer agents with at least
   one teammate have roles; everyone else falls back to level 2 (``effective_level``).
"""

from __future__ import annotations

from dataclasses import dataclass

from mosaic_multigrid.core.actions import Action

from env_server.families.multigrid.manifest import LEVELS, OBSERVATION_MODES, ROLES
from env_server.families.multigrid.tasks import SOCCER
from env_server.game import ActionInfo

__all__ = ["LEVELS", "OBSERVATION_MODES", "ROLES"]  # the manifest owns them; re-exported
#: The action applied for an invalid answer: the package's no-op.
DEFAULT_ACTION = Action.noop.name

_COMMON = {
    Action.noop: "do nothing this step",
    Action.left: "turn 90 degrees to your left (counter-clockwise), staying on your cell",
    Action.right: "turn 90 degrees to your right (clockwise), staying on your cell",
    Action.forward: "move one cell in the direction you are facing (blocked by walls)",
    Action.toggle: "use the object in front of you; nothing here reacts to it",
    Action.done: "declare you are done; it changes nothing, like noop",
}
_SOCCER = {
    Action.pickup: "take the ball from the cell in front of you, or steal it from an opponent "
                   "in front of you who carries it",
    Action.drop: "pass the ball to a free teammate wherever it is; with none, put the ball on "
                 "the free cell in front of you",
}
_COLLECT = {
    Action.pickup: "collect the ball in front of you: it leaves the grid and scores for your "
                   "team",
    Action.drop: "nothing to drop in this game (collected balls are not carried)",
}


def action_infos(kind: str) -> list[ActionInfo]:
    """The 8 actions in the package's index order (``Action`` enum names), with one-line
    descriptions for the game ``kind`` (``soccer``/``collect``)."""
    extra = _SOCCER if kind == SOCCER else _COLLECT
    return [ActionInfo(a.name, extra.get(a) or _COMMON[a]) for a in Action]


@dataclass(frozen=True)
class Seat:
    """One agent as the instruction names it: id, team colour and (level 3) role."""

    agent_id: str
    colour: str
    role: str = ""


@dataclass(frozen=True)
class Setting:
    """The facts of one game the instructions state (all from the real env).

    ``own_goal_side``/``target_goal_side``: ``west``/``east`` ends of the field (Soccer), empty
    where the team has no goal on the field. ``steal_cooldown``: steps (Soccer).
    """

    kind: str
    task: str
    width: int
    height: int
    view_size: int
    max_steps: int
    goals_to_win: int = 0
    num_balls: int = 0
    steal_cooldown: int = 0


def effective_level(level: int, kind: str, has_teammates: bool) -> int:
    """The level actually used: 3 only for Soccer agents with teammates, else at most 2."""
    if level == 3 and not (kind == SOCCER and has_teammates):
        return 2
    return level


def _sides(seat: Seat, teammates: list[Seat], opponents: list[Seat]) -> str:
    mates = ", ".join(s.agent_id for s in teammates)
    team = f"the {seat.colour} team" + (f" with {mates}" if mates else " (on your own)")
    if not opponents:
        return f"You are {seat.agent_id}. You play for {team}; there are no opponents."
    by_colour: dict[str, list[str]] = {}
    for s in opponents:
        by_colour.setdefault(s.colour, []).append(s.agent_id)
    rivals = "; ".join(f"the {c} team ({', '.join(ids)})" for c, ids in by_colour.items())
    return f"You are {seat.agent_id}. You play for {team}. Your opponents: {rivals}."


def _soccer_rules(setting: Setting, seat: Seat, own_side: str, target_side: str) -> list[str]:
    goals = setting.goals_to_win
    rules = [
        f"- The field is {setting.width}x{setting.height} cells inside a wall. Each team's goal "
        "is 3 cells in front of the wall at one end of the field, in the team's colour.",
    ]
    if own_side:
        rules.append(f"- Your team's own goal is at the {own_side} end; you score in the goal at "
                     f"the {target_side} end.")
    else:
        rules.append(f"- You score in the goal at the {target_side} end.")
    rules += [
        "- There is one ball. Use pickup while facing it to take it. Use pickup while facing an "
        f"opponent who carries the ball to steal it; after a steal, both of you cannot steal "
        f"for {setting.steal_cooldown} steps.",
        "- You score by walking into a cell of the opponents' goal while carrying the ball. The "
        "ball then reappears on a random free cell.",
        "- drop passes the ball: it jumps to a teammate who carries nothing (a random one if "
        "several), wherever that teammate is. With no such teammate, drop puts the ball on the "
        "free cell in front of you.",
        f"- The first team to {goals} goals wins. After {setting.max_steps} steps the team with "
        "more goals wins; equal goals is a draw.",
    ]
    return rules


def _collect_rules(setting: Setting, solo: bool) -> list[str]:
    who = "you" if solo else "your team"
    return [
        f"- The grid is {setting.width}x{setting.height} cells inside a wall, with "
        f"{setting.num_balls} balls on the floor.",
        f"- Use pickup while facing a ball to collect it: it leaves the grid and counts for "
        f"{who}. The sooner a ball is collected, the bigger the reward; every other team loses "
        "what the collector gains.",
        "- There is nothing to carry or drop.",
        f"- The game ends when every ball is collected or after {setting.max_steps} steps. The "
        "team with the most balls wins; a tie at the top is a draw.",
    ]


def _observation_help(setting: Setting, mode: str) -> list[str]:
    things = "balls, goal cells and players" if setting.kind == SOCCER else "balls and players"
    lines = [
        f"- You see only a {setting.view_size}x{setting.view_size} square: the cells beside "
        f"you and the {setting.view_size - 1} rows ahead of you. Walls block the view.",
        "- Each step you are told which way you face (NORTH is the top of the map, EAST the "
        f"right), what you carry, and the {things} you see, with their positions as compass "
        "directions from you, e.g. '2 steps to your north-east (1 north, 1 east)'. A wall "
        "directly in front of you is mentioned.",
        "- left and right turn you; only forward moves you, in the direction you face.",
        "- All players act at the same time; the order in which the actions take effect is "
        "random each step.",
    ]
    if mode == "visible_teammates":
        lines.append("- You are also told, for every teammate, which way it faces and what it "
                     "carries, and its position when it is in your view.")
    return lines


def _hints(kind: str, has_teammates: bool) -> list[str]:
    if kind == SOCCER:
        return [
            "- Spread out: do not stand where your teammate already covers the field.",
            "- Get open for passes: when a teammate has the ball, move to free space nearer "
            "the opponents' goal.",
            "- Intercept: when an opponent has the ball, get between it and your goal and face "
            "it to steal.",
            "- One of you attacks with the ball while the other supports or covers the goal.",
            "- Do not all chase the ball at once.",
        ]
    hints = [
        "- Go for the nearest ball first; do not walk across the grid for a far one.",
        "- Anticipate opponents: leave a ball an opponent will reach first and head for "
        "another one.",
    ]
    if has_teammates:
        hints.append("- Teammates should go for different balls.")
    return hints


_ROLE_PLAN = {
    "forward": [
        "- Stay in the opponents' half, ready to receive a pass.",
        "- With the ball, head straight for the opponents' goal and walk into it.",
        "- When an opponent blocks you, pass (drop) rather than lose the ball.",
        "- Without the ball, press the opponent who carries it near their goal.",
    ],
    "defender": [
        "- Stay between the ball and your own goal; do not go deep into the opponents' half.",
        "- Face an attacking opponent who carries the ball and use pickup to steal it.",
        "- When you win the ball, pass it forward at once (drop) unless the way to goal is "
        "open.",
        "- Pick up loose balls in your half before the opponents do.",
    ],
}


def build_instruction(
    setting: Setting,
    seat: Seat,
    teammates: list[Seat],
    opponents: list[Seat],
    *,
    level: int,
    observation_mode: str,
    own_goal_side: str = "",
    target_goal_side: str = "",
) -> str:
    """The full instruction of one agent.

    Args:
        setting: the game's facts.
        seat: the agent (its ``role`` is used at level 3).
        teammates: the agent's teammates (the env's team assignment), with their roles.
        opponents: everyone else.
        level: the *effective* coordination level (1, 2 or 3; see ``effective_level``).
        observation_mode: ``egocentric`` or ``visible_teammates``.
        own_goal_side, target_goal_side: Soccer goal ends (``west``/``east``).

    Raises ``ValueError`` for a level outside 1..3 or level 3 without a role.
    """
    if level not in LEVELS:
        raise ValueError(f"coordination level must be 1, 2 or 3, got {level}")
    if level == 3 and seat.role not in ROLES:
        raise ValueError(f"level 3 needs a role ({', '.join(ROLES)}), got {seat.role!r}")
    game = "Soccer" if setting.kind == SOCCER else "Collect"
    parts = [f"You are playing multigrid {game} ({setting.task}).",
             _sides(seat, teammates, opponents), "", "Rules:"]
    if setting.kind == SOCCER:
        parts += _soccer_rules(setting, seat, own_goal_side, target_goal_side)
    else:
        parts += _collect_rules(setting, solo=not teammates)
    parts += ["", "What you observe:", *_observation_help(setting, observation_mode)]
    parts += ["", "Actions (answer with exactly one action name):"]
    parts += [f"- {a.name}: {a.description}" for a in action_infos(setting.kind)]
    if level >= 2:
        title = "Tips for playing together:" if teammates else "Tips:"
        parts += ["", title, *_hints(setting.kind, bool(teammates))]
    if level == 3:
        parts += ["", f"Your role: {seat.role}.", *_ROLE_PLAN[seat.role], "",
                  "Coordination protocol (you cannot talk; coordinate through play):"]
        parts += [f"- {m.agent_id} is your teammate and plays {m.role}." for m in teammates]
        other = "defender" if seat.role == "forward" else "forward"
        parts += [
            f"- Keep to your role and trust the {other} role to cover its part of the field.",
            "- A pass (drop) reaches a teammate who carries nothing; pass when your role says "
            "the ball should move on.",
            "- If a teammate already chases the ball, take your role's position instead.",
        ]
    goal = ("Win the match: score more goals than the opponents." if setting.kind == SOCCER
            else "Win the game: collect more balls than the other team(s).")
    parts += ["", f"Goal: {goal}"]
    return "\n".join(parts)
