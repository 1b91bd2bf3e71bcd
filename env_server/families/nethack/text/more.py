"""Automatic --More-- skipping after an agent step (BALROG's ``skip_more=True``).

Reference behaviour: after the agent's step, extract the message from ``tty_chars``. While
it contains ``--More--`` and the game is not over, replace every ``--More--`` in the accumulated
text by a newline, press MORE (Enter), append the new screen's message and add that press's
reward. The accumulated text is the step's message. (At reset the message is extracted once, with
no skipping: call ``extract_message`` directly there.)

Difference from the reference (a guard, not a change of output in normal play): the reference
loops without bound; we stop after ``max_presses`` presses and return the text as it stands
(``--More--`` still in it), so a screen that never clears cannot hang a session. Each press is an
env step, so it counts toward the env's own step limits, as in the reference.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .message import extract_message

MORE_MARKER = "--More--"

#: ``step(action_index) -> (obs, reward, terminated, truncated, info)``, gymnasium style.
StepFn = Callable[[int], tuple[Mapping[str, np.ndarray], float, bool, bool, Mapping[str, Any]]]


@dataclass
class MoreResult:
    """Outcome of an agent step after --More-- skipping.

    Attributes:
        obs: the last observation (after the last MORE press, or the one given).
        reward: the ``reward`` passed in plus the reward of every MORE press.
        terminated: from the last env step (the one given when no press was made).
        truncated: likewise.
        info: likewise (``{}`` when none was given and no press was made).
        message: the accumulated message text for this step.
        presses: how many MORE presses were made.
    """

    obs: Mapping[str, np.ndarray]
    reward: float
    terminated: bool
    truncated: bool
    info: Mapping[str, Any] = field(default_factory=dict)
    message: str = ""
    presses: int = 0


def skip_more(
    obs: Mapping[str, np.ndarray],
    step: StepFn,
    more_action: int,
    *,
    max_presses: int = 32,
    reward: float = 0.0,
    terminated: bool = False,
    truncated: bool = False,
    info: Mapping[str, Any] | None = None,
) -> MoreResult:
    """Press MORE while the message shows ``--More--`` and the game is not over.

    Args:
        obs: the observation returned by the agent's step (must hold ``tty_chars``, 24x80 uint8);
            the first message extraction reads it.
        step: the env's step function (gymnasium 5-tuple).
        more_action: action index of the MORE key (Enter, ``\\r``) in the env's action list.
        max_presses: upper bound on presses (>= 0).
        reward: the agent step's reward, so that ``MoreResult.reward`` is the whole step's reward
            (leave 0.0 to get only the presses' rewards).
        terminated: whether the agent's step ended the game (then nothing is pressed).
        truncated: whether the agent's step truncated the episode (then nothing is pressed).
        info: the agent step's info, returned unchanged when no press is made.

    Returns:
        A ``MoreResult``.

    Raises:
        ValueError: ``max_presses`` is negative.
        KeyError: an observation lacks ``tty_chars``.
    """
    if max_presses < 0:
        raise ValueError(f"max_presses must be >= 0, got {max_presses}")
    message = extract_message(obs["tty_chars"])
    total = float(reward)
    last_info: Mapping[str, Any] = {} if info is None else info
    presses = 0
    while MORE_MARKER in message and not (terminated or truncated) and presses < max_presses:
        message = message.replace(MORE_MARKER, "\n")
        obs, press_reward, terminated, truncated, last_info = step(more_action)
        presses += 1
        total += float(press_reward)
        message += extract_message(obs["tty_chars"])
    return MoreResult(
        obs=obs,
        reward=total,
        terminated=bool(terminated),
        truncated=bool(truncated),
        info=last_info,
        message=message,
        presses=presses,
    )
