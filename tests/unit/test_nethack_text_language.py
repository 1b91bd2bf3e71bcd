"""The language observation, the cursor text and the statistics and inventory text on hand-built
glyph maps, plus a differential check of the fast implementation against a plain per-cell one
written from the rules in ``language.py``'s docstring."""

from __future__ import annotations

import random

import numpy as np
import pytest
from nle import nethack as nh

from env_server.families.nethack.text.compass import direction_word, distance_word
from env_server.families.nethack.text.cursor import describe_cursor
from env_server.families.nethack.text.glyphs import BLOCKING_LABELS, glyph_tables, pluralize
from env_server.families.nethack.text.language import describe_map
from env_server.families.nethack.text.status import describe_inventory, describe_stats

CMAP = nh.GLYPH_CMAP_OFF
DARK, VWALL, HWALL = CMAP + 0, CMAP + 1, CMAP + 2
DOORWAY, VCLOSED = CMAP + 12, CMAP + 15
BARS, FLOOR, CORRIDOR, STAIRS_UP, STAIRS_DOWN, FOUNTAIN = (
    CMAP + 17,
    CMAP + 19,
    CMAP + 21,
    CMAP + 23,
    CMAP + 24,
    CMAP + 31,
)
ARROW_TRAP = CMAP + 42


def monster(name: str) -> int:
    return next(i for i in range(nh.NUMMONS) if nh.permonst(i).mname == name)


def obj(name: str) -> int:
    """Object glyph of the first object type with this (static) name."""
    otyp = next(i for i in range(nh.NUM_OBJECTS) if nh.objdescr.from_idx(i).oc_name == name)
    return nh.GLYPH_OBJ_OFF + otyp


JACKAL = nh.GLYPH_MON_OFF + monster("jackal")
SAMURAI = nh.GLYPH_MON_OFF + monster("samurai")
PET_DOG = nh.GLYPH_PET_OFF + monster("little dog")


def room(fill: int = FLOOR) -> np.ndarray:
    return np.full((21, 79), fill, dtype=np.int16)


# ---------------------------------------------------------------- words


@pytest.mark.parametrize(
    ("dx", "dy", "distance", "direction"),
    [
        (1, 0, "adjacent", "east"),
        (0, 1, "adjacent", "north"),
        (-1, -1, "adjacent", "southwest"),
        (2, -2, "very near", "southeast"),
        (3, 1, "near", "eastnortheast"),
        (-1, 3, "near", "northnorthwest"),
        (5, 0, "near", "east"),
        (6, -2, "far", "eastsoutheast"),
        (-2, -7, "far", "southsouthwest"),
        (-19, 4, "far", "westnorthwest"),
        (20, 0, "very far", "east"),
        (-40, -20, "very far", "westsouthwest"),
    ],
)
def test_distance_and_direction_words(dx: int, dy: int, distance: str, direction: str) -> None:
    assert distance_word(dx, dy) == distance
    assert direction_word(dx, dy) == direction


@pytest.mark.parametrize(
    ("noun", "plural"),
    [
        ("jackal", "jackals"),
        ("combat boots", "combat boots"),
        ("bars", "bars"),
        ("lenses", "lenses"),
        ("can of grease", "cans of grease"),
        ("Master of Thieves", "Masters of Thieves"),
        ("ice", "area of ice"),
        ("lava", "area of lava"),
        ("scroll labeled FOO", "scrolls labeled FOO"),
        ("worthless piece of red glass", "worthless pieces of red glass"),
        ("unknown creature causing you dread", "unknown creatures causing you dread"),
        ("swallow top left", "swallows top left"),
        ("boom left", "booms left"),
        ("shield 1", "shields 1"),
        ("fly", "flies"),
        ("monkey", "monkeys"),
        ("fox", "foxes"),
        ("glass", "glasses"),
        ("wolf", "wolves"),
        ("staff", "staves"),
        ("lich", "lichs"),  # the reference's "ch" test never fires
        ("cross", "crosses"),
        ("abacus", "abacuses"),
        ("tame little dog", "tame little dogs"),
    ],
)
def test_pluralize(noun: str, plural: str) -> None:
    assert pluralize(noun) == plural


