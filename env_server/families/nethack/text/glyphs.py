"""Names of NetHack glyphs as the language observation uses them.

Two names per glyph, both possibly empty:

- the **screen name**: monsters, objects, corpses, statues, warnings, zaps, explosions, swallow
  parts and the cmap *screen features* (closed doors, stairs, fountains, ...). Cells with a
  screen name are reported wherever they are on the level.
- the **structure name**: the cmap label of every other non-floor cmap glyph (walls, doorways,
  open doors, traps, dark area, beams, ...). Those are only reported along the eight rays.

Reference behaviour reproduced on purpose (it is what BALROG's models read):

- the cmap labels are the reference's own words, ``alter`` (sic) included, not NetHack's
  ``symdef`` explanations;
- zap beams use index (glyph - ZAP) mod 4 -> horizontal, vertical, left slant, right slant
  (**defect**: NetHack's index 0 is the vertical beam, so the first two are swapped);
- swallow parts use (glyph - SWALLOW) mod 8, explosions (glyph - EXPLODE) mod 9;
- object names come from the static name/description tables (``objdescr``) indexed by the
  glyph's object type, by class rule (``scroll labeled KERNOD WEL``, ``clear potion``): the text
  shows a type's *default* appearance, not this game's shuffled one, identified or not.

The tables are built once, lazily, from ``nle.nethack`` (``permonst``, ``objclass``, ``objdescr``
and the ``GLYPH_*_OFF`` constants of NetHack 3.6.6) and indexed by the glyph read as uint16, so
that any int16 glyph array (negative values, ``NO_GLYPH`` = ``MAX_GLYPH``) maps to "no name".
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

#: Reference wording of the 96 NetHack 3.6 cmap symbols (index = ``S_*`` order).
CMAP_LABELS: tuple[str, ...] = (
    "dark area", "vertical wall", "horizontal wall", "northwest room corner",
    "northeast room corner", "southwest corner", "southeast corner", "cross wall",
    "t up wall", "t down wall", "t west wall", "t east wall",
    "doorway", "vertical open door", "horizontal open door", "vertical closed door",
    "horizontal closed door", "bars", "tree", "room floor",
    "dark room floor", "corridor floor", "lit corridor floor", "stairs up",
    "stairs down", "ladder up", "ladder down", "alter",
    "grave", "throne", "sink", "fountain",
    "pool", "ice", "lava", "vertical lowered drawbridge",
    "horizontal lowered drawbridge", "vertical raised drawbridge", "horizontal raised drawbridge",
    "air floor",
    "cloud floor", "water floor", "arrow trap", "dart trap",
    "falling rock trap", "squeaky board", "bear trap", "land mine",
    "rolling boulder trap", "sleeping gas trap", "rust trap", "fire trap",
    "pit", "spiked pit", "hole", "trap door",
    "teleportation trap", "level teleporter", "magic portal", "web",
    "statue trap", "magic trap", "anti magic trap", "polymorph trap",
    "vibrating square", "vertical beam", "horizontal beam", "left slant beam",
    "right slant beam", "dig beam", "flash beam", "boom left",
    "boom right", "shield 1", "shield 2", "shield 3",
    "shield 4", "poison cloud", "valid position", "swallow top left",
    "swallow top center", "swallow top right", "swallow middle left", "swallow middle right",
    "swallow bottom left", "swallow bottom center", "swallow bottom right", "explosion top left",
    "explosion top center", "explosion top right", "explosion middle left",
    "explosion middle center",
    "explosion middle right", "explosion bottom left", "explosion bottom center",
    "explosion bottom right",
)  # fmt: skip

#: Floors: never named.
FLOOR_LABELS = frozenset({"room floor", "dark room floor", "corridor floor", "lit corridor floor"})

#: cmap labels that are screen features (reported for the whole level).
SCREEN_FEATURE_LABELS = frozenset({
    "horizontal closed door", "vertical closed door", "bars", "tree", "stairs up", "stairs down",
    "ladder up", "ladder down", "alter", "grave", "throne", "sink", "fountain", "pool", "ice",
    "lava", "vertical raised drawbridge", "horizontal raised drawbridge",
})  # fmt: skip

#: Labels that stop a structure ray once reported (doors and drawbridges are listed for
#: completeness; being screen features they never reach a ray).
BLOCKING_LABELS = frozenset({
    "dark area", "vertical wall", "horizontal wall", "northwest room corner",
    "northeast room corner", "southwest corner", "southeast corner", "cross wall", "t up wall",
    "t down wall", "t west wall", "t east wall", "horizontal closed door", "vertical closed door",
    "horizontal raised drawbridge", "vertical raised drawbridge",
})  # fmt: skip

#: Our wording of the six warning levels (glyph - WARNING offset).
WARNING_TEXTS: tuple[str, ...] = tuple(
    "unknown creature causing you " + level
    for level in ("worry", "concern", "anxiety", "disquiet", "alarm", "dread")
)

SWALLOW_PARTS: tuple[str, ...] = tuple(
    "swallow " + part
    for part in (
        "top left", "top center", "top right", "middle left",
        "middle right", "bottom left", "bottom center", "bottom right",
    )
)  # fmt: skip

EXPLOSION_PARTS: tuple[str, ...] = tuple(
    "explosion " + part
    for part in (
        "top left", "top center", "top right", "middle left", "middle center",
        "middle right", "bottom left", "bottom center", "bottom right",
    )
)  # fmt: skip

#: Reference order (defect: horizontal and vertical swapped relative to NetHack).
ZAP_BEAMS: tuple[str, ...] = (
    "horizontal zap beam", "vertical zap beam", "left slant zap beam", "right slant zap beam",
)  # fmt: skip

_MASS_NOUN_ENDINGS = ("boots", "shoes", "scales", "lenses", "bars")
_FIXED_PLURALS = {
    "can of grease": "cans of grease",
    "Master of Thieves": "Masters of Thieves",
    "ice": "area of ice",
    "lava": "area of lava",
}
_FIRST_WORD_PLURALS = (
    ("boom ", "booms "),
    ("shield ", "shields "),
    ("swallow ", "swallows "),
    ("scroll ", "scrolls "),
    ("worthless piece ", "worthless pieces "),
    ("unknown creature ", "unknown creatures "),
)


def pluralize(noun: str) -> str:
    """Plural of a screen or structure name, by the reference's rules.

    Mass nouns (ending in boots, shoes, scales, lenses, bars) stay unchanged; four fixed cases;
    six phrases pluralise their first word; then consonant+y -> ies; z, x, sh, ss -> +es;
    ff -> ves, f -> ves; s -> +es; otherwise +s. The reference's "ch" test reads out of bounds and
    in practice never matches, so "ch" words take +s (``lichs``), as in the reference's output.
    """
    if not noun:
        return noun
    if noun.endswith(_MASS_NOUN_ENDINGS):
        return noun
    if noun in _FIXED_PLURALS:
        return _FIXED_PLURALS[noun]
    for prefix, plural_prefix in _FIRST_WORD_PLURALS:
        if noun.startswith(prefix):
            return plural_prefix + noun[len(prefix) :]
    last = noun[-1]
    before = noun[-2] if len(noun) >= 2 else ""
    if last == "y" and before not in "aeiou":
        return noun[:-1] + "ies"
    if last in "zx" or before + last in ("sh", "ss"):
        return noun + "es"
    if last == "f":
        return (noun[:-2] if before == "f" else noun[:-1]) + "ves"
    if last == "s":
        return noun + "es"
    return noun + "s"


def _object_name(otyp: int) -> str:
    """Screen name of object type ``otyp`` by its class."""
    from nle import nethack as nh

    descr = nh.objdescr.from_idx(otyp)
    name = descr.oc_name or ""
    desc = descr.oc_descr or ""
    cls = ord(nh.objclass(otyp).oc_class)
    if cls in (
        nh.ILLOBJ_CLASS, nh.WEAPON_CLASS, nh.COIN_CLASS, nh.ROCK_CLASS, nh.BALL_CLASS,
        nh.CHAIN_CLASS,
    ):  # fmt: skip
        return name
    if cls in (nh.ARMOR_CLASS, nh.TOOL_CLASS):
        return desc or name
    if cls == nh.RING_CLASS:
        return desc + " ring"
    if cls == nh.AMULET_CLASS:
        return desc if "Amulet" in desc else desc + " amulet"
    if cls == nh.FOOD_CLASS:
        return name + desc
    if cls == nh.POTION_CLASS:
        return desc + " potion"
    if cls == nh.SCROLL_CLASS:
        return "scroll labeled " + desc
    if cls == nh.SPBOOK_CLASS:
        return desc + " spellbook"
    if cls == nh.WAND_CLASS:
        return desc + " wand"
    if cls == nh.GEM_CLASS:
        return name if desc in name else desc + " " + name
    if cls == nh.VENOM_CLASS:
        return "splash of " + name
    return ""


def _screen_and_structure_names() -> tuple[list[str], list[str]]:
    """Per-glyph (screen name, structure name) lists of length MAX_GLYPH."""
    from nle import nethack as nh

    def mon(index: int) -> str:
        return str(nh.permonst(index).mname)

    screen: list[str] = []
    structure: list[str] = []
    for glyph in range(nh.MAX_GLYPH):
        struct_name = ""
        if glyph >= nh.GLYPH_STATUE_OFF:
            name = mon(glyph - nh.GLYPH_STATUE_OFF) + " statue"
        elif glyph >= nh.GLYPH_WARNING_OFF:
            name = WARNING_TEXTS[glyph - nh.GLYPH_WARNING_OFF]
        elif glyph >= nh.GLYPH_SWALLOW_OFF:
            name = SWALLOW_PARTS[(glyph - nh.GLYPH_SWALLOW_OFF) % 8]
        elif glyph >= nh.GLYPH_ZAP_OFF:
            name = ZAP_BEAMS[(glyph - nh.GLYPH_ZAP_OFF) % 4]
        elif glyph >= nh.GLYPH_EXPLODE_OFF:
            name = EXPLOSION_PARTS[(glyph - nh.GLYPH_EXPLODE_OFF) % 9]
        elif glyph >= nh.GLYPH_CMAP_OFF:
            label = CMAP_LABELS[glyph - nh.GLYPH_CMAP_OFF]
            name = label if label in SCREEN_FEATURE_LABELS else ""
            if not name and label not in FLOOR_LABELS:
                struct_name = label
        elif glyph >= nh.GLYPH_OBJ_OFF:
            name = _object_name(glyph - nh.GLYPH_OBJ_OFF)
        elif glyph >= nh.GLYPH_RIDDEN_OFF:
            name = "ridden " + mon(glyph - nh.GLYPH_RIDDEN_OFF)
        elif glyph >= nh.GLYPH_BODY_OFF:
            name = mon(glyph - nh.GLYPH_BODY_OFF) + " corpse"
        elif glyph >= nh.GLYPH_DETECT_OFF:
            name = "detected " + mon(glyph - nh.GLYPH_DETECT_OFF)
        elif glyph >= nh.GLYPH_INVIS_OFF:
            name = "invisible creature"
        elif glyph >= nh.GLYPH_PET_OFF:
            name = "tame " + mon(glyph - nh.GLYPH_PET_OFF)
        else:
            name = mon(glyph - nh.GLYPH_MON_OFF)
        screen.append(name)
        structure.append(struct_name)
    return screen, structure


@dataclass(frozen=True)
class GlyphTables:
    """Lookup tables indexed by glyph as uint16 (length 65536; unnamed beyond MAX_GLYPH).

    Names are interned: ``names[i]`` is a distinct string for each id ``i`` and id 0 is the
    empty string, so comparing ids is comparing names.

    Attributes:
        has_screen: bool array, True where the glyph has a screen name (for numpy masking).
        screen_id: list, name id of each glyph's screen name (0: none).
        ray_code: list, for ray marching: 0 when the glyph does not contribute to a ray (it has
            a screen name, or no structure name), else its structure name id, negated when the
            structure blocks the ray.
        names: the interned names, ``names[0] == ""``.
        plurals: ``plurals[i]`` is ``pluralize(names[i])``.
    """

    has_screen: np.ndarray
    screen_id: list[int]
    ray_code: list[int]
    names: tuple[str, ...]
    plurals: tuple[str, ...]

    def screen_name(self, glyph: int) -> str:
        """Screen name of one glyph (``""`` when none or out of range)."""
        glyph = int(glyph)
        return self.names[self.screen_id[glyph]] if 0 <= glyph <= 0xFFFF else ""

    def structure_name(self, glyph: int) -> str:
        """Structure name of one glyph (``""`` when none, or when it has a screen name)."""
        glyph = int(glyph)
        return self.names[abs(self.ray_code[glyph])] if 0 <= glyph <= 0xFFFF else ""


@cache
def glyph_tables() -> GlyphTables:
    """Build (once per process) and return the glyph lookup tables."""
    screen, structure = _screen_and_structure_names()
    ids: dict[str, int] = {"": 0}
    size = 1 << 16
    screen_id = [0] * size
    ray_code = [0] * size
    for glyph, (s_name, t_name) in enumerate(zip(screen, structure, strict=True)):
        screen_id[glyph] = ids.setdefault(s_name, len(ids))
        code = ids.setdefault(t_name, len(ids))
        ray_code[glyph] = -code if t_name in BLOCKING_LABELS else code
    has_screen = np.array(screen_id, dtype=np.int32) != 0
    has_screen.setflags(write=False)
    names = tuple(ids)
    return GlyphTables(
        has_screen=has_screen,
        screen_id=screen_id,
        ray_code=ray_code,
        names=names,
        plurals=tuple(pluralize(name) for name in names),
    )
