"""Observation text of the textworld family: status-line and objective stripping.

The raw strings below are real outputs of a generated coin_collector game (TextWorld 1.7.0,
jericho 3.3.1), copied verbatim; only the 128-space padding of the status line is written as
``_PAD``.
"""

from __future__ import annotations

from env_server.families.textworld.text import (
    observation_text,
    strip_objective,
    strip_status_line,
)

_PAD = " " * 128
_BANNER = "\n".join([
    "",
    "",
    "",
    "",
    "                    ________  ________  __    __  ________        ",
    "                   |        \\|        \\|  \\  |  \\|        \\       ",
    "                    \\$$$$$$$$| $$$$$$$$| $$  | $$ \\$$$$$$$$       ",
    "                      | $$   | $$__     \\$$\\/  $$   | $$          ",
    "                      | $$   | $$  \\     >$$  $$    | $$          ",
    "                      | $$   | $$$$$    /  $$$$\\    | $$          ",
    "                      | $$   | $$_____ |  $$ \\$$\\   | $$          ",
    "                      | $$   | $$     \\| $$  | $$   | $$          ",
    "                       \\$$    \\$$$$$$$$ \\$$   \\$$    \\$$          ",
    "              __       __   ______   _______   __        _______  ",
    "             |  \\  _  |  \\ /      \\ |       \\ |  \\      |       \\ ",
    "             | $$ / \\ | $$|  $$$$$$\\| $$$$$$$\\| $$      | $$$$$$$\\",
    "             | $$/  $\\| $$| $$  | $$| $$__| $$| $$      | $$  | $$",
    "             | $$  $$$\\ $$| $$  | $$| $$    $$| $$      | $$  | $$",
    "             | $$ $$\\$$\\$$| $$  | $$| $$$$$$$\\| $$      | $$  | $$",
    "             | $$$$  \\$$$$| $$__/ $$| $$  | $$| $$_____ | $$__/ $$",
    "             | $$$    \\$$$ \\$$    $$| $$  | $$| $$     \\| $$    $$",
    "              \\$$      \\$$  \\$$$$$$  \\$$   \\$$ \\$$$$$$$$ \\$$$$$$$ ",
    "",
    "",
])
_OBJECTIVE = "Your objective is to retrieve the coin from the floor of the studio."
_ROOM = (
    "-= Cellar =-\nYou are in a cellar. A normal one.\n\n\n\nYou don't like doors? Why not try "
    "going west, that entranceway is unguarded."
)
RESET = f"{_BANNER}{_OBJECTIVE}\n\n{_ROOM}\n\n>{_PAD}-= Cellar =-0/1"
GOAL = f"\n{_OBJECTIVE}\n\n\n>{_PAD}-= Cellar =-0/2"
UNKNOWN = f"\nThat's not a verb I recognise.\n\n>{_PAD}-= Cellar =-0/2"
QUESTION = f"\nAre you sure you want to quit?{_PAD}     -= Cellar =-0/2"
ANSWER = f"\n\n>{_PAD}-= Cellar =-0/2"
WON = (
    "\nYou pick up the coin from the ground.\n\n\n\nYour score has just gone up by one point.\n\n\n"
    "                                                       *** The End ***\n\nYou scored 1 out "
    "of a possible 1, in 7 turns.\n\n\nWould you like to RESTART, RESTORE a saved game, QUIT or "
    f"UNDO the last command?\n> {_PAD}-= Studio =-0/6"
)
# The Dish-Pit banner of a cooking game: a hyphen inside the room name.
DISH_PIT = f"\nYou open the fridge.\n\n\n>{_PAD}-= Dish-Pit =-12/40"


def test_status_line_is_removed_from_every_kind_of_reply() -> None:
    assert strip_status_line(UNKNOWN) == "\nThat's not a verb I recognise."
    assert strip_status_line(QUESTION) == "\nAre you sure you want to quit?"
    assert strip_status_line(ANSWER) == ""
    assert strip_status_line(DISH_PIT) == "\nYou open the fridge."
    assert strip_status_line(WON).endswith("QUIT or UNDO the last command?")
    assert "*** The End ***" in strip_status_line(WON)


def test_status_line_stripping_leaves_other_text_alone() -> None:
    body = "-= Cellar =-\nYou are in a cellar."
    assert strip_status_line(body) == body
    assert strip_status_line("The score is 3/4 here.") == "The score is 3/4 here."
    assert strip_status_line("") == ""
    assert strip_status_line(f"\n>{_PAD}") == ""


def test_objective_removal_keeps_what_follows_its_last_occurrence() -> None:
    text = strip_status_line(RESET)
    assert strip_objective(text, _OBJECTIVE) == _ROOM
    twice = f"{_OBJECTIVE} middle {_OBJECTIVE}\n tail \n"
    assert strip_objective(twice, _OBJECTIVE) == "tail"
    assert strip_objective("  no objective here \n", _OBJECTIVE) == "no objective here"
    assert strip_objective("  text  ", "") == "text"


def test_balrog_text_at_reset_and_after_goal() -> None:
    assert observation_text(RESET, _OBJECTIVE, keep_objective=False) == _ROOM
    assert observation_text(GOAL, _OBJECTIVE, keep_objective=False) == ""
    assert observation_text(UNKNOWN, _OBJECTIVE, keep_objective=False) == (
        "That's not a verb I recognise."
    )


def test_keep_objective_drops_the_banner_but_keeps_the_goal() -> None:
    assert observation_text(RESET, _OBJECTIVE, keep_objective=True) == f"{_OBJECTIVE}\n\n{_ROOM}"
    assert observation_text(GOAL, _OBJECTIVE, keep_objective=True) == _OBJECTIVE
    assert observation_text(UNKNOWN, _OBJECTIVE, keep_objective=True) == (
        "That's not a verb I recognise."
    )
