"""Crafter observation text on hand-built semantic maps (docs/families/crafter.md)."""

from __future__ import annotations

import numpy as np
import pytest

from env_server.families.crafter.text import (
    DEAD_TEXT,
    EMPTY_INVENTORY,
    NOTHING_SEEN,
    SLEEPING_TEXT,
    TextOptions,
    long_term_text,
    short_term_text,
)
from env_server.families.crafter.vocab import ITEMS, SEMANTIC_ID, VITALS
from env_server.families.crafter.window import OUTSIDE, Frame, local_window

GRASS, WATER, STONE, TREE = (SEMANTIC_ID[n] for n in ("grass", "water", "stone", "tree"))
COW, PLAYER, TABLE, ZOMBIE = (SEMANTIC_ID[n] for n in ("cow", "player", "table", "zombie"))
FULL = {**dict.fromkeys(VITALS, 9), **dict.fromkeys(ITEMS, 0)}
CURRENT = TextOptions(text_format="current")


def _map(size: int = 20, fill: int = GRASS) -> np.ndarray:
    return np.full((size, size), fill, dtype=np.uint8)


def _frame(semantic: np.ndarray, pos: tuple[int, int], facing=(0, 1), **kw) -> Frame:
    semantic = semantic.copy()
    semantic[pos] = PLAYER
    return Frame(semantic=semantic, pos=pos, facing=facing, inventory=FULL, **kw)


def _scene() -> Frame:
    """Player at (10, 10) facing south on grass; tree 1 north + 3 west, water 2 east and
    4 east + 3 south, stone 2 south, cow 3 south + 4 west."""
    sem = _map()
    sem[7, 9] = TREE
    sem[12, 10] = WATER
    sem[14, 13] = WATER
    sem[10, 12] = STONE
    sem[6, 13] = COW
    return _frame(sem, (10, 10))


def _see_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("- ")]


# -- the two formats ----------------------------------------------------------------------------


def test_legacy_orders_by_semantic_id_and_always_says_steps() -> None:
    text = long_term_text(_scene(), TextOptions())
    assert text == (
        "You see:\n"
        "- water 2 steps to your east\n"
        "- grass 1 steps to your west\n"  # four grass cells at 1: west-most wins
        "- stone 2 steps to your south\n"
        "- tree 4 steps to your north-west\n"
        "- cow 7 steps to your south-west\n"
        "\n"
        "You face grass at your front."
    )


def test_current_orders_by_scan_and_uses_singular_step() -> None:
    assert _see_lines(long_term_text(_scene(), CURRENT)) == [
        "- grass 1 step to your west",
        "- cow 7 steps to your south-west",
        "- tree 4 steps to your north-west",
        "- stone 2 steps to your south",
        "- water 2 steps to your east",
    ]


def test_current_precise_location_vertical_part_first() -> None:
    options = TextOptions(text_format="current", precise_location=True)
    assert _see_lines(long_term_text(_scene(), options)) == [
        "- grass 1 step west",
        "- cow 3 steps south and 4 steps west",
        "- tree 1 step north and 3 steps west",
        "- stone 2 steps south",
        "- water 2 steps east",
    ]


def test_current_all_cells_with_skip_items() -> None:
    options = TextOptions(text_format="current", unique_items=False, skip_items=("grass",))
    assert _see_lines(long_term_text(_scene(), options)) == [
        "- cow 7 steps to your south-west",
        "- tree 4 steps to your north-west",
        "- stone 2 steps to your south",
        "- water 2 steps to your east",
        "- water 7 steps to your south-east",
    ]


def test_unique_items_false_lists_every_cell() -> None:
    options = TextOptions(text_format="current", unique_items=False)
    lines = _see_lines(long_term_text(_scene(), options))
    assert len(lines) == 9 * 7 - 1  # every window cell but the player's
    assert lines[0] == "- grass 7 steps to your north-west"  # first cell scanned: (-4, -3)
    assert sum(line.startswith("- water") for line in lines) == 2


def test_ties_go_west_most_then_north_most() -> None:
    sem = _map(fill=STONE)
    for cell in ((10, 8), (10, 12), (12, 10)):  # tree 2 north, 2 south, 2 east
        sem[cell] = TREE
    frame = _frame(sem, (10, 10))
    for options in (TextOptions(), CURRENT):
        assert "tree 2 steps to your north" in long_term_text(frame, options)
    sem[8, 10] = TREE  # 2 west now comes first
    frame = _frame(sem, (10, 10))
    for options in (TextOptions(), CURRENT):
        assert "tree 2 steps to your west" in long_term_text(frame, options)


def test_skip_items_turn_the_face_line_to_nothing() -> None:
    options = TextOptions(text_format="current", skip_items=("grass", "sand", "path"))
    text = long_term_text(_scene(), options)
    assert text.endswith("\n\nYou face nothing at your front.")
    assert "grass" not in text


