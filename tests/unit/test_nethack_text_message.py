"""Message extraction from tty_chars and --More-- skipping, on
hand-built 24x80 screens and a scripted step function."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from env_server.families.nethack.text.message import extract_message, trim
from env_server.families.nethack.text.more import MoreResult, skip_more


def screen(rows: dict[int, tuple[int, str]] | None = None) -> np.ndarray:
    """A 24x80 uint8 screen of spaces with ``{row: (column, text)}`` written in."""
    buf = np.full((24, 80), ord(" "), dtype=np.uint8)
    for row, (col, text) in (rows or {}).items():
        data = text.encode("latin-1")
        assert col + len(data) <= 80, (row, text)
        buf[row, col : col + len(data)] = np.frombuffer(data, dtype=np.uint8)
    return buf


STATUS = {
    22: (0, "Agent the Hatamoto             St:18/01 Dx:15 Co:18 In:9 Wi:7 Ch:7 Lawful S:0"),
    23: (0, "Dlvl:1 $:0 HP:15(15) Pw:2(2) AC:4 Xp:1/0 T:1"),
}


def test_trim_rule() -> None:
    assert trim(b"  hello world  ") == b"hello world"
    assert trim(b"\x1a hi \x1a") == b"hi"
    assert trim(b"      ") == b""
    # the reference's quirk: a lone non-blank byte at the very end trims to nothing
    assert trim(b"     x") == b""
    assert trim(b"x") == b""
    assert trim(b"x     ") == b"x"
    assert trim(b"    xy") == b"xy"


def test_empty_screen_and_map_without_message() -> None:
    assert extract_message(screen()) == ""
    # normal play without a message: row 0 blank, row 1 is the top of the map
    rows = {1: (26, "-----"), 2: (26, "|.@.|"), **STATUS}
    assert extract_message(screen(rows)) == ""


def test_single_line_message() -> None:
    rows = {0: (0, "You hit the jackal.  The jackal bites!"), 9: (26, "|d@.|"), **STATUS}
    assert extract_message(screen(rows)) == "You hit the jackal.  The jackal bites!"


def test_single_line_with_of_that_is_not_a_page_marker() -> None:
    rows = {0: (0, "You see here a scroll of light (of 3)."), **STATUS}
    # " of " is found but "(" is not two bytes before it: no stop, the message is row 0
    assert extract_message(screen(rows)) == "You see here a scroll of light (of 3)."


def test_lone_last_character_on_top_row_is_dropped() -> None:
    assert extract_message(screen({0: (79, "x")})) == ""


def test_more_on_the_top_row() -> None:
    rows = {0: (0, "You kill the newt!--More--"), **STATUS}
    assert extract_message(screen(rows)) == "You kill the newt!--More--"


def test_multi_line_menu_ending_in_end() -> None:
    rows = {
        0: (32, "What do you want to name?"),
        2: (32, "m - a monster"),
        3: (32, "i - a particular object in inventory"),
        4: (32, "a - record an annotation for the current level"),
        5: (32, "(end)"),
        9: (26, "|d@.|"),
        **STATUS,
    }
    assert extract_message(screen(rows)) == (
        "What do you want to name?\n"
        "m - a monster\n"
        "i - a particular object in inventory\n"
        "a - record an annotation for the current level\n"
        "(end)"
    )


def test_rows_are_cut_at_the_indent_of_the_first_line() -> None:
    # the map left of column 40 (the menu's indent) is not part of the text
    rows = {
        0: (40, "Things that are here:"),
        1: (10, "|....|"),
        2: (20, "|" + "." * 20 + "@..."),  # columns 20..44: only ".@..." lies right of 40
        3: (40, "a jackal corpse"),
        4: (40, "--More--"),
    }
    assert (
        extract_message(screen(rows)) == "Things that are here:\n.@...\na jackal corpse\n--More--"
    )


def test_page_marker_stops_the_text() -> None:
    rows = {
        0: (1, "The Dungeons of Doom: levels 1 to 29"),
        1: (1, "a - * One way stair to The Elemental Planes: 1"),
        2: (1, "b -   Stair to The Gnomish Mines: 4"),
        3: (1, "(1 of 3)"),
        4: (1, "this row is never read"),
    }
    assert extract_message(screen(rows)) == (
        "The Dungeons of Doom: levels 1 to 29\n"
        "a - * One way stair to The Elemental Planes: 1\n"
        "b -   Stair to The Gnomish Mines: 4\n"
        "(1 of 3)"
    )


def test_no_stop_marker_gives_only_the_top_row() -> None:
    # a pop-up without --More--/(end)/page marker: only row 0 is the message
    rows = {0: (30, "Some title"), 1: (30, "line two"), **STATUS}
    assert extract_message(screen(rows)) == "Some title"


def nle_death_screen(killer: str = "Killed by a jackal.") -> np.ndarray:
    """The top-ten screen as NLE's terminal draws it (layout copied from a real game)."""
    entry = "1         80  Agent-Sam-Hum-Mal-Law died in The Dunge"
    rows = {
        1: (0, "You made the top ten list!"),
        3: (27, "No  Points     Name"),
        4: (17, "Hp [max]"),
        5: (27, entry),
        6: (0, "ons of Doom on"),
        7: (40, "level 1.  " + killer),
        8: (15, "-  [15]"),
    }
    assert 27 + len(entry) == 80  # the word is cut at the last column, as on a real screen
    return screen(rows)


