"""orchestrator.core.episode.policy_action_result: the env's verdict as the player receives it
(the invalid-action feedback travels only in ``ActionResult.feedback``, forwarded only with
``eval.feedback_on_invalid_action``)."""

from __future__ import annotations

from moria.common.v1 import types_pb2
from orchestrator.core.episode import policy_action_result

SENTENCE = "Your previous output was not a valid action, so 'go forward' was performed instead."


def _invalid() -> types_pb2.ActionResult:
    return types_pb2.ActionResult(valid=False, applied_action=types_pb2.Action(text="go forward"),
                                  feedback=SENTENCE)


def test_feedback_forwarded_when_on() -> None:
    result = _invalid()
    assert policy_action_result(result, True) == result


def test_feedback_cleared_when_off_the_rest_kept_and_the_env_result_untouched() -> None:
    result = _invalid()
    shown = policy_action_result(result, False)
    assert shown.feedback == ""
    assert not shown.valid and shown.applied_action.text == "go forward"
    assert result.feedback == SENTENCE  # the record keeps the env's own result


def test_valid_result_passes_unchanged() -> None:
    result = types_pb2.ActionResult(valid=True, applied_action=types_pb2.Action(text="turn left"))
    assert policy_action_result(result, False) == result
