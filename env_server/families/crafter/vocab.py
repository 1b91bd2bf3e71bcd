"""Fixed vocabularies of the Crafter family (docs/families/crafter.md), our own wording.

Pure data, no crafter import, so the text renderer and its tests stay light. The unit tests check
every table here against crafter 1.8.3 itself (action order, semantic ids, item order,
achievement names).
"""

from __future__ import annotations

from env_server.game import ActionInfo

# The 17 actions in crafter's index order (``crafter.constants.actions``); the names are BALROG's,
# the descriptions ours (facts from crafter's ``data.yaml`` and ``objects.py``).
ACTIONS: tuple[ActionInfo, ...] = (
    ActionInfo("Noop", "do nothing this turn"),
    ActionInfo("Move West", "face west, then step one square west if it is free"),
    ActionInfo("Move East", "face east, then step one square east if it is free"),
    ActionInfo("Move North", "face north, then step one square north if it is free"),
    ActionInfo("Move South", "face south, then step one square south if it is free"),
    ActionInfo(
        "Do",
        "use the square you face: gather its material (wood from a tree, stone, coal, iron or "
        "diamond with the right pickaxe, sometimes a sapling from grass), drink from water, "
        "attack a creature, eat a cow you defeat or a ripe plant",
    ),
    ActionInfo("Sleep", "fall asleep while your energy is below 9; you wake when it is full"),
    ActionInfo("Place Stone", "put 1 stone on the faced square (grass, sand, path, water or lava)"),
    ActionInfo("Place Table", "build a table on the faced grass, sand or path square (2 wood)"),
    ActionInfo(
        "Place Furnace", "build a furnace on the faced grass, sand or path square (4 stone)"
    ),
    ActionInfo("Place Plant", "plant a sapling on the faced grass square (1 sapling)"),
    ActionInfo("Make Wood Pickaxe", "craft a wood pickaxe next to a table (1 wood)"),
    ActionInfo("Make Stone Pickaxe", "craft a stone pickaxe next to a table (1 wood, 1 stone)"),
    ActionInfo(
        "Make Iron Pickaxe",
        "craft an iron pickaxe next to a table and a furnace (1 wood, 1 coal, 1 iron)",
    ),
    ActionInfo("Make Wood Sword", "craft a wood sword next to a table (1 wood)"),
    ActionInfo("Make Stone Sword", "craft a stone sword next to a table (1 wood, 1 stone)"),
    ActionInfo(
        "Make Iron Sword",
        "craft an iron sword next to a table and a furnace (1 wood, 1 coal, 1 iron)",
    ),
)
ACTION_INDEX: dict[str, int] = {a.name: i for i, a in enumerate(ACTIONS)}
DEFAULT_ACTION = "Noop"
NOOP_INDEX = ACTION_INDEX[DEFAULT_ACTION]

# The 22 achievements as crafter names them, in the order the instruction numbers them
# (the reference's order); ``achievement_title`` gives the display form ("Collect Wood").
ACHIEVEMENTS: tuple[str, ...] = (
    "collect_wood",
    "place_table",
    "eat_cow",
    "collect_sapling",
    "collect_drink",
    "make_wood_pickaxe",
    "make_wood_sword",
    "place_plant",
    "defeat_zombie",
    "collect_stone",
    "place_stone",
    "eat_plant",
    "defeat_skeleton",
    "make_stone_pickaxe",
    "make_stone_sword",
    "wake_up",
    "place_furnace",
    "collect_coal",
    "collect_iron",
    "make_iron_pickaxe",
    "make_iron_sword",
    "collect_diamond",
)


def achievement_title(name: str) -> str:
    """``"collect_wood"`` -> ``"Collect Wood"``."""
    return name.replace("_", " ").title()


# Crafter's semantic ids 0..18: material ids (0 = unset) then object ids, as produced by
# ``crafter.engine.SemanticView`` for ``crafter.Env``.
SEMANTIC_NAMES: tuple[str, ...] = (
    "None",
    "water",
    "grass",
    "stone",
    "path",
    "sand",
    "tree",
    "lava",
    "coal",
    "iron",
    "diamond",
    "table",
    "furnace",
    "player",
    "cow",
    "zombie",
    "skeleton",
    "arrow",
    "plant",
)
SEMANTIC_ID: dict[str, int] = {name: i for i, name in enumerate(SEMANTIC_NAMES)}
PLAYER_ID = SEMANTIC_ID["player"]
#: Names an option may list in ``skip_items`` / ``edge_only_items`` (everything that can appear
#: in the "You see" block: not the unset id 0 and not the player itself).
LISTABLE_ITEMS: tuple[str, ...] = tuple(n for n in SEMANTIC_NAMES if n not in ("None", "player"))

# Inventory: the four vitals (shown as ``<n>/9``) then the other items in crafter's order.
VITALS: tuple[str, ...] = ("health", "food", "drink", "energy")
VITAL_MAX = 9
ITEMS: tuple[str, ...] = (
    "sapling",
    "wood",
    "stone",
    "coal",
    "iron",
    "diamond",
    "wood_pickaxe",
    "stone_pickaxe",
    "iron_pickaxe",
    "wood_sword",
    "stone_sword",
    "iron_sword",
)
