"""env_server.actions: action resolution and the invalid-action sentence."""

from __future__ import annotations

import numpy as np

from env_server.actions import invalid_action_feedback, resolve_action
from env_server.game import ActionInfo

ACTIONS = [ActionInfo("turn left", ""), ActionInfo("go forward", ""), ActionInfo("toggle", "")]


def test_exact_name_is_valid() -> None:
    assert resolve_action("toggle", ACTIONS, "go forward") == ("toggle", True)


def test_surrounding_whitespace_makes_an_answer_invalid_like_balrog() -> None:
    # BALROG's check_action_validity is plain membership: " turn left" is not "turn left"
    assert resolve_action("  turn left\n", ACTIONS, "go forward") == ("go forward", False)
    assert resolve_action(" toggle", ACTIONS, "go forward") == ("go forward", False)


def test_names_are_case_sensitive_like_balrog() -> None:
    assert resolve_action("Go forward", ACTIONS, "go forward") == ("go forward", False)
    assert resolve_action("TOGGLE", ACTIONS, "turn left") == ("turn left", False)


def test_free_text_and_partial_names_are_invalid() -> None:
    assert resolve_action("I will toggle", ACTIONS, "go forward") == ("go forward", False)
    assert resolve_action("turn  left", ACTIONS, "go forward") == ("go forward", False)
    assert resolve_action("", ACTIONS, "go forward") == ("go forward", False)


def test_index_in_range_is_valid() -> None:
    assert resolve_action(0, ACTIONS, "go forward") == ("turn left", True)
    assert resolve_action(2, ACTIONS, "go forward") == ("toggle", True)
    assert resolve_action(np.int64(1), ACTIONS, "turn left") == ("go forward", True)


def test_index_out_of_range_or_bool_is_invalid() -> None:
    assert resolve_action(3, ACTIONS, "go forward") == ("go forward", False)
    assert resolve_action(-1, ACTIONS, "go forward") == ("go forward", False)
    assert resolve_action(True, ACTIONS, "go forward") == ("go forward", False)


def test_other_types_are_invalid() -> None:
    assert resolve_action(None, ACTIONS, "go forward") == ("go forward", False)  # type: ignore[arg-type]
    assert resolve_action(1.0, ACTIONS, "go forward") == ("go forward", False)  # type: ignore[arg-type]


def test_feedback_is_one_short_sentence_naming_the_applied_action() -> None:
    text = invalid_action_feedback("dance wildly", "go forward")
    assert "'go forward'" in text
    assert "not a valid action" in text
    assert "dance" not in text
    assert text.count(".") == 1 and text.endswith(".")
    assert "\n" not in text and len(text) < 120