# ---------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("glyph", "name"),
    [
        (JACKAL, "jackal"),
        (PET_DOG, "tame little dog"),
        (nh.GLYPH_INVIS_OFF, "invisible creature"),
        (nh.GLYPH_DETECT_OFF + monster("newt"), "detected newt"),
        (nh.GLYPH_BODY_OFF + monster("jackal"), "jackal corpse"),
        (nh.GLYPH_RIDDEN_OFF + monster("pony"), "ridden pony"),
        (nh.GLYPH_STATUE_OFF + monster("newt"), "newt statue"),
        (nh.GLYPH_WARNING_OFF + 0, "unknown creature causing you worry"),
        (nh.GLYPH_WARNING_OFF + 5, "unknown creature causing you dread"),
        (nh.GLYPH_SWALLOW_OFF + 8 * 3 + 4, "swallow middle right"),
        (nh.GLYPH_ZAP_OFF + 4 * 2 + 0, "horizontal zap beam"),  # reference's swapped names
        (nh.GLYPH_ZAP_OFF + 1, "vertical zap beam"),
        (nh.GLYPH_EXPLODE_OFF + 9 + 4, "explosion middle center"),
        (STAIRS_UP, "stairs up"),
        (STAIRS_DOWN, "stairs down"),
        (FOUNTAIN, "fountain"),
        (CMAP + 27, "alter"),  # sic
        (BARS, "bars"),
        (VCLOSED, "vertical closed door"),
        (CMAP + 33, "ice"),
        (obj("long sword"), "long sword"),
        (obj("speed boots"), "combat boots"),
        (obj("elven mithril-coat"), "elven mithril-coat"),
        (obj("adornment"), "wooden ring"),
        (obj("Amulet of Yendor"), "Amulet of Yendor"),
        (obj("bag of holding"), "bag"),
        (obj("apple"), "apple"),
        (obj("water"), "clear potion"),
        (obj("identify"), "scroll labeled KERNOD WEL"),
        (obj("force bolt"), "red spellbook"),
        (nh.GLYPH_OBJ_OFF + 383, "glass wand"),  # wand of light
        (obj("gold piece"), "gold piece"),
        (obj("dilithium crystal"), "white dilithium crystal"),
        (obj("worthless piece of white glass"), "worthless piece of white glass"),
        (obj("boulder"), "boulder"),
        (obj("heavy iron ball"), "heavy iron ball"),
        (obj("acid venom"), "splash of acid venom"),
        (obj("strange object"), "strange object"),
        # not screen features: floors, walls, doorways, traps
        (FLOOR, ""),
        (HWALL, ""),
        (DOORWAY, ""),
        (ARROW_TRAP, ""),
        (nh.MAX_GLYPH, ""),
        (-5, ""),
    ],
)
def test_screen_names(glyph: int, name: str) -> None:
    assert glyph_tables().screen_name(glyph) == name


def test_structure_names() -> None:
    tables = glyph_tables()
    assert tables.structure_name(HWALL) == "horizontal wall"
    assert tables.structure_name(DOORWAY) == "doorway"
    assert tables.structure_name(ARROW_TRAP) == "arrow trap"
    assert tables.structure_name(CMAP + 13) == "vertical open door"
    assert tables.structure_name(DARK) == "dark area"
    assert tables.structure_name(FLOOR) == ""
    assert tables.structure_name(CORRIDOR) == ""
    assert tables.structure_name(STAIRS_UP) == ""  # a screen feature instead
    assert tables.structure_name(JACKAL) == ""


# ---------------------------------------------------------------- hand-built maps


def test_item_far_away_and_very_far() -> None:
    glyphs = room()
    glyphs[10, 20] = obj("long sword")  # 10 east of the player at (10, 10)
    glyphs[2, 40] = obj("identify")  # dx 30, dy 8: very far, diagonal part 8, east part 22
    assert describe_map(glyphs, 10, 10) == (
        "scroll labeled KERNOD WEL very far eastnortheast\nlong sword far east"
    )


def test_nothing_named_gives_empty_text() -> None:
    assert describe_map(room(), 40, 10) == ""
    assert describe_map(room(CORRIDOR), 0, 0) == ""


def test_player_cell_is_skipped_and_pet_adjacent() -> None:
    glyphs = room()
    glyphs[10, 40] = SAMURAI
    glyphs[10, 41] = PET_DOG
    assert describe_map(glyphs, 40, 10) == "tame little dog adjacent east"