def test_edge_only_items_keep_cells_touching_another_kind() -> None:
    sem = _map()
    sem[11:15, 8:13] = WATER  # a 4x5 lake; window spans x 6..14, y 7..13
    frame = _frame(sem, (10, 10))
    options = TextOptions(
        text_format="current", unique_items=False, skip_items=("grass",), edge_only_items=("water",)
    )
    lines = _see_lines(long_term_text(frame, options))
    # 20 cells; not edges: the 3x3 interior-or-window-border block x 12..14, y 9..11 (cells past
    # the window's east border do not count as another kind, as in the reference)
    assert len(lines) == 20 - 9
    assert lines[0] == "- water 3 steps to your north-east"  # (11, 8): first in scan order
    unique = TextOptions(text_format="current", edge_only_items=("water",))
    assert "- water 1 step to your east" in long_term_text(frame, unique)


def test_edge_only_ignores_cells_outside_the_map() -> None:
    sem = _map()
    sem[18:20, :] = WATER  # two water columns on the map's east edge
    frame = _frame(sem, (16, 10))
    options = TextOptions(
        text_format="current", unique_items=False, skip_items=("grass",), edge_only_items=("water",)
    )
    # only the inner column (x 18) touches grass; x 19 borders the map's edge and the window's
    assert _see_lines(long_term_text(frame, options)) == [
        "- water 5 steps to your north-east",
        "- water 4 steps to your north-east",
        "- water 3 steps to your north-east",
        "- water 2 steps to your east",
        "- water 3 steps to your south-east",
        "- water 4 steps to your south-east",
        "- water 5 steps to your south-east",
    ]


# -- face line, edges of the map, nothing seen ----------------------------------------------------


@pytest.mark.parametrize(
    ("facing", "name"), [((-1, 0), "tree"), ((1, 0), "table"), ((0, -1), "water"), ((0, 1), "cow")]
)
def test_face_line_reads_x_then_y(facing: tuple[int, int], name: str) -> None:
    sem = _map(fill=STONE)
    sem[9, 10], sem[11, 10], sem[10, 9], sem[10, 11] = TREE, TABLE, WATER, COW
    for options in (TextOptions(), CURRENT):
        text = long_term_text(_frame(sem, (10, 10), facing=facing), options)
        assert text.endswith(f"You face {name} at your front.")


def test_west_and_north_edges_keep_the_window_aligned() -> None:
    sem = _map()
    sem[2, 0] = TREE
    sem[0, 2] = ZOMBIE
    frame = _frame(sem, (0, 0), facing=(-1, 0))
    window = local_window(frame.semantic, frame.pos)
    assert window.shape == (9, 7) and window[4, 3] == PLAYER
    assert (window[:4, :] == OUTSIDE).all() and (window[:, :3] == OUTSIDE).all()
    assert long_term_text(frame, TextOptions()) == (
        "You see:\n"
        "- grass 1 steps to your south\n"  # (0, 1) is scanned before (1, 0)
        "- tree 2 steps to your east\n"
        "- zombie 2 steps to your south\n"
        "\n"
        "You face nothing at your front."
    )
    assert long_term_text(frame, CURRENT).startswith(
        "You see:\n- grass 1 step to your south\n- zombie 2 steps to your south\n"
    )


def test_east_and_south_edges() -> None:
    sem = _map()
    frame = _frame(sem, (19, 19), facing=(0, 1))
    assert long_term_text(frame, TextOptions()) == (
        "You see:\n- grass 1 steps to your west\n\nYou face nothing at your front."
    )
    frame = _frame(sem, (19, 19), facing=(0, -1))
    assert long_term_text(frame, CURRENT).endswith("You face grass at your front.")


def test_nothing_seen_on_a_one_cell_map() -> None:
    frame = _frame(np.zeros((1, 1), dtype=np.uint8), (0, 0))
    assert long_term_text(frame, TextOptions()) == (
        f"{NOTHING_SEEN}\n\nYou face nothing at your front."
    )


# -- status block and short-term text -------------------------------------------------------------


@pytest.mark.parametrize(
    ("sleeping", "dead", "first"),
    [(True, False, SLEEPING_TEXT), (False, True, DEAD_TEXT), (True, True, SLEEPING_TEXT)],
)
def test_status_block_comes_first(sleeping: bool, dead: bool, first: str) -> None:
    sem = _scene().semantic
    frame = Frame(semantic=sem, pos=(10, 10), facing=(0, 1), inventory=FULL,
                  sleeping=sleeping, dead=dead)
    plain = long_term_text(_scene(), CURRENT)
    assert long_term_text(frame, CURRENT) == f"{first}\n\n{plain}"


def test_inventory_lines_in_crafter_order() -> None:
    inventory = {**FULL, "health": 7, "food": 3, "drink": 0, "energy": 9,
                 "wood": 3, "sapling": 1, "wood_pickaxe": 1}
    assert short_term_text(inventory) == (
        "Your status:\n"
        "- health: 7/9\n"
        "- food: 3/9\n"
        "- drink: 0/9\n"
        "- energy: 9/9\n"
        "\n"
        "Your inventory:\n"
        "- sapling: 1\n"
        "- wood: 3\n"
        "- wood_pickaxe: 1"
    )


def test_empty_inventory_line() -> None:
    text = short_term_text(FULL)
    assert text.endswith(f"- energy: 9/9\n\n{EMPTY_INVENTORY}")
    assert "Your inventory:" not in text
