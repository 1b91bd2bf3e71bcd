"""Helpers shared by every family whose agents choose from a fixed list of named actions.

Validity is BALROG's rule (``EnvWrapper.check_action_validity``): an answer is valid only when it
*is* one of the action names, exactly (case and whitespace included). An integer answer is read as
an index into the action list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from numbers import Integral
from typing import Any

from env_server.game import ActionInfo, AgentTransition, StepResult, SubmittedAction
from moria.quoting import quote_names


def resolve_action(
    submitted: str | int, actions: Sequence[ActionInfo], default: str
) -> tuple[str, bool]:
    """Map a submitted answer to the action that will be applied.

    Args:
        submitted: the agent's answer: a text (valid only when equal to a name, exactly, as
            BALROG's membership check) or an integer index into ``actions`` (``bool`` is not
            accepted as an index).
        actions: the game's action list, in index order.
        default: the name applied when the answer is not valid.

    Returns:
        ``(applied_name, valid)``: the matched name and True, or ``(default, False)``.
        Never raises for a bad answer; any other type is simply invalid.
    """
    if isinstance(submitted, str):
        for action in actions:
            if action.name == submitted:
                return action.name, True
        return default, False
    if isinstance(submitted, Integral) and not isinstance(submitted, bool):
        index = int(submitted)
        if 0 <= index < len(actions):
            return actions[index].name, True
    return default, False


def invalid_action_feedback(submitted: str | int, applied: str) -> str:
    """One sentence telling the agent its previous answer was not a valid action.

    ``submitted`` is accepted for symmetry with :func:`resolve_action` but is not quoted back:
    raw completions can be long, and the sentence must stay short and generic.
    Returns e.g. ``"Your previous output was not a valid action, so 'go forward' was performed
    instead."``.
    """
    del submitted  # deliberately not echoed
    return f"Your previous output was not a valid action, so '{applied}' was performed instead."


def single_agent_action(
    actions: Mapping[str, SubmittedAction], agent_id: str, *, started: bool, done: bool
) -> SubmittedAction:
    """The one submitted action of a single-agent game's step.

    Raises:
        RuntimeError: before ``reset`` (``started`` False) or after the episode ended.
        ValueError: ``actions`` is not exactly one entry, for ``agent_id``.
    """
    if not started:
        raise RuntimeError("step() before reset()")
    if done:
        raise RuntimeError("the episode is over; call reset() to start a new one")
    if len(actions) != 1 or agent_id not in actions:
        raise ValueError(f"expected exactly one action, for {agent_id!r}; got "
                         f"{quote_names(actions, 10)}")
    return actions[agent_id]


def single_agent_result(
    agent_id: str, transition: AgentTransition, *, done: bool, metrics: dict[str, Any]
) -> StepResult:
    """The StepResult of a single-agent game: the agent acts next until the episode is done."""
    return StepResult(
        transitions={agent_id: transition},
        next_agents=[] if done else [agent_id],
        metrics=metrics,
        done=done,
    )
