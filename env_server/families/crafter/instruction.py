"""The Crafter instruction text (BALROG's content; the wording is ours).

It names the game, lists the 17 actions with their descriptions, numbers the 22 achievements in
the reference order, explains the observation briefly and states the goal.
"""

from __future__ import annotations

from env_server.families.crafter.vocab import ACHIEVEMENTS, ACTIONS, achievement_title


def build_instruction() -> str:
    """The full instruction (the same for every episode of the ``default`` task)."""
    actions = "\n".join(f"- {a.name}: {a.description}." for a in ACTIONS)
    achievements = "\n".join(
        f"{i}. {achievement_title(name)}" for i, name in enumerate(ACHIEVEMENTS, start=1)
    )
    return (
        "You are playing Crafter, a two-dimensional survival and crafting game seen from above. "
        "The world is a grid of squares: grassland with trees, lakes, sand, caves of stone with "
        "coal, iron, diamonds and lava. Cows graze on the grass, zombies roam it (most of all at "
        "night) and skeletons shoot arrows in the caves.\n"
        "\n"
        "You have health, food, drink and energy, each at most 9. Food, drink and energy drop "
        "over time: eat, drink water and sleep to refill them. When any of them reaches 0 you "
        "lose health instead, and at 0 health the game ends. You can walk on grass, sand and "
        "path; walking into lava kills you. Mining stone and coal needs a wood pickaxe, iron a "
        "stone pickaxe and diamonds an iron pickaxe. To craft you must stand within one "
        "square (diagonals included) of a table, and also of a furnace for iron tools.\n"
        "\n"
        "Answer with exactly one of these actions:\n"
        f"{actions}\n"
        "\n"
        "The achievements you can unlock:\n"
        f"{achievements}\n"
        "\n"
        "Each observation lists the nearest things around you with their distance and "
        "direction, the square you face, your health, food, drink and energy, and your "
        "inventory. The history of your past actions and observations comes next.\n"
        "\n"
        "Your goal: make as much progress as you can by unlocking as many different "
        "achievements as possible.\n"
        "\n"
        "Play now: choose your next action."
    )
