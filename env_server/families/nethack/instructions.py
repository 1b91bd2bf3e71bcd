"""Instruction texts of the ``nle`` and ``minihack`` families (content of BALROG's prompts).

The wording is ours. Unlike the reference NLE prompt, the action list describes exactly the
actions offered: nothing that cannot be sent (annotate, overview, teleport, travel, minus, apos)
and nothing left out (every one of the 86 commands, the letters and the digits).
"""

from __future__ import annotations

from collections.abc import Sequence

from env_server.families.nethack.actions import (
    NLE_COMMANDS,
    NLE_DIGITS,
    NLE_LETTERS,
    KeyAction,
    letter_map_meaning,
)


def _action_lines(actions: Sequence[KeyAction]) -> str:
    return "\n".join(f"- {a.name}: {a.description}." for a in actions)


def _observation_text(mode: str) -> str:
    if mode == "language":
        return (
            "Each turn you receive the latest game message, a list of what is around you with "
            'distance and compass direction ("language observation"), what the cursor points '
            "at, your statistics and your inventory."
        )
    return (
        "Each turn you receive the latest game message, a list of what is around you with "
        'distance and compass direction ("language observation"), what the cursor points at, '
        "the screen as 24 text rows (the ASCII map: @ is you, the two bottom rows are your "
        "status) and your inventory."
    )


def _letter_summary() -> str:
    at_map = "; ".join(f"{a.name} = {letter_map_meaning(a.name)}" for a in NLE_LETTERS)
    return (
        "- a to z and A to Z: type that single key. In a prompt or a menu it picks the item, "
        "entry or answer with that letter (y and n answer yes/no questions). At the map each "
        f"letter runs its own command: {at_map}.\n"
        f"- {NLE_DIGITS[0].name} to {NLE_DIGITS[-1].name}: type that digit (a number in a count "
        "or menu prompt; at the map it starts a repeat count for the next command)."
    )


def nle_instruction(mode: str = "hybrid") -> str:
    """The NetHack instruction: game, observation format, every offered action, tips, goal.

    Args:
        mode: the text mode of the observations, ``"hybrid"`` (with the ASCII map) or
            ``"language"`` (statistics instead of the map).
    """
    return (
        "You are playing NetHack, a turn-based dungeon exploration game. You explore a dungeon "
        "of many levels, fight or avoid monsters, collect items and try to survive.\n"
        "\n"
        f"{_observation_text(mode)}\n"
        "\n"
        "Actions (answer with exactly one action name):\n"
        f"{_action_lines(NLE_COMMANDS)}\n"
        f"{_letter_summary()}\n"
        "\n"
        "Tips:\n"
        '- When the game asks which item to use ("What do you want to eat? [fg or ?*]"), '
        "answer with the item's letter alone, e.g. f to eat the item in slot f.\n"
        '- When the game asks "In what direction?", answer with a direction such as north or '
        "southwest (wait means yourself).\n"
        "- When the message ends in --More--, use more to see the rest; esc cancels a prompt "
        "or menu you do not want.\n"
        "- Explore each level to find the down staircase (>) and use down while standing on "
        "it to reach the next level.\n"
        "- Read the last message carefully: it tells you what your action did.\n"
        "- If a move bumps into stone or a wall, choose another direction instead of "
        "repeating it.\n"
        "- Use the language observation together with the ASCII map (or the image) to find "
        "your way.\n"
        "- Attack a monster by moving into it.\n"
        "\n"
        "The history of your recent observations and actions follows. Your goal is to get as "
        "deep into the dungeon and as experienced as you can."
    )


def minihack_goal(task: str) -> str:
    """The task goal sentence(s) of a MiniHack task (by its id)."""
    name = task.lower()
    if "boxoban" in name:
        return (
            "This level is a Sokoban-style puzzle. Push every boulder onto a fountain: the "
            "level is solved when each fountain has a boulder resting on it. You push a boulder "
            "by walking into it; it moves one square in the same direction if the square beyond "
            "it is free. Boulders cannot be pulled, so avoid pushing one into a corner or "
            "against a wall where it can no longer reach a fountain. Iron bars are walls."
        )
    if "corridor" in name:
        return (
            "Explore the level and reach the down staircase (>); standing on it completes the task."
        )
    if "quest" in name:
        return (
            "Explore the level, fight the monsters in your way, cross the rooms and obstacles, "
            "and reach the down staircase (>); standing on it completes the task."
        )
    # MazeWalk and any other level: a generic goal, as in the reference prompt.
    return "Make as much progress in this level as you can."


def minihack_instruction(task: str, actions: Sequence[KeyAction], mode: str = "hybrid") -> str:
    """The MiniHack instruction: game, observation format, the task's actions, tip, goal.

    Args:
        task: the MiniHack task id (``MiniHack-MazeWalk-9x9-v0``).
        actions: the actions the task offers, in order.
        mode: ``"hybrid"`` or ``"language"`` (see :func:`nle_instruction`).
    """
    return (
        "You are playing MiniHack, a set of small NetHack levels. You move on a grid, one "
        "square per action.\n"
        "\n"
        f"{_observation_text(mode)}\n"
        "\n"
        "Actions (answer with exactly one action name):\n"
        f"{_action_lines(actions)}\n"
        "\n"
        "Tip: if an action changed nothing (same message, same position), do not repeat it; "
        "try something else.\n"
        "\n"
        f"Your goal: {minihack_goal(task)}\n"
        "\n"
        "The history of your recent observations and actions follows."
    )
