"""The NLE text observation on a real, seeded game (docs/families/nle.md).

The env is built as the ``nle`` family builds it (``NLE_KWARGS``: BALROG's NetHackChallenge
settings, with the moon phase fixed, so the game does not depend on today's date), from
``NetHackScore`` because stock nle 1.3.0's ``NetHackChallenge`` refuses seeding. With core/disp
seed 1 the game starts as a lawful female human Samurai in a small room, a jackal adjacent west
and her little dog adjacent east:

    -----          row 8 of the screen (map row 7), columns 26..30
    |d@d.          the player at map (28, 8); the doorway at (30, 8)
    |...|
    +...|          a closed door at (26, 10)
    -----
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest
from nle import nethack
from nle.env.tasks import NetHackScore

from env_server.families.nethack.nle_family import NLE_KWARGS
from env_server.families.nethack.text import (
    NLEProgress,
    describe_cursor,
    describe_inventory,
    describe_map,
    extract_message,
    render_observation,
    skip_more,
)

KEYS = ("glyphs", "blstats", "tty_chars", "tty_cursor", "inv_letters", "inv_strs")


def make_env(seed: int) -> tuple[NetHackScore, dict[str, np.ndarray]]:
    env = NetHackScore(
        actions=nethack.ACTIONS, max_episode_steps=100_000, observation_keys=KEYS, **NLE_KWARGS
    )
    env.seed(core=seed, disp=seed, reseed=False)
    obs, _ = env.reset()
    return env, {key: value.copy() for key, value in obs.items()}


@pytest.fixture(scope="module")
def start() -> Iterator[dict[str, np.ndarray]]:
    env, obs = make_env(1)
    yield obs
    env.close()


WELCOME = "Konnichi wa Agent, welcome to NetHack!  You are a lawful female human Samurai."

# Hand-checked against the room above (player at (28, 8)):
# - screen features: jackal (27, 8) adjacent west, pet (29, 8) adjacent east, closed door
#   (26, 10) dx -2 dy -2 very near southwest;
# - rays: E doorway (30, 8) very near, then dark area (31, 8) near, blocking; SE floor then the
#   vertical wall (30, 10) very near; S floor, floor, horizontal wall (28, 11) near; SW floor,
#   the door (a screen feature, not blocking), dark area (25, 11) near; W the jackal, then the
#   vertical wall (26, 8) very near; NW, N, NE the top wall, adjacent.
# Sorted near -> very near -> adjacent, clockwise from north; grouped by (name, distance).
LANGUAGE = "\n".join(
    [
        "dark area near east and southwest",
        "horizontal wall near south",
        "doorway very near east",
        "vertical wall very near southeast and west",
        "vertical closed door very near southwest",
        "horizontal wall adjacent north, northeast, and northwest",
        "tame little dog adjacent east",
        "jackal adjacent west",
    ]
)

INVENTORY = "\n".join(
    [
        "a: a +0 katana (weapon in hand)",
        "b: a blessed +0 wakizashi (alternate weapon; not wielded)",
        "c: a +0 yumi",
        "d: 27 +0 ya (in quiver)",
        "e: an uncursed rustproof +0 splint mail (being worn)",
        "f: an uncursed blindfold",
    ]
)


def test_start_state_is_the_expected_game(start: dict[str, np.ndarray]) -> None:
    assert int(start["blstats"][0]) == 28 and int(start["blstats"][1]) == 8
    assert bytes(start["tty_chars"][9, 26:31]).decode() == "|d@d."
    assert start["tty_cursor"].tolist() == [9, 28]


def test_message_at_reset(start: dict[str, np.ndarray]) -> None:
    assert extract_message(start["tty_chars"]) == WELCOME


def _nethack_dates_message(now: time.struct_time) -> str | None:
    """The message NetHack 3.6 greets a game with on this (local) date instead of the welcome,
    or None: "full moon" / "new moon" from ``phase_of_the_moon()`` (hacklib.c: 4 is full, 0
    is new), else the Friday-13th warning."""
    golden = now.tm_year % 19 + 1  # tm_year counts from 1900; 1900 % 19 == 0
    epact = (11 * golden + 18) % 30
    if (epact == 25 and golden > 11) or epact == 24:
        epact += 1
    phase = ((((now.tm_yday - 1 + epact) * 6) + 11) % 177) // 22 & 7
    if phase == 4:
        return "You are lucky!  Full moon tonight."
    if phase == 0:
        return "Be careful!  New moon tonight."
    if now.tm_wday == 4 and now.tm_mday == 13:
        return "Watch out!  Bad things can happen on Friday the 13th."
    return None


def test_without_the_fixed_moon_phase_the_game_follows_the_clock() -> None:
    """The canary of ``make test-dates``: a game built *without* ``fix_moon_phase`` greets
    with what today's date means to NetHack, so under libfaketime on a full moon, new moon or
    Friday 13th the game really saw that date, and the tests above really ran on it."""
    before = time.localtime()
    env = NetHackScore(actions=nethack.ACTIONS, observation_keys=KEYS,
                       **{**NLE_KWARGS, "fix_moon_phase": False})
    try:
        env.seed(core=1, disp=1, reseed=False)
        obs, _ = env.reset()
    finally:
        env.close()
    after = time.localtime()
    message = extract_message(obs["tty_chars"])
    # both ends of the reset, in case it straddled midnight; a full or new moon on a Friday 13th
    # shows either message
    expected = {_nethack_dates_message(before) or WELCOME,
                _nethack_dates_message(after) or WELCOME}
    for day in (before, after):
        if _nethack_dates_message(day) and day.tm_wday == 4 and day.tm_mday == 13:
            expected.add("Watch out!  Bad things can happen on Friday the 13th.")
    assert message in expected, (time.strftime("%Y-%m-%d", before), message)


def test_language_observation_with_adjacent_monsters(start: dict[str, np.ndarray]) -> None:
    blstats = start["blstats"]
    assert describe_map(start["glyphs"], int(blstats[0]), int(blstats[1])) == LANGUAGE


def test_cursor_on_the_player(start: dict[str, np.ndarray]) -> None:
    text = describe_cursor(start["glyphs"], start["blstats"], start["tty_cursor"])
    assert text == "Yourself a samurai"


def test_inventory(start: dict[str, np.ndarray]) -> None:
    assert describe_inventory(start["inv_letters"], start["inv_strs"]) == INVENTORY


def test_hybrid_layout(start: dict[str, np.ndarray]) -> None:
    long_term, short_term = render_observation(start, message=WELCOME)
    rows = [bytes(row).decode("latin-1") for row in start["tty_chars"][1:]]
    assert len(rows) == 23 and all(len(row) == 80 for row in rows)
    assert rows[8].rstrip() == " " * 26 + "|d@d."
    assert rows[22].startswith("Dlvl:1 $:0 HP:15(15) Pw:2(2) AC:4 Xp:1/0 T:1")
    expected = (
        f"message:\n{WELCOME}\n"
        "\n"
        f"language observation:\n{LANGUAGE}\n"
        "\n"
        "cursor:\nYourself a samurai\n(x=28, y=9)\n"
        "\n"
        "map:\n" + "".join(row + "\n" for row in rows) + "\n"
    )
    assert long_term == expected
    assert short_term == f"inventory:\n{INVENTORY}\n"


def test_language_layout(start: dict[str, np.ndarray]) -> None:
    obs = {key: value for key, value in start.items() if key != "tty_chars"}  # not needed
    long_term, short_term = render_observation(obs, message="", mode="language")
    assert long_term == (
        f"message:\n\n\nlanguage observation:\n{LANGUAGE}\n\ncursor:\nYourself a samurai\n"
    )
    stats, inventory = short_term.split("\n\n")
    assert inventory == f"inventory:\n{INVENTORY}\n"
    assert stats.startswith("statistics:\nStrength: 19/19\nDexterity: 15\n")
    assert "\nPosition: 28|8\nHunger: Not Hungry\n" in stats
    assert stats.endswith("\nAlignment: Lawful\nCondition: None")


def test_render_rejects_bad_input(start: dict[str, np.ndarray]) -> None:
    with pytest.raises(ValueError, match=r"hybrid, language"):
        render_observation(start, message="", mode="pixels")
    partial = {key: value for key, value in start.items() if key != "tty_chars"}
    with pytest.raises(ValueError, match="tty_chars"):
        render_observation(partial, message="")
    partial = {key: value for key, value in start.items() if key != "inv_strs"}
    with pytest.raises(ValueError, match="inv_strs"):
        render_observation(partial, message="", mode="language")


def test_progress_on_real_blstats(start: dict[str, np.ndarray]) -> None:
    progress = NLEProgress()
    assert progress.update(start["blstats"]) == 0.0
    assert progress.keys_seen == ["Xp:1", "Dlvl:1"]
    assert progress.end_reason(start["tty_chars"], "ABORTED") == "ABORTED (no end-of-game screen)"


def test_more_chain_on_a_real_game() -> None:
    env, _ = make_env(1)
    try:
        actions = env.actions

        def press(key: int) -> tuple:
            return env.step(actions.index(key))

        obs, *_ = press(nethack.Command.CALL)
        assert extract_message(obs["tty_chars"]) == (
            "What do you want to name?\n"
            "m - a monster\n"
            "i - a particular object in inventory\n"
            "o - the type of an object in inventory\n"
            "f - the type of an object upon the floor\n"
            "d - the type of an object on discoveries list\n"
            "a - record an annotation for the current level\n"
            "(end)"
        )
        obs, *_ = press(ord("i"))
        assert extract_message(obs["tty_chars"]) == "What do you want to name? [a-f or ?*]"
        obs, reward, terminated, truncated, info = press(ord("z"))  # no such item
        assert extract_message(obs["tty_chars"]) == "You don't have that object.--More--"
        result = skip_more(
            obs,
            env.step,
            actions.index(nethack.MiscAction.MORE),
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            info=info,
        )
        assert result.presses == 1
        assert result.message == (
            "You don't have that object.\nWhat do you want to name? [a-f or ?*]"
        )
        assert result.reward == 0.0 and not result.terminated and not result.truncated
        assert extract_message(result.obs["tty_chars"]) == "What do you want to name? [a-f or ?*]"
    finally:
        env.close()
