"""The BabaIsAI rule engine on small hand-built grids (docs/families/babaisai.md, "Rules").

Grids are written as sketches (``sketch.py``): lower case = objects, upper case = text blocks,
``+`` = a stack (bottom first); the border ring is added around. Sketch coordinates below are
(column, row) of the sketch, i.e. board coordinates minus one.
"""

from __future__ import annotations

from env_server.families.babaisai.engine import StepOutcome, advance
from env_server.families.babaisai.rules import Rule, ruleset_for
from env_server.families.babaisai.sketch import board_from_sketch, sketch_of

IDLE, UP, RIGHT, DOWN, LEFT = range(5)


class Play:
    """A sketch-built board and its rules, stepped with the real engine."""

    def __init__(self, rows: list[str]):
        self.board = board_from_sketch(rows)
        self.ruleset = ruleset_for(self.board)

    def step(self, *actions: int) -> StepOutcome:
        """Apply the actions in order; the outcome of the last one."""
        out = None
        for action in actions:
            out = advance(self.board, self.ruleset, action)
            self.ruleset = out.ruleset
        assert out is not None
        return out

    @property
    def rules(self) -> list[str]:
        return self.ruleset.texts()

    @property
    def rows(self) -> list[str]:
        return sketch_of(self.board)


# -- reading rules ----------------------------------------------------------------------------


def test_rules_form_horizontally_and_vertically_in_row_major_order_of_the_is_blocks() -> None:
    play = Play([
        "KEY . BABA IS YOU",
        "IS . . . .",
        "WIN . baba . key",
    ])
    assert play.rules == ["baba is you", "key is win"]


def test_through_one_is_block_the_horizontal_rule_is_read_before_the_vertical_one() -> None:
    play = Play([
        ". WALL . .",
        "BABA IS YOU .",
        ". STOP . baba",
    ])
    assert play.rules == ["baba is you", "wall is stop"]


def test_incomplete_or_wrongly_ordered_lines_are_no_rules() -> None:
    play = Play([
        "YOU IS BABA .",
        "IS KEY WIN .",
        "baba . . .",
    ])
    assert play.rules == []


def test_colour_rule_needs_four_blocks_and_affects_only_that_colour() -> None:
    play = Play([
        "RED KEY IS WIN",
        "BABA IS YOU .",
        "baba green:key . red:key",
    ])
    assert play.ruleset.rules[0] == Rule(noun="key", prop="win", colour="red")
    assert play.rules == ["red key is win", "baba is you"]
    assert not play.step(RIGHT).won  # onto the green key
    assert play.rows[2] == ". green:key+baba . red:key"
    assert not play.step(RIGHT).won
    assert play.step(RIGHT).won  # onto the red key


def test_noun_is_noun_transforms_the_objects_right_after_the_rules_are_read() -> None:
    play = Play([
        "BABA IS YOU . .",
        "KEY IS . BALL baba",
        "key . . . .",
    ])
    out = play.step(LEFT)  # push BALL next to IS: KEY IS BALL
    assert out.rules_changed
    assert play.rules == ["baba is you", "key is ball"]
    assert play.rows[2] == "ball . . . ."


# -- moving, pushing, blocking ------------------------------------------------------------------


def test_idle_changes_nothing() -> None:
    play = Play(["BABA IS YOU", "baba . key", "KEY IS WIN"])
    before = list(play.board.cells)
    out = play.step(IDLE)
    assert play.board.cells == before
    assert not (out.won or out.lost or out.no_you or out.rules_changed)


def test_breaking_wall_is_stop_by_pushing_a_block_out_lets_you_walk_through_the_wall() -> None:
    play = Play([
        "BABA IS YOU . .",
        ". . . wall .",
        "baba . . wall .",
        "WALL IS STOP wall .",
        ". . . wall .",
    ])
    play.step(RIGHT, RIGHT, RIGHT)
    assert play.rows[2] == ". . baba wall ."  # the wall is STOP: blocked
    out = play.step(LEFT, DOWN)  # from (1,2) push IS down out of its line
    assert out.rules_changed
    assert play.rows[3] == "WALL baba STOP wall ."
    assert play.rows[4] == ". IS . wall ."
    assert play.rules == ["baba is you"]
    play.step(UP, RIGHT, RIGHT)
    assert play.rows[2] == ". . . wall+baba ."  # standing on the wall
    play.step(RIGHT)
    assert play.rows[2] == ". . . wall baba"  # and through it


def test_making_key_is_win_by_pushing_the_word_into_place_then_winning_on_a_key() -> None:
    play = Play([
        "BABA IS YOU . .",
        ". . . . .",
        ". KEY . . .",
        "baba . IS WIN .",
        ". . . . key",
    ])
    assert play.rules == ["baba is you"]
    out = play.step(UP, UP, RIGHT, DOWN)  # from (1,1) push KEY down to (1,3)
    assert out.rules_changed and not out.won
    assert play.rules == ["baba is you", "key is win"]
    assert not play.step(RIGHT, RIGHT, RIGHT, DOWN).won
    assert play.step(DOWN).won