def test_death_screen_reproduces_the_shifted_rows() -> None:
    # Row 0 is blank, so the reference reads every row from one byte before its start: the byte
    # cut off at column 79 ("e" of "Dungeons") reappears at the start of the next line. The text
    # stops at the second blank row in a row and keeps its trailing newline.
    assert extract_message(nle_death_screen()) == (
        "You made the top ten list!\n"
        "No  Points     Name\n"
        "Hp [max]\n"
        "1         80  Agent-Sam-Hum-Mal-Law died in The Dunge\n"
        "eons of Doom on\n"
        "level 1.  Killed by a jackal.\n"
        "-  [15]\n"
    )


def test_death_screen_with_a_top_line() -> None:
    rows = {
        0: (0, "Goodbye Agent the Samurai..."),
        1: (0, " No  Points     Name                                   Hp [max]"),
        2: (0, "  1     14  Agent-Sam-Hum-Mal-Law died in The Dungeons of Doom"),
        3: (0, "            on level 1.  Killed by a newt.              -  [15]"),
        6: (0, "not reached: two blank rows came first"),
    }
    assert extract_message(screen(rows)) == (
        "Goodbye Agent the Samurai...\n"
        "No  Points     Name                                   Hp [max]\n"
        "1     14  Agent-Sam-Hum-Mal-Law died in The Dungeons of Doom\n"
        "on level 1.  Killed by a newt.              -  [15]\n"
    )


def test_bad_shape_is_rejected() -> None:
    with pytest.raises(ValueError, match="24, 80"):
        extract_message(np.zeros((21, 79), dtype=np.uint8))


class ScriptedEnv:
    """A step function that plays back fixed screens (and records what it was given)."""

    def __init__(self, screens: list[tuple[np.ndarray, float, bool, bool]]):
        self.screens = list(screens)
        self.actions: list[int] = []

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        self.actions.append(action)
        chars, reward, terminated, truncated = self.screens.pop(0)
        info = {"press": len(self.actions)}
        return {"tty_chars": chars}, reward, terminated, truncated, info


MORE = 19


def test_skip_more_accumulates_a_chain() -> None:
    first = screen({0: (0, "You hit the jackal.--More--")})
    env = ScriptedEnv(
        [
            (screen({0: (0, "The jackal is killed!--More--")}), 4.0, False, False),
            (screen({0: (0, "Welcome to experience level 2.")}), 0.5, False, False),
        ]
    )
    result = skip_more({"tty_chars": first}, env.step, MORE, reward=1.0, info={"agent": True})
    assert isinstance(result, MoreResult)
    assert result.message == (
        "You hit the jackal.\nThe jackal is killed!\nWelcome to experience level 2."
    )
    assert result.presses == 2
    assert env.actions == [MORE, MORE]
    assert result.reward == 5.5
    assert result.info == {"press": 2}
    assert not result.terminated and not result.truncated
    assert result.obs["tty_chars"] is not first


def test_skip_more_without_more_changes_nothing() -> None:
    obs = {"tty_chars": screen({0: (0, "It's a wall.")})}
    env = ScriptedEnv([])
    result = skip_more(obs, env.step, MORE, reward=2.0, info={"agent": True})
    assert (result.message, result.presses, result.reward) == ("It's a wall.", 0, 2.0)
    assert result.obs is obs and result.info == {"agent": True}
    assert env.actions == []


def test_skip_more_stops_when_the_game_ends() -> None:
    env = ScriptedEnv(
        [
            (screen({0: (0, "You die...--More--")}), 0.0, True, False),
            (screen({0: (0, "never shown")}), 0.0, False, False),
        ]
    )
    start = {"tty_chars": screen({0: (0, "The jackal bites!--More--")})}
    result = skip_more(start, env.step, MORE)
    assert result.message == "The jackal bites!\nYou die...--More--"
    assert result.presses == 1 and result.terminated
    # nothing is pressed when the agent's own step already ended the game
    done = skip_more(start, env.step, MORE, truncated=True)
    assert done.presses == 0 and done.message == "The jackal bites!--More--" and done.truncated


def test_skip_more_is_bounded() -> None:
    looping = screen({0: (0, "Again--More--")})
    env = ScriptedEnv([(looping, 0.0, False, False)] * 5)
    result = skip_more({"tty_chars": looping}, env.step, MORE, max_presses=3)
    assert result.presses == 3
    assert result.message == "Again\nAgain\nAgain\nAgain--More--"
    with pytest.raises(ValueError):
        skip_more({"tty_chars": looping}, env.step, MORE, max_presses=-1)
