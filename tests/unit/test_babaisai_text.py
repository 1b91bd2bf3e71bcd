"""BabaIsAI text: the reference format and ``text_fixes`` (docs/families/babaisai.md)."""

from __future__ import annotations

from env_server.families.babaisai.rules import ruleset_for
from env_server.families.babaisai.sketch import board_from_sketch
from env_server.families.babaisai.text import NO_YOU_NOTICE, observation_text, offset_phrase

# Laid out so that a composed example of the reference format is part of the observation:
# baba at sketch (4, 4); WALL IS STOP and BABA IS YOU read vertically down column 0.
EXAMPLE = [
    ". . . . . wall . . . IS",
    "WALL . . . . . . . . .",
    "IS . . . . . . . . key",
    "STOP . . . . . . . . .",
    ". . . . baba wall . . . .",
    ". . . . . . ball . . .",
    "BABA . . . . . . . . .",
    "IS . . . . . . . . .",
    "YOU . . . . . . . . .",
]

EXPECTED = """Active rules:
wall is stop
baba is you

Objects on the map:
wall 1 step to the right and 4 step up
rule `is` 5 steps to the right and 4 step up
rule `wall` 4 step to the left and 3 step up
rule `is` 4 step to the left and 2 step up
key 5 steps to the right and 2 step up
rule `stop` 4 step to the left and 1 step up
wall 1 step to the right
ball 2 steps to the right and 1 step down
rule `baba` 4 step to the left and 2 steps down
rule `is` 4 step to the left and 3 steps down
rule `you` 4 step to the left and 4 steps down"""

SPEC_EXAMPLE_LINES = [
    "wall 1 step to the right and 4 step up",
    "rule `is` 5 steps to the right and 4 step up",
    "rule `wall` 4 step to the left and 3 step up",
    "key 5 steps to the right and 2 step up",
    "wall 1 step to the right",
    "ball 2 steps to the right and 1 step down",
    "rule `baba` 4 step to the left and 2 steps down",
]


def _text(rows: list[str], text_fixes: bool = False) -> str:
    board = board_from_sketch(rows)
    return observation_text(board, ruleset_for(board), text_fixes)


def test_reference_format_matches_the_composed_example() -> None:
    text = _text(EXAMPLE)
    assert text == EXPECTED
    lines = text.split("\n")
    positions = [lines.index(line) for line in SPEC_EXAMPLE_LINES]
    assert positions == sorted(positions)  # the example's lines, in the example's order


def test_reference_quirks_left_and_up_never_plural_baba_never_listed() -> None:
    assert offset_phrase(-4, -3, False) == "4 step to the left and 3 step up"
    assert offset_phrase(2, 3, False) == "2 steps to the right and 3 steps down"
    assert offset_phrase(0, -1, False) == "1 step up"
    assert offset_phrase(0, 0, False) == ""
    text = _text(["BABA IS YOU", "baba . .", "KEY IS YOU", "key baba ."])
    # KEY IS YOU is the last you-rule: offsets count from the first key; the key's own line is
    # empty and no baba is ever listed
    objects = text.split("Objects on the map:\n")[1].split("\n")
    assert "" in objects
    assert not any(line.startswith("baba") for line in objects)
    assert "rule `baba` 3 step up" in objects


def test_reference_hides_stacked_things_colour_blocks_and_transformation_rules() -> None:
    text = _text([
        "BABA IS YOU .",
        "baba key+ball . RED",
        "KEY IS BALL .",
    ])
    assert text.startswith("Active rules:\nbaba is you\n\nObjects on the map:\n")
    assert "key is ball" not in text
    objects = text.split("Objects on the map:\n")[1].split("\n")
    assert "ball 1 step to the right" in objects  # the key under the ball is hidden
    assert not any(line.startswith("key") for line in objects)
    assert "red" not in text


def test_colour_rules_are_listed_without_colour_by_default() -> None:
    text = _text(["RED KEY IS WIN", "BABA IS YOU .", "baba red:key . ."])
    assert text.startswith("Active rules:\nkey is win\nbaba is you\n")


def test_text_fixes_pluralise_and_list_everything() -> None:
    assert offset_phrase(-4, -3, True) == "4 steps to the left and 3 steps up"
    assert offset_phrase(-1, -1, True) == "1 step to the left and 1 step up"
    text = _text([
        "BABA IS YOU RED",
        "KEY IS BALL .",
        "ball+key . . .",
        "KEY IS YOU .",
    ], text_fixes=True)
    rules, objects = text.split("\n\nObjects on the map:\n")
    assert rules == "Active rules:\nbaba is you\nkey is ball\nkey is you"
    lines = objects.split("\n")
    assert "" not in lines
    assert "rule `red` 3 steps to the right and 2 steps up" in lines
    assert "ball on your cell" in lines  # under the key, the reference thing
    fixed = _text(["BABA IS YOU", "baba . .", "KEY IS YOU", "key baba ."], text_fixes=True)
    assert "baba 2 steps up" in fixed and "baba 1 step to the right" in fixed
    assert "\n\n\n" not in fixed


def test_no_you_gives_a_notice_instead_of_an_object_list() -> None:
    board = board_from_sketch([". baba .", "BABA IS .", ". . YOU"])
    text = observation_text(board, ruleset_for(board), no_you=True)
    assert text.startswith(NO_YOU_NOTICE)
    assert text.endswith("Active rules:\n")
    assert "Objects on the map" not in text
