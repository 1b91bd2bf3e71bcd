"""Instruction texts of the TextWorld families (BALROG's content; wording ours).

Compared with the reference prompts: the step budget stated is the episode's real limit (the
reference states 40, 80 and 25 while every game runs 80 commands), the coin prompt has no garbled
fragment, and the ``goal`` command is listed only when the objective is kept in the observations
(``keep_objective``); otherwise its answer is blank, so offering it would only waste steps.
"""

from __future__ import annotations

from collections.abc import Callable

# (command, meaning) pairs shared by the families.
_LOOK = ("look", "describe the room you are in")
_GOAL = ("goal", "repeat the objective of the game")
_INVENTORY = ("inventory", "list what you are carrying")
_GO = ("go <direction>", "move north, south, east or west through an exit or an open door")
_EXAMINE = ("examine <thing>", "look closely at an object or a container")
_OPEN = ("open <thing>", "open a door or a container")
_CLOSE = ("close <thing>", "close a door or a container")
_TAKE = ("take <thing>", "pick up an object you can see")
_TAKE_FROM = (
    "take <thing> from <container or supporter>",
    "pick up an object from inside or on top of something",
)
_DROP = ("drop <thing>", "put down an object you carry")
_PUT = ("put <thing> on <supporter>", "place an object you carry on a table, shelf, counter, ...")
_INSERT = ("insert <thing> into <container>", "place an object you carry inside an open container")
_UNLOCK = ("unlock <door or container> with <key>", "unlock it with a key you carry that fits it")
_LOCK = ("lock <door or container> with <key>", "lock it with a key you carry that fits it")
_EAT = ("eat <food>", "eat something you carry")
_COOK = (
    "cook <food> with <appliance>",
    "cook food you carry with the stove, the oven or the BBQ of the room you are in",
)
_CUT = ("slice / chop / dice <food> with <knife>", "cut food you carry, also carrying a knife")
_MEAL = (
    "prepare meal",
    "combine the recipe's ingredients you carry into the meal (in the kitchen only)",
)
_TAKE_COIN = ("take coin", "pick up the coin once you are in its room")


def _commands(pairs: list[tuple[str, str]]) -> str:
    return "\n".join(f"- {name}: {meaning}" for name, meaning in pairs)


def _closing(max_steps: int, keep_objective: bool) -> str:
    objective = (
        "The game states your objective when it starts, and the goal command repeats it.\n"
        if keep_objective else ""
    )
    return (
        f"{objective}"
        f"You have at most {max_steps} commands and a single try. Commands that the game does not "
        "understand still use a step. Saving, restoring and transcripts are disabled.\n"
        "\n"
        "Reply with exactly one command."
    )


def _with_goal(pairs: list[tuple[str, str]], keep_objective: bool) -> list[tuple[str, str]]:
    return [_LOOK, _GOAL, *pairs] if keep_objective else [_LOOK, *pairs]


def treasure_hunter(max_steps: int, keep_objective: bool) -> str:
    """Instruction of ``treasure_hunter``: find one object in a maze of rooms."""
    commands = _with_goal(
        [_INVENTORY, _GO, _OPEN, _DROP, _TAKE, _PUT, _TAKE_FROM, _INSERT, _UNLOCK], keep_objective
    )
    return (
        "You are playing a text adventure in a maze of randomly generated rooms. Your task is to "
        "find one particular object and pick it up, exploring room after room. You interact by "
        "typing short commands.\n"
        "\n"
        "Commands:\n"
        f"{_commands(commands)}\n"
        "\n"
        "Tips:\n"
        "- The object you need may sit inside a closed or even locked container.\n"
        "- A key's adjective tells which lock it fits (a rusty key opens a rusty chest).\n"
        "- Keys may lie elsewhere in the maze, possibly locked away themselves; take every key you "
        "can.\n"
        "- Unlocking a door or container does not open it; open it afterwards.\n"
        "\n"
        f"{_closing(max_steps, keep_objective)}"
    )


def the_cooking_game(max_steps: int, keep_objective: bool) -> str:
    """Instruction of ``the_cooking_game``: read the recipe, gather and prepare food, eat."""
    commands = _with_goal(
        [_INVENTORY, _GO, _EXAMINE, _OPEN, _CLOSE, _TAKE, _TAKE_FROM, _DROP, _PUT, _INSERT,
         _UNLOCK, _LOCK, _EAT, _COOK, _CUT, _MEAL],
        keep_objective,
    )
    return (
        "You are playing a text adventure set in a house. You are hungry: find the cookbook, "
        "gather the ingredients its recipe lists, prepare each one as the recipe says, then "
        "prepare the meal and eat it. You interact by typing short commands.\n"
        "\n"
        "Commands:\n"
        f"{_commands(commands)}\n"
        "\n"
        "Tips:\n"
        "- Read the recipe first: examine the cookbook in the kitchen.\n"
        "- The BBQ grills, the stove fries and the oven roasts. Cook each ingredient only the "
        "way the recipe asks: a wrong cooking spoils the recipe, and cooking twice burns the "
        "food and loses the game.\n"
        "- To cook, carry the ingredient and be in the room with the appliance. To cut, carry "
        "both the ingredient and a knife.\n"
        "- Cut ingredients before cooking them.\n"
        "- When everything is ready, prepare the meal in the kitchen, then eat the meal.\n"
        "- Names must match exactly, colours included (a red apple is not a green apple); use the "
        "names the game uses.\n"
        "- Containers described as empty need no examining.\n"
        "\n"
        f"{_closing(max_steps, keep_objective)}"
    )


def coin_collector(max_steps: int, keep_objective: bool) -> str:
    """Instruction of ``coin_collector``: find the coin in a maze."""
    commands = _with_goal([_GO, _TAKE_COIN], keep_objective)
    return (
        "You are playing a text adventure in a maze of randomly generated rooms. Somewhere in it "
        "lies a coin: find the room it is in and pick it up. Dead ends are common; keep track of "
        "where you have been. You interact by typing short commands.\n"
        "\n"
        "Commands:\n"
        f"{_commands(commands)}\n"
        "\n"
        f"{_closing(max_steps, keep_objective)}"
    )


#: Instruction builder per task: ``(max_steps, keep_objective) -> text``.
BUILDERS: dict[str, Callable[[int, bool], str]] = {
    "treasure_hunter": treasure_hunter,
    "the_cooking_game": the_cooking_game,
    "coin_collector": coin_collector,
}
