"""Action list and instruction text of the BabaIsAI family (our wording).

Besides the reference's content (the game, the five actions, tips on reading and changing rules)
it states two facts of this implementation: the observation format, and that the episode ends as
lost when nothing is YOU any more (the reference silently swapped the puzzle instead).
"""

from __future__ import annotations

from env_server.game import ActionInfo

# Index order = the engine's action indices 0..4.
ACTIONS: tuple[ActionInfo, ...] = (
    ActionInfo("idle", "do nothing for one step"),
    ActionInfo("up", "move one square up"),
    ActionInfo("right", "move one square to the right"),
    ActionInfo("down", "move one square down"),
    ActionInfo("left", "move one square to the left"),
)
ACTION_NAMES: tuple[str, ...] = tuple(a.name for a in ACTIONS)
ACTION_INDEX: dict[str, int] = {name: i for i, name in enumerate(ACTION_NAMES)}
DEFAULT_ACTION = "idle"


def build_instruction(max_steps: int) -> str:
    """The full instruction: game, actions, observation format, tips and a closing cue.

    ``max_steps``: the episode's step limit, stated in the text.
    """
    action_lines = "\n".join(f"- {a.name}: {a.description}." for a in ACTIONS)
    return (
        "You are playing Baba Is You, a puzzle game on a grid in which the rules of the level "
        "are themselves objects on the map and can be rewritten.\n"
        "\n"
        "Every rule is a line of word blocks, read left to right or top to bottom, such as "
        "BABA IS YOU (you control every baba) or KEY IS WIN (touching a key wins). Properties "
        "include YOU (controlled by you), WIN (reach it to win), STOP (cannot be walked "
        "into), PUSH (can be pushed) and LOSE (touching it loses). A rule such as BALL IS "
        "KEY turns every ball into a key.\n"
        "\n"
        "Actions:\n"
        f"{action_lines}\n"
        "\n"
        "Each observation lists the active rules, then the objects and word blocks on the map "
        "with their positions counted in squares from the object you control; word blocks are "
        "written as rule followed by the word, e.g. rule `win` 2 steps to the right and 1 step "
        "up.\n"
        "\n"
        "Tips:\n"
        "- Look at every object and every word block before you move.\n"
        "- Word blocks can always be pushed; walking into one pushes it (and any blocks behind "
        "it) one square, unless something that is STOP or the edge of the map is in the way.\n"
        "- Pushing a word into a line creates a rule; pushing it out of its line breaks that "
        "rule. Rules change as soon as the words move.\n"
        "- Usually you win by reaching an object that is WIN, but which object is WIN, and "
        "which object you are, can both be changed.\n"
        "- If you are stuck, think creatively: break a rule that blocks you, form a new one, "
        "make another object YOU, or change what is WIN.\n"
        "- If no object is YOU any more, nothing can move and the episode ends as a loss.\n"
        f"- You have at most {max_steps} steps; every action, idle included, uses one.\n"
        "\n"
        "Now play: choose your next action."
    )