def test_a_push_chain_is_blocked_by_a_stop_object() -> None:
    play = Play([
        "BABA IS YOU .",
        "baba KEY IS wall",
        "WALL IS STOP .",
    ])
    before = play.rows
    play.step(RIGHT)
    assert play.rows == before


def test_a_push_chain_is_blocked_by_the_border_and_moves_whole_when_free() -> None:
    blocked = Play([
        "BABA IS YOU .",
        "baba KEY IS WIN",
    ])
    before = blocked.rows
    blocked.step(RIGHT)
    assert blocked.rows == before
    free = Play([
        "BABA IS YOU . .",
        "baba KEY IS WIN .",
    ])
    free.step(RIGHT)
    assert free.rows[1] == ". baba KEY IS WIN"


def test_non_stop_objects_are_entered_and_left_again() -> None:
    play = Play(["BABA IS YOU", "baba ball .", ". . ."])
    play.step(RIGHT)
    assert play.rows[1] == ". ball+baba ."
    play.step(RIGHT)
    assert play.rows[1] == ". ball baba"


def test_pushed_text_stacks_on_a_non_stop_object() -> None:
    play = Play(["BABA IS YOU .", "baba KEY ball ."])
    play.step(RIGHT)
    assert play.rows[1] == ". baba ball+KEY ."


def test_push_objects_move_in_chains_and_a_stuck_one_is_overlapped_when_not_stop() -> None:
    play = Play([
        "BABA IS YOU .",
        "baba ball ball .",
        "BALL IS PUSH .",
    ])
    play.step(RIGHT)
    assert play.rows[1] == ". baba ball ball"
    # the last ball is stuck against the border; PUSH is not STOP, so the ball pushing it
    # overlaps it and baba follows (reference behaviour: only STOP and text block entry)
    play.step(RIGHT)
    assert play.rows[1] == ". . baba ball+ball"


def test_pull_follows_and_move_steps_on_its_own_and_open_meets_shut() -> None:
    pull = Play(["BABA IS YOU . .", "ball baba . . .", "BALL IS PULL . ."])
    pull.step(RIGHT)
    assert pull.rows[1] == ". ball baba . ."
    move = Play(["BABA IS YOU . .", "baba . key . .", "KEY IS MOVE . ."])
    move.step(LEFT)  # baba is blocked by the border; the key walks right (its facing)
    assert move.rows[1] == "baba . . key ."
    move.step(IDLE)
    assert move.rows[1] == "baba . . key ."
    shut = Play([
        "BABA IS YOU . .",
        "baba key door . .",
        "KEY IS OPEN . .",
        "DOOR IS SHUT . .",
        "KEY IS PUSH . .",
    ])
    shut.step(RIGHT)  # the pushed OPEN key meets the SHUT door: both vanish
    assert shut.rows[1] == ". baba . . ."


# -- winning, losing, YOU -----------------------------------------------------------------------


def test_win_and_lose_look_at_the_cell_entered() -> None:
    rules = ["KEY IS WIN .", "BALL IS LOSE ."]
    assert Play(["BABA IS YOU .", "baba key . ball", *rules]).step(RIGHT).won
    lose = Play(["BABA IS YOU .", ". baba . ball", *rules])
    assert not lose.step(RIGHT).lost
    out = lose.step(RIGHT)
    assert out.lost and not out.won


def test_staying_in_place_checks_the_movers_own_cell() -> None:
    play = Play(["BABA IS YOU", "baba . .", "BABA IS WIN"])
    assert not play.step(RIGHT).won
    assert not play.step(RIGHT).won
    assert play.step(RIGHT).won  # blocked by the border: baba checks itself


def test_pushing_something_onto_a_win_object_does_not_win() -> None:
    play = Play(["BABA IS YOU . .", "baba BALL key . .", "KEY IS WIN . ."])
    out = play.step(RIGHT)
    assert not out.won
    assert play.rows[1] == ". baba key+BALL . ."


def test_forming_key_is_you_hands_control_to_the_key() -> None:
    play = Play([
        ". baba . . .",
        ". KEY . . .",
        ". BABA IS YOU .",
        ". . . . .",
        "key . . . .",
    ])
    out = play.step(DOWN)  # KEY pushes BABA out of the line: KEY IS YOU
    assert out.rules_changed and not out.no_you
    assert play.rules == ["key is you"]
    play.step(RIGHT)
    assert play.rows[0] == ". . . . ."
    assert play.rows[1] == ". baba . . ."  # baba no longer moves
    assert play.rows[4] == ". key . . ."  # the key does


def test_no_you_left_is_reported() -> None:
    play = Play([". baba . .", ". BABA IS YOU", ". . . ."])
    out = play.step(DOWN)
    assert play.rules == []
    assert out.no_you and not out.won and not out.lost
