"""NLE progression table and tracker, and the end-reason parser (docs/families/nle.md)."""

from __future__ import annotations

import numpy as np
import pytest

from env_server.families.nethack.text.progress import (
    PROGRESSION_TABLE,
    NLEProgress,
    parse_end_reason,
)

# BALROG's published progression table (its ``achievements.json``), rounded to 4 decimals.
HARNESS_DLVL = [
    0, .0154, .0175, .0212, .0265, .0354, .0485, .0696, .0977, .1256,
    .1613, .2061, .2566, .2925, .3088, .3249, .3401, .3526, .3655, .3790,
    .3929, .4083, .4258, .4452, .4664, .5068, .5544, .6016, .6465, .6913,
    .7101, .7176, .7232, .7284, .7328, .7369, .7421, .7471, .7537, .7610,
    .7674, .7725, .7772, .7813, .7859, .7890, .7930, .7967, .8018, .8068,
]  # fmt: skip
HARNESS_XP = [
    0, .0185, .0208, .0242, .0291, .0369, .0508, .0745, .1170, .1791,
    .2548, .3326, .4144, .4940, .5779, .6261, .6563, .6810, .7015, .7174,
    .7287, .7371, .7443, .7513, .7586, .7642, .7703, .7760, .7783, .7805,
]  # fmt: skip


def test_table_matches_the_published_values() -> None:
    for level, value in enumerate(HARNESS_DLVL, start=1):
        assert round(PROGRESSION_TABLE[f"Dlvl:{level}"], 4) == pytest.approx(value)
    for level, value in enumerate(HARNESS_XP, start=1):
        assert round(PROGRESSION_TABLE[f"Xp:{level}"], 4) == pytest.approx(value)
    extras = {
        "Astral Plane": 0.8746,
        "Home 1": 0.3661,
        "Home 2": 0.5462,
        "Home 3": 0.5493,
        "Home 4": 0.5611,
        "Home 5": 0.5656,
        "Ascended": 1.0,
    }
    for key, value in extras.items():
        assert round(PROGRESSION_TABLE[key], 4) == pytest.approx(value)
    assert len(PROGRESSION_TABLE) == 50 + 30 + 7
    # exact reference floats, not the rounding
    assert PROGRESSION_TABLE["Dlvl:2"] == 0.015392269075361172
    assert PROGRESSION_TABLE["Xp:30"] == 0.7804561949196475


def bl(depth: int = 1, xp: int = 1, dnum: int = 0, dlevel: int | None = None) -> np.ndarray:
    b = np.zeros(27, dtype=np.int64)
    b[12], b[18], b[23] = depth, xp, dnum
    b[24] = depth if dlevel is None else dlevel
    return b


def test_tracker_is_monotonic_and_records_keys() -> None:
    progress = NLEProgress()
    assert progress.update(bl()) == 0.0
    assert progress.highest_achievement is None  # 0 never beats the initial 0
    assert progress.keys_seen == ["Xp:1", "Dlvl:1"]

    assert progress.update(bl(depth=3)) == PROGRESSION_TABLE["Dlvl:3"]
    assert progress.highest_achievement == "Dlvl:3"
    assert progress.update(bl(depth=2)) == PROGRESSION_TABLE["Dlvl:3"]  # going up loses nothing
    assert progress.highest_achievement == "Dlvl:3"

    assert progress.update(bl(depth=2, xp=4)) == pytest.approx(0.024160136550546978)
    assert progress.highest_achievement == "Xp:4"
    # the zeroed blstats of a death observation are ignored
    assert progress.update(np.zeros(27, dtype=np.int64)) == PROGRESSION_TABLE["Xp:4"]
    assert progress.keys_seen == ["Xp:1", "Dlvl:1", "Dlvl:3", "Dlvl:2", "Xp:4"]
    assert progress.dlvl_list == ["Dlvl:1", "Dlvl:3", "Dlvl:2"]
    assert progress.xplvl_list == ["Xp:1", "Xp:4"]
    assert progress.progression == PROGRESSION_TABLE["Xp:4"]


def test_equal_values_keep_the_first_key() -> None:
    progress = NLEProgress()
    progress.update(bl(depth=5, xp=1))
    progress.update(bl(depth=5, xp=5))  # Xp:5 (.0291) beats Dlvl:5 (.0265)
    assert progress.highest_achievement == "Xp:5"


