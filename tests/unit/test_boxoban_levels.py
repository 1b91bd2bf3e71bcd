"""Boxoban level text format: parse, format, level files."""

from __future__ import annotations

import pytest

from env_server.families.nethack.boxoban.levels import (
    Level,
    format_level,
    parse_level,
    read_level_file,
    write_level_file,
)

LEVEL = "\n".join(
    [
        "##########",
        "##########",
        "##  ######",
        "##  .  ###",
        "##$ $$ ###",
        "#@ #.  ###",
        "# $ .# ###",
        "###  . ###",
        "##########",
        "##########",
    ]
)


def test_parse_reads_every_kind_of_cell() -> None:
    level = parse_level(LEVEL)
    assert isinstance(level, Level)
    assert (level.width, level.height) == (10, 10)
    assert level.player == (1, 5)
    assert level.boxes == frozenset({(2, 4), (4, 4), (5, 4), (2, 6)})
    assert level.goals == frozenset({(4, 3), (4, 5), (4, 6), (5, 7)})
    assert (0, 0) in level.walls and (3, 5) in level.walls and (2, 2) not in level.walls
    assert len(level.walls) == 100 - 1 - 4 - 4 - sum(row.count(" ") for row in LEVEL.split("\n"))


def test_round_trip_text_and_level() -> None:
    level = parse_level(LEVEL)
    assert format_level(level) == LEVEL
    assert parse_level(format_level(level)) == level


def test_parse_ignores_header_and_blank_lines() -> None:
    assert parse_level("; 17\n" + LEVEL + "\n\n") == parse_level(LEVEL)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (LEVEL.replace("@", " "), "exactly one player"),
        (LEVEL.replace("# $ .#", "#@$ .#"), "exactly one player"),
        (LEVEL.replace("##$ $$", "##  $$"), "boxes and goals differ"),
        (LEVEL.replace("##$ $$", "##* $$"), "not supported"),
        (LEVEL.replace("###  . ###", "###  x ###"), "unknown character 'x'"),
        ("", "empty"),
    ],
)
def test_parse_rejects_bad_levels(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_level(text)


def test_box_count_is_four_unless_told() -> None:
    small = "#####\n#@$.#\n#####"
    with pytest.raises(ValueError, match="expected 4 boxes"):
        parse_level(small)
    level = parse_level(small, n_boxes=None)
    assert level.boxes == {(2, 1)} and level.goals == {(3, 1)}


def test_level_file_round_trip(tmp_path) -> None:
    other = LEVEL.replace("#@ ", "# @")
    path = tmp_path / "000.txt"
    write_level_file(path, [LEVEL, other])
    assert [p.name for p in tmp_path.iterdir()] == ["000.txt"]  # written atomically, no temp
    raw = path.read_text()
    assert raw.startswith("; 0\n##########\n") and "\n\n; 1\n" in raw
    assert read_level_file(path) == [LEVEL, other]
    # the official files end each level with a blank line; a missing last one is tolerated
    path.write_text(raw.rstrip("\n"))
    assert read_level_file(path) == [LEVEL, other]