def test_rays_stop_at_the_first_blocking_structure() -> None:
    glyphs = room()
    # east ray: a doorway (not blocking), a jackal (screen feature, does not stop the ray),
    # a wall (blocking), then another wall that must not be reported
    glyphs[10, 41] = DOORWAY
    glyphs[10, 42] = JACKAL
    glyphs[10, 43] = VWALL
    glyphs[10, 44] = HWALL
    # north ray: a trap at 3, then dark area at 10 (beyond the 9-step reach)
    glyphs[7, 40] = ARROW_TRAP
    glyphs[0, 40] = DARK
    # a wall off every ray is never reported, a far fountain always is
    glyphs[12, 41] = HWALL
    glyphs[20, 70] = FOUNTAIN
    assert describe_map(glyphs, 40, 10) == (
        "fountain very far eastsoutheast\n"
        "arrow trap near north\n"
        "vertical wall near east\n"
        "jackal very near east\n"
        "doorway adjacent east"
    )


def test_rays_stop_at_the_map_edge() -> None:
    glyphs = room()
    glyphs[0, 2] = HWALL  # north of (2, 1), adjacent
    assert describe_map(glyphs, 2, 1) == "horizontal wall adjacent north"


def test_grouping_plural_and_serial_comma() -> None:
    glyphs = room()
    px, py = 40, 10
    glyphs[py - 4, px] = JACKAL  # near north
    glyphs[py, px + 3] = JACKAL  # near east
    glyphs[py, px + 5] = JACKAL  # near east again -> plural line
    glyphs[py + 4, px] = JACKAL  # near south
    glyphs[py + 1, px + 1] = PET_DOG  # adjacent southeast
    glyphs[py - 1, px - 1] = PET_DOG  # adjacent northwest
    glyphs[py + 1, px] = obj("apple")  # adjacent south
    glyphs[py - 1, px] = obj("apple")  # adjacent north
    glyphs[py, px - 1] = obj("apple")  # adjacent west
    assert describe_map(glyphs, px, py) == (
        "jackal near north and south\n"
        "jackals near east\n"
        "apple adjacent north, south, and west\n"
        "tame little dog adjacent southeast and northwest"
    )


def test_mass_noun_quirk_is_reproduced() -> None:
    glyphs = room()
    px, py = 40, 10
    glyphs[py - 3, px] = BARS  # near north, once
    glyphs[py, px + 3] = BARS  # near east ...
    glyphs[py, px + 4] = BARS  # ... twice
    # the reference keys lines by displayed name: "bars" (plural == singular) prints the
    # repeated list twice and loses "north"
    assert describe_map(glyphs, px, py) == "bars near east\nbars near east"


def test_ties_keep_screen_scan_before_rays() -> None:
    glyphs = room()
    glyphs[10, 43] = VWALL  # near east, found by the east ray (blocks it)
    glyphs[10, 44] = JACKAL  # near east too, found by the screen scan
    glyphs[9, 40] = obj("boulder")  # adjacent north
    glyphs[10, 41] = obj("boulder")  # adjacent east
    glyphs[9, 41] = HWALL  # adjacent northeast, between the two boulders in sort order
    assert describe_map(glyphs, 40, 10) == (
        "jackal near east\n"
        "vertical wall near east\n"
        "boulder adjacent north and east\n"
        "horizontal wall adjacent northeast"
    )


def test_odd_inputs() -> None:
    with pytest.raises(ValueError, match="21, 79"):
        describe_map(np.zeros((24, 80), dtype=np.int16), 1, 1)
    wide = room().astype(np.int64)
    wide[10, 41] = 70_000  # out of range: no name (not a wrapped-around glyph)
    wide[10, 39] = JACKAL
    assert describe_map(wide, 40, 10) == "jackal adjacent west"


# ---------------------------------------------------------------- cursor


