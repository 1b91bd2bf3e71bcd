"""Inventory and statistics text (the ``inventory`` and ``statistics`` blocks).

Inventory: one ``<letter>: <description>`` line per slot of ``inv_letters`` up to the first 0,
e.g. ``a: a +0 katana (weapon in hand)``.

Statistics (shown in language mode only): one ``Label: value`` line per field of ``blstats``, in
the reference's order. Unknown enum values (hunger, encumbrance, alignment) print as an empty
value, as the reference's map look-up does. Conditions are listed in the order the reference build
produced (its map is unordered), or ``None``.

Bytes are decoded as Latin-1 (the reference decodes its output the same way).
"""

from __future__ import annotations

import numpy as np

_HUNGER = {
    0: "Satiated", 1: "Not Hungry", 2: "Hungry", 3: "Weak", 4: "Fainting", 5: "Fainted",
    6: "Starved",
}  # fmt: skip
_ENCUMBRANCE = {
    0: "Unencumbered", 1: "Burdened", 2: "Stressed", 3: "Strained", 4: "Overtaxed",
    5: "Overloaded",
}  # fmt: skip
_ALIGNMENT = {-128: "None", -1: "Chaotic", 0: "Neutral", 1: "Lawful"}

#: (bit of blstats[25], name) in the reference build's output order.
CONDITIONS: tuple[tuple[int, str], ...] = (
    (2048, "Flying"),
    (1024, "Levitating"),
    (512, "Hallucinating"),
    (256, "Confused"),
    (128, "Stunned"),
    (64, "Deaf"),
    (32, "Blind"),
    (16, "Terminally Ill"),
    (8, "Food Poisoning"),
    (4, "Strangled"),
    (2, "Slimed"),
    (4096, "Riding"),
    (1, "Stoned"),
)


def describe_inventory(inv_letters: np.ndarray, inv_strs: np.ndarray) -> str:
    """Inventory lines.

    Args:
        inv_letters: NLE ``inv_letters``, shape (55,) uint8; 0 ends the list.
        inv_strs: NLE ``inv_strs``, shape (55, 80) uint8; each row a NUL-terminated string.

    Returns:
        ``"a: ...\\nb: ..."`` (no trailing newline), ``""`` for an empty inventory.
    """
    letters = np.asarray(inv_letters).tolist()
    strs = np.asarray(inv_strs, dtype=np.uint8)
    lines = []
    for i, letter in enumerate(letters):
        if letter == 0:
            break
        text = strs[i].tobytes().split(b"\0", 1)[0].decode("latin-1")
        lines.append(f"{chr(letter)}: {text}")
    return "\n".join(lines)


def condition_text(mask: int) -> str:
    """Names of the set condition bits joined by spaces, or ``None``."""
    names = [name for bit, name in CONDITIONS if mask & bit]
    return " ".join(names) if names else "None"


def describe_stats(blstats: np.ndarray) -> str:
    """Statistics lines from NLE ``blstats`` (27 int64), no trailing newline.

    Order: Strength ``[3]/[2]``, Dexterity, Constitution, Intelligence, Wisdom, Charisma
    ``[4..8]``, Depth [12], Gold [13], HP ``[10]/[11]``, Energy ``[14]/[15]``, AC [16],
    XP ``[18]/[19]``, Time [20], Position ``[0]|[1]``, Hunger [21], Monster Level [17],
    Encumbrance [22], Dungeon Number [23], Level Number [24], Score [9], Alignment [26],
    Condition [25].
    """
    b = [int(v) for v in np.asarray(blstats).tolist()]
    return "\n".join((
        f"Strength: {b[3]}/{b[2]}",
        f"Dexterity: {b[4]}",
        f"Constitution: {b[5]}",
        f"Intelligence: {b[6]}",
        f"Wisdom: {b[7]}",
        f"Charisma: {b[8]}",
        f"Depth: {b[12]}",
        f"Gold: {b[13]}",
        f"HP: {b[10]}/{b[11]}",
        f"Energy: {b[14]}/{b[15]}",
        f"AC: {b[16]}",
        f"XP: {b[18]}/{b[19]}",
        f"Time: {b[20]}",
        f"Position: {b[0]}|{b[1]}",
        f"Hunger: {_HUNGER.get(b[21], '')}",
        f"Monster Level: {b[17]}",
        f"Encumbrance: {_ENCUMBRANCE.get(b[22], '')}",
        f"Dungeon Number: {b[23]}",
        f"Level Number: {b[24]}",
        f"Score: {b[9]}",
        f"Alignment: {_ALIGNMENT.get(b[26], '')}",
        f"Condition: {condition_text(b[25])}",
    ))  # fmt: skip