def test_quest_home_astral_and_ascension() -> None:
    progress = NLEProgress()
    # the Quest home level: dungeon 3, level 1 (status line "Home 1"), depth 15 on that game
    progress.update(bl(depth=15, xp=10, dnum=3, dlevel=1))
    assert progress.highest_achievement == "Home 1"
    assert progress.progression == PROGRESSION_TABLE["Home 1"]
    assert "Dlvl:15" in progress.keys_seen  # the depth still counts, as in the reference
    progress.update(bl(depth=20, xp=10, dnum=3, dlevel=6))  # "Home 6" is not in the table
    assert progress.keys_seen[-1] == "Dlvl:20"
    progress.update(bl(depth=-5, xp=14, dnum=7, dlevel=1))  # Astral Plane
    assert progress.highest_achievement == "Astral Plane"
    progress.update(bl(depth=-4, xp=14, dnum=7, dlevel=2))  # Plane of Water: nothing new
    assert progress.highest_achievement == "Astral Plane"
    assert progress.update(np.zeros(27, dtype=np.int64), ascended=True) == 1.0
    assert progress.highest_achievement == "Ascended"


# ---------------------------------------------------------------- end reason


def screen(lines: list[tuple[int, int, str]]) -> np.ndarray:
    buf = np.full((24, 80), ord(" "), dtype=np.uint8)
    for row, col, text in lines:
        buf[row, col : col + len(text)] = np.frombuffer(text.encode(), dtype=np.uint8)
    return buf


def test_end_reason_on_a_simple_death_screen() -> None:
    tty = screen(
        [
            (1, 0, "You made the top ten list!"),
            (3, 1, "No  Points     Name                                     Hp [max]"),
            (4, 2, "1         12  Agent-Val-Hum-Fem-Neu died in The Dungeons of Doom on"),
            (5, 16, "level 1.  Killed by a jackal.                   -  [16]"),
        ]
    )
    assert parse_end_reason(tty, "DEATH") == "DEATH: died. Killed by a jackal."
    assert NLEProgress().end_reason(tty, "DEATH") == "DEATH: died. Killed by a jackal."


def test_end_reason_on_the_screen_as_nle_draws_it() -> None:
    # NLE's terminal wraps the entry mid-word at column 80; flattening rejoins "Dunge|ons"
    tty = screen(
        [
            (1, 0, "You made the top ten list!"),
            (3, 27, "No  Points     Name"),
            (4, 17, "Hp [max]"),
            (5, 27, "1         80  Agent-Sam-Hum-Mal-Law died in The Dunge"),
            (6, 0, "ons of Doom on"),
            (7, 40, "level 1.  Killed by a sewer rat, while f"),
            (8, 0, "ainted from"),
            (9, 39, "lack of food."),
            (10, 15, "-  [15]"),
        ]
    )
    assert parse_end_reason(tty, "DEATH") == (
        "DEATH: died. Killed by a sewer rat, while fainted from lack of food."
    )


class _Status:
    name = "DEATH"


def test_end_reason_accepts_an_enum_member_and_other_endings() -> None:
    tty = screen(
        [
            (1, 0, "You made the top ten list!"),
            (3, 1, "No  Points     Name                                     Hp [max]"),
            (4, 2, "1          0  Agent-Wiz-Elf-Mal-Cha quit in The Gnomish Mines on"),
            (5, 16, "level 3.                                        11  [12]"),
        ]
    )
    assert parse_end_reason(tty, _Status()) == "DEATH: quit."


def test_end_reason_on_an_aborted_episode() -> None:
    tty = screen(
        [
            (8, 26, "-----"),
            (9, 26, "|.@.|"),
            (22, 0, "Agent the Hatamoto  St:18/01 Dx:15 Co:18 In:9 Wi:7 Ch:7 Lawful S:0"),
            (23, 0, "Dlvl:1 $:0 HP:15(15) Pw:2(2) AC:4 Xp:1/0 T:8"),
        ]
    )
    # the reference would return word-position garbage here
    assert parse_end_reason(tty, "ABORTED") == "ABORTED (no end-of-game screen)"


def test_end_reason_with_several_entries() -> None:
    rows = [
        (1, 0, "You made the top ten list!"),
        (3, 1, "No  Points     Name                                     Hp [max]"),
        (4, 2, "1         80  Agent-Sam-Hum-Mal-Law died in The Dungeons of Doom on"),
        (5, 16, "level 1.  Killed by a sewer rat.                -  [15]"),
        (7, 2, "2          4  Agent-Kni-Hum-Mal-Law died in The Dungeons of Doom on"),
        (8, 16, "level 1.  Killed by a jackal.                   -  [16]"),
    ]
    # an NLE instance keeps its record file across resets: the own entry is not marked
    assert parse_end_reason(screen(rows), "DEATH") == ("DEATH (own top-ten entry not identifiable)")
    # a "You reached the n-th place" sentence names the own rank
    rows[0] = (1, 0, "You reached the 2nd place on the top 100 list.")
    assert parse_end_reason(screen(rows), "DEATH") == "DEATH: died. Killed by a jackal."


def test_end_reason_on_a_garbled_list() -> None:
    tty = screen(
        [
            (3, 1, "No  Points     Name                                     Hp [max]"),
            (4, 2, "first entry is not a rank"),
        ]
    )
    assert parse_end_reason(tty, "DEATH") == "DEATH (end-of-game screen not understood)"
