"""Action list and instruction text of the BabyAI family (docs/families/babyai.md).

The wording is ours. Compared with the reference prompt it corrects two facts: ``pick up`` acts on
the cell in front of the agent (not below it), and toggling a box destroys it.
"""

from __future__ import annotations

from env_server.game import ActionInfo

# Index order = minigrid's action indices 0..5; ``done`` (6) is not exposed.
ACTIONS: tuple[ActionInfo, ...] = (
    ActionInfo("turn left", "turn 90 degrees to your left, staying on the same square"),
    ActionInfo("turn right", "turn 90 degrees to your right, staying on the same square"),
    ActionInfo("go forward", "move one square ahead if it is empty or an open door"),
    ActionInfo(
        "pick up",
        "pick up the object on the square directly in front of you (only with empty hands)",
    ),
    ActionInfo("drop", "put the object you carry on the square in front of you, if it is empty"),
    ActionInfo(
        "toggle",
        "use the square in front of you: open or close a door, unlock a locked door while "
        "carrying a key of its colour; toggling a box destroys it",
    ),
)

ACTION_NAMES: tuple[str, ...] = tuple(a.name for a in ACTIONS)
ACTION_INDEX: dict[str, int] = {name: i for i, name in enumerate(ACTION_NAMES)}
DEFAULT_ACTION = "go forward"


def build_instruction(mission: str) -> str:
    """The full instruction for one episode: game, goal (``mission``), actions, tips, cue."""
    goal = mission.strip().rstrip(".")
    action_lines = "\n".join(f"- {a.name}: {a.description}." for a in ACTIONS)
    return (
        "You are playing BabyAI, a small grid-world navigation game. You move square by square "
        "through rooms bounded by walls; rooms may hold keys, balls, boxes and doors.\n"
        "\n"
        f"Your goal: {goal}.\n"
        "\n"
        "Actions:\n"
        f"{action_lines}\n"
        "\n"
        "Each turn you receive an observation listing what you can see: walls and objects with "
        "their distance in steps to your left or right and forward. You cannot see behind you, "
        "and walls and closed doors hide what lies beyond them.\n"
        "\n"
        "Tips:\n"
        "- You act on an object from the square next to it: face it first, then pick it up or "
        "toggle it.\n"
        "- To go to an object, stand next to it and face it.\n"
        "- To put an object next to another, drop it on a square sharing a side with the other.\n"
        "- If your observation did not change after an action, do not repeat that action; try "
        "another one.\n"
        "\n"
        "Now it is your turn: choose your next action."
    )
