"""Action vocabularies of the ``nle`` and ``minihack`` families (docs/families/, "Actions").

Every action is a natural-language name that maps to one NetHack key code; the game sends the
key through the env's own action table (``env.actions``: a tuple of key codes), so an action's
env index is ``env.actions.index(key)``.

- NLE: the 86 named commands in the reference order, then the single keys ``a``..``z``,
  ``A``..``Z`` and ``0``..``9`` (148 actions). The reference's ``00``..``99`` are not offered
  (they pass its validity check but crash its env step).
- MiniHack: the 33-name vocabulary intersected with the task's action set, in the task's order.

Descriptions are our own one-liners. Key codes are plain ints (``ord(c)``, ``0x80 | c`` for
Meta, ``0x1F & c`` for Ctrl), so this module imports nothing from nle.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from env_server.game import ActionInfo


def _meta(c: str) -> int:
    return 0x80 | ord(c)


def _ctrl(c: str) -> int:
    return 0x1F & ord(c)


@dataclass(frozen=True)
class KeyAction:
    """One named action: its name, the NetHack key it sends and a one-line description."""

    name: str
    key: int
    description: str

    @property
    def info(self) -> ActionInfo:
        """The public ``ActionInfo`` (name and description)."""
        return ActionInfo(self.name, self.description)


_DIRS = (
    ("north", "k", "K"),
    ("east", "l", "L"),
    ("south", "j", "J"),
    ("west", "h", "H"),
    ("northeast", "u", "U"),
    ("southeast", "n", "N"),
    ("southwest", "b", "B"),
    ("northwest", "y", "Y"),
)

_MOVES: tuple[KeyAction, ...] = tuple(
    KeyAction(
        name,
        ord(key),
        f"move one square {name} (attacks a monster standing there); also answers a direction "
        f"prompt with {name}",
    )
    for name, key, _ in _DIRS
) + tuple(
    KeyAction(
        f"far {name}",
        ord(key),
        f"keep moving {name} until something interesting appears or the way is blocked",
    )
    for name, _, key in _DIRS
)

# The 86 named commands of the reference, in its order.
NLE_COMMANDS: tuple[KeyAction, ...] = (
    *_MOVES,
    KeyAction("up", ord("<"), "climb up the staircase or ladder you are standing on (<)"),
    KeyAction("down", ord(">"), "go down the staircase or ladder you are standing on (>)"),
    KeyAction(
        "wait",
        ord("."),
        "rest in place for one turn; at a direction prompt it means yourself (here/self)",
    ),
    KeyAction(
        "more",
        ord("\r"),
        "press Enter: show the next message after --More--, or confirm the current menu",
    ),
    KeyAction("adjust", _meta("a"), "change the inventory letter of an item"),
    KeyAction("apply", ord("a"), "use a tool or other item (asks which item)"),
    KeyAction("attributes", _ctrl("x"), "show your character's attributes and status"),
    KeyAction("call", ord("C"), "give a name to a monster, an item or a type of item"),
    KeyAction("cast", ord("Z"), "cast a spell you know (asks which spell)"),
    KeyAction("chat", _meta("c"), "talk to an adjacent creature (asks for a direction)"),
    KeyAction("close", ord("c"), "close an adjacent door (asks for a direction)"),
    KeyAction("dip", _meta("d"), "dip an item into a potion or a fountain"),
    KeyAction("drop", ord("d"), "drop one item from your inventory (asks which item)"),
    KeyAction("droptype", ord("D"), "drop several items, chosen from a menu"),
    KeyAction("eat", ord("e"), "eat something from the floor or your inventory (asks what)"),
    KeyAction("esc", _ctrl("["), "press Escape: cancel the current prompt, menu or command"),
    KeyAction("engrave", ord("E"), "write on the floor with your fingers or an item"),
    KeyAction("enhance", _meta("e"), "view your weapon and spell skills and advance them"),
    KeyAction("fire", ord("f"), "shoot or throw what is in your quiver (asks for a direction)"),
    KeyAction(
        "fight",
        ord("F"),
        "attack in a direction even if no monster is shown there (asks for a direction)",
    ),
    KeyAction("force", _meta("f"), "force open the lock of a box here with your wielded weapon"),
    KeyAction("inventory", ord("i"), "show your whole inventory"),
    KeyAction("inventtype", ord("I"), "show the inventory items of one chosen class"),
    KeyAction("invoke", _meta("i"), "invoke the special power of an item"),
    KeyAction("jump", _meta("j"), "jump to a nearby square (only if you are able to jump)"),
    KeyAction("kick", _ctrl("d"), "kick something, e.g. a locked door (asks for a direction)"),
    KeyAction("look", ord(":"), "look at what lies on the floor here"),
    KeyAction("loot", _meta("l"), "open a box or bag on the floor here and use its contents"),
    KeyAction("monster", _meta("m"), "use the special ability of the monster you turned into"),
    KeyAction(
        "move",
        ord("m"),
        "prefix: the next direction moves one square without fighting or picking up",
    ),
    KeyAction(
        "movefar",
        ord("M"),
        "prefix: the next direction moves far without fighting or picking up",
    ),
    KeyAction("offer", _meta("o"), "sacrifice a corpse at an altar you stand on"),
    KeyAction("open", ord("o"), "open an adjacent door (asks for a direction)"),
    KeyAction("pay", ord("p"), "pay a shopkeeper for the items you took"),
    KeyAction("pickup", ord(","), "pick up things lying on the floor here"),
    KeyAction("pray", _meta("p"), "pray to your god for help (asks for confirmation)"),
    KeyAction("puton", ord("P"), "put on a ring, amulet or blindfold"),
    KeyAction("quaff", ord("q"), "drink a potion, or from a fountain you stand on"),
    KeyAction("quiver", ord("Q"), "choose the ammunition that fire shoots"),
    KeyAction("read", ord("r"), "read a scroll, spellbook or other writing"),
    KeyAction("remove", ord("R"), "take off a ring, amulet or blindfold"),
    KeyAction("ride", _meta("R"), "mount or dismount a saddled animal"),
    KeyAction("rub", _meta("r"), "rub a lamp or a stone"),
    KeyAction("rush", ord("g"), "prefix: the next direction rushes until something interesting"),
    KeyAction(
        "rush2",
        ord("G"),
        "prefix: the next direction rushes on, ignoring corridor branches",
    ),
    KeyAction(
        "search",
        ord("s"),
        "search the adjacent squares for hidden doors, passages and "
        "traps (one turn; repeat to search longer)",
    ),
    KeyAction("seeamulet", ord('"'), "show the amulet you are wearing"),
    KeyAction("seearmor", ord("["), "show the armor you are wearing"),
    KeyAction("seegold", ord("$"), "count the gold you carry"),
    KeyAction("seerings", ord("="), "show the rings you are wearing"),
    KeyAction("seespells", ord("+"), "list the spells you know"),
    KeyAction("seetools", ord("("), "show the tools you are using"),
    KeyAction("seetrap", ord("^"), "identify an adjacent trap you know of (asks for a direction)"),
    KeyAction("seeweapon", ord(")"), "show the weapon you are wielding"),
    KeyAction("shell", ord("!"), "shell escape; disabled in this game, it does nothing"),
    KeyAction("sit", _meta("s"), "sit down on the square you are on"),
    KeyAction("swap", ord("x"), "swap your wielded weapon with your secondary weapon"),
    KeyAction("takeoff", ord("T"), "remove one worn piece of armor (asks which)"),
    KeyAction("takeoffall", ord("A"), "take off several worn items, chosen from a menu"),
    KeyAction("throw", ord("t"), "throw an item (asks which item, then a direction)"),
    KeyAction("tip", _meta("T"), "empty a container onto the floor"),
    KeyAction("turnundead", _meta("t"), "turn away undead (priests and knights)"),
    KeyAction("twoweapon", ord("X"), "switch fighting with two weapons on or off"),
    KeyAction("untrap", _meta("u"), "try to disarm an adjacent trap or escape from one"),
    KeyAction("versionshort", ord("v"), "show the game's version"),
    KeyAction("wear", ord("W"), "put on a piece of armor"),
    KeyAction("wield", ord("w"), "wield a weapon (or '-' for bare hands)"),
    KeyAction("wipe", _meta("w"), "wipe your face"),
    KeyAction("zap", ord("z"), "zap a wand (asks which wand, then usually a direction)"),
    KeyAction("space", ord(" "), "press the space bar: dismiss a message or page through text"),
)

# What an uppercase or lowercase key does at the map when no named command above shares it.
# (``O`` options and ``S`` save are disabled by NLE: they only print a message.)
_MAP_ONLY_KEYS = {
    "O": "nothing (options are disabled in this game)",
    "S": "nothing (saving is disabled in this game)",
    "V": "the game's version and history",
}


def letter_map_meaning(letter: str) -> str:
    """What a single-letter key does at the map: the name of the command bound to it
    (``"apply"`` for ``a``) or a short phrase for the three keys no named command shares."""
    at_map = next((c.name for c in NLE_COMMANDS if c.key == ord(letter)), None)
    return at_map if at_map is not None else _MAP_ONLY_KEYS[letter]


def _letter_description(letter: str) -> str:
    return (
        f"type the key {letter}: in a prompt or menu it picks item, entry or answer {letter}; "
        f"at the map it does: {letter_map_meaning(letter)}"
    )


NLE_LETTERS: tuple[KeyAction, ...] = tuple(
    KeyAction(c, ord(c), _letter_description(c))
    for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)

NLE_DIGITS: tuple[KeyAction, ...] = tuple(
    KeyAction(
        d,
        ord(d),
        f"type the digit {d}: a number in a count or menu prompt; at the map it starts a "
        "repeat count for the next command",
    )
    for d in "0123456789"
)

#: The 148 actions of the ``nle`` family, in index order.
NLE_ACTIONS: tuple[KeyAction, ...] = NLE_COMMANDS + NLE_LETTERS + NLE_DIGITS
NLE_DEFAULT_ACTION = "esc"
#: The key the --More-- handler presses (Enter, the ``more`` action).
MORE_KEY = ord("\r")

# The MiniHack vocabulary (33 names, listed in docs/families/minihack.md). Descriptions are
# short and geared to the small MiniHack levels.
_MINIHACK_EXTRA = (
    KeyAction("apply", ord("a"), "use a tool or wand you carry, e.g. a horn (asks which item)"),
    KeyAction("close", ord("c"), "close an adjacent door (asks for a direction)"),
    KeyAction("open", ord("o"), "open an adjacent closed door (asks for a direction)"),
    KeyAction("eat", ord("e"), "eat something (asks what)"),
    KeyAction("force", _meta("f"), "force open the lock of a box here with your weapon"),
    KeyAction("kick", _ctrl("d"), "kick something, e.g. a locked door (asks for a direction)"),
    KeyAction("loot", _meta("l"), "open a box or bag on the floor here"),
    KeyAction("pickup", ord(","), "pick up the things lying on your square"),
    KeyAction("pray", _meta("p"), "pray to your god for help (asks for confirmation)"),
    KeyAction("puton", ord("P"), "put on a ring or amulet you carry"),
    KeyAction("quaff", ord("q"), "drink a potion you carry (or from a fountain here)"),
    KeyAction(
        "search",
        ord("s"),
        "search the adjacent squares for hidden doors and passages (one turn)",
    ),
    KeyAction("zap", ord("z"), "zap a wand you carry (asks which wand, then a direction)"),
)

_BY_NAME = {a.name: a for a in NLE_COMMANDS}
MINIHACK_VOCABULARY: tuple[KeyAction, ...] = (
    *_MOVES,
    _BY_NAME["up"],
    _BY_NAME["down"],
    KeyAction("wait", ord("."), "rest in place for one turn"),
    KeyAction("more", ord("\r"), "press Enter: show the next message after --More--"),
    *_MINIHACK_EXTRA,
)
MINIHACK_DEFAULT_ACTION = "north"


def table_for(
    vocabulary: Sequence[KeyAction], env_keys: Sequence[int]
) -> list[tuple[KeyAction, int]]:
    """The actions of ``vocabulary`` that the env offers, with their env index.

    Args:
        vocabulary: named actions (``NLE_ACTIONS`` or ``MINIHACK_VOCABULARY``).
        env_keys: the env's action table (``env.actions``), key codes in index order.

    Returns:
        ``[(action, env_index)]`` in the env's order (for NLE, whose table holds every key,
        that is the vocabulary order: see :func:`nle_table`). A key appearing twice in the
        vocabulary maps to the first name only.
    """
    by_key: dict[int, KeyAction] = {}
    for action in vocabulary:
        by_key.setdefault(action.key, action)
    table: list[tuple[KeyAction, int]] = []
    taken: set[str] = set()
    for index, key in enumerate(env_keys):
        found = by_key.get(int(key))
        if found is not None and found.name not in taken:
            table.append((found, index))
            taken.add(found.name)
    return table


def nle_table(env_keys: Sequence[int]) -> list[tuple[KeyAction, int]]:
    """The 148 NLE actions in their own order, each with its env index.

    Raises:
        ValueError: the env's action table lacks one of the keys (not the full key set).
    """
    index = {int(k): i for i, k in enumerate(env_keys)}
    missing = [a.name for a in NLE_ACTIONS if a.key not in index]
    if missing:
        raise ValueError(f"the env's action set lacks the keys of {missing}")
    return [(a, index[a.key]) for a in NLE_ACTIONS]