def test_cursor_text() -> None:
    glyphs = room()
    glyphs[10, 40] = SAMURAI
    glyphs[2, 37] = JACKAL
    blstats = np.zeros(27, dtype=np.int64)
    blstats[0], blstats[1] = 40, 10
    cursor = np.array([11, 40], dtype=np.uint8)  # (row, column); row 11 is map row 10
    assert describe_cursor(glyphs, blstats, cursor) == "Yourself a samurai"
    assert describe_cursor(glyphs, blstats, np.array([3, 37], np.uint8)) == (
        "far northnorthwest jackal"
    )
    # over floor the name is empty and the trailing space stays
    assert describe_cursor(glyphs, blstats, np.array([11, 43], np.uint8)) == "near east "
    # message line, status lines and the top-left map cell are not map positions
    assert describe_cursor(glyphs, blstats, np.array([0, 5], np.uint8)) == ""
    assert describe_cursor(glyphs, blstats, np.array([23, 5], np.uint8)) == ""
    assert describe_cursor(glyphs, blstats, np.array([1, 0], np.uint8)) == ""
    # column 79 (past the 79-column map) names the next row's first cell, as the reference does
    glyphs[6, 0] = obj("apple")
    assert describe_cursor(glyphs, blstats, np.array([6, 79], np.uint8)) == (
        "very far eastnortheast apple"
    )


# ---------------------------------------------------------------- inventory and statistics


def inventory(items: list[tuple[str, str]]) -> tuple[np.ndarray, np.ndarray]:
    letters = np.zeros(55, dtype=np.uint8)
    strs = np.zeros((55, 80), dtype=np.uint8)
    for i, (letter, text) in enumerate(items):
        letters[i] = ord(letter)
        strs[i, : len(text)] = np.frombuffer(text.encode(), dtype=np.uint8)
    return letters, strs


def test_inventory_text() -> None:
    letters, strs = inventory(
        [("a", "a +0 katana (weapon in hand)"), ("d", "27 +0 ya (in quiver)"), ("$", "4 gold")]
    )
    assert describe_inventory(letters, strs) == (
        "a: a +0 katana (weapon in hand)\nd: 27 +0 ya (in quiver)\n$: 4 gold"
    )
    assert describe_inventory(*inventory([])) == ""
    # a 0 letter ends the list even if later slots are filled
    letters[1] = 0
    assert describe_inventory(letters, strs) == "a: a +0 katana (weapon in hand)"


def test_statistics_text() -> None:
    b = [28, 8, 19, 18, 15, 17, 9, 7, 6, 40, 12, 15, 3, 77, 2, 4, 5, 1, 2, 21, 1234, 2, 3, 2, 4]
    blstats = np.array([*b, 32 | 256 | 4096, -1], dtype=np.int64)
    assert describe_stats(blstats) == "\n".join(
        [
            "Strength: 18/19",
            "Dexterity: 15",
            "Constitution: 17",
            "Intelligence: 9",
            "Wisdom: 7",
            "Charisma: 6",
            "Depth: 3",
            "Gold: 77",
            "HP: 12/15",
            "Energy: 2/4",
            "AC: 5",
            "XP: 2/21",
            "Time: 1234",
            "Position: 28|8",
            "Hunger: Hungry",
            "Monster Level: 1",
            "Encumbrance: Strained",
            "Dungeon Number: 2",
            "Level Number: 4",
            "Score: 40",
            "Alignment: Chaotic",
            "Condition: Confused Blind Riding",
        ]
    )
    blstats[25], blstats[26], blstats[21] = 0, -128, 9
    text = describe_stats(blstats).splitlines()
    assert text[-1] == "Condition: None"
    assert text[-2] == "Alignment: None"
    assert text[14] == "Hunger: "  # unknown value: empty, like the reference's map look-up


# ---------------------------------------------------------------- differential check


def plain_describe(glyphs: np.ndarray, px: int, py: int) -> str:
    """Straight from the rules in ``language.py``, one cell at a time, no tables or packing."""
    tables = glyph_tables()
    entries: list[tuple[str, str, str]] = []
    for y in range(21):
        for x in range(79):
            name = tables.screen_name(int(glyphs[y, x]))
            if name and (x, y) != (px, py):
                entries.append(
                    (name, distance_word(x - px, py - y), direction_word(x - px, py - y))
                )
    for sx, sy in ((1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1)):
        for k in range(1, 10):
            x, y = px + k * sx, py + k * sy
            if not (0 <= x < 79 and 0 <= y < 21):
                break
            glyph = int(glyphs[y, x])
            if tables.screen_name(glyph):
                continue
            label = tables.structure_name(glyph)
            if label:
                dx, dy = k * sx, -k * sy
                entries.append((label, distance_word(dx, dy), direction_word(dx, dy)))
                if label in BLOCKING_LABELS:
                    break
    dist_order = ["very far", "far", "near", "very near", "adjacent"]
    dir_order = [direction_word(dx, dy) for dx, dy in CLOCKWISE]
    ordered = [e for d in dist_order for r in dir_order for e in entries if e[1:] == (d, r)]
    first: list[tuple[str, str]] = []
    dirs: dict[tuple[str, str], list[str]] = {}
    for name, dist, direction in ordered:
        if (name, dist) not in dirs:
            first.append((name, dist))
            dirs[(name, dist)] = []
        dirs[(name, dist)].append(direction)
    line_order: list[tuple[str, str]] = []
    line_dirs: dict[tuple[str, str], list[str]] = {}
    for name, dist in first:
        seen = list(dict.fromkeys(dirs[(name, dist)]))
        once = [d for d in seen if dirs[(name, dist)].count(d) == 1]
        more = [d for d in seen if dirs[(name, dist)].count(d) > 1]
        if once:
            line_order.append((name, dist))
            line_dirs[(name, dist)] = once
        if more:
            line_order.append((pluralize(name), dist))
            line_dirs[(pluralize(name), dist)] = more
    lines = []
    for name, dist in line_order:
        ds = line_dirs[(name, dist)]
        if len(ds) == 1:
            text = ds[0]
        elif len(ds) == 2:
            text = f"{ds[0]} and {ds[1]}"
        else:
            text = ", ".join(ds[:-1]) + ", and " + ds[-1]
        lines.append(f"{name} {dist} {text}")
    return "\n".join(lines)


CLOCKWISE = [
    (0, 2), (1, 2), (1, 1), (2, 1), (1, 0), (2, -1), (1, -1), (1, -2),
    (0, -1), (-1, -2), (-1, -1), (-2, -1), (-1, 0), (-2, 1), (-1, 1), (-1, 2),
]  # fmt: skip


def fuzzed_map(rng: random.Random) -> np.ndarray:
    """A map mixing every glyph range, with repeats so that groups and plurals occur."""
    common = [DARK, VWALL, HWALL, FLOOR, FLOOR, FLOOR, CORRIDOR, DOORWAY]
    repeated = [rng.randrange(nh.MAX_GLYPH) for _ in range(6)] + [BARS, JACKAL, FOUNTAIN]
    glyphs = np.array(
        [
            rng.choice(common)
            if (r := rng.random()) < 0.75
            else rng.choice(repeated)
            if r < 0.9
            else rng.randrange(nh.MAX_GLYPH + 1)
            for _ in range(21 * 79)
        ],
        dtype=np.int16,
    ).reshape(21, 79)
    return glyphs


def test_fast_path_matches_the_plain_implementation_on_fuzzed_maps() -> None:
    rng = random.Random(1234)
    for _ in range(150):
        glyphs = fuzzed_map(rng)
        px, py = rng.randrange(79), rng.randrange(21)
        assert describe_map(glyphs, px, py) == plain_describe(glyphs, px, py)


def test_fast_path_matches_the_plain_implementation_on_real_games() -> None:
    from nle.env.tasks import NetHackScore

    from env_server.families.nethack.nle_family import NLE_KWARGS

    env = NetHackScore(
        actions=nh.ACTIONS, observation_keys=("glyphs", "blstats", "tty_chars"), **NLE_KWARGS
    )
    rng = random.Random(7)
    compared = 0
    try:
        for seed in (3, 4):
            env.seed(core=seed, disp=seed, reseed=False)
            obs, _ = env.reset()
            for _ in range(200):
                px, py = int(obs["blstats"][0]), int(obs["blstats"][1])
                assert describe_map(obs["glyphs"], px, py) == plain_describe(obs["glyphs"], px, py)
                compared += 1
                # mostly moves (index 0..15), sometimes any key, Enter on --More--
                if b"--More--" in obs["tty_chars"].tobytes():
                    action = env.actions.index(nh.MiscAction.MORE)
                else:
                    wide = rng.random() >= 0.9
                    action = rng.randrange(len(env.actions) if wide else 16)
                obs, _, terminated, truncated, _ = env.step(action)
                if terminated or truncated:
                    break
    finally:
        env.close()
    assert compared > 100
