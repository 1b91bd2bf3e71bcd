"""The one history (prompt) builder shared by every LLM strategy.

A ``HistoryBuilder`` belongs to exactly one episode. It records, per step, the observation's
long-term text and image, the action the model chose and the model's reasoning, and turns them
into a chat in this order:

1. the instruction (system message);
2. for each remembered past step: its observation (user), then the model's answer (assistant);
3. the current observation (user): the same label and long-term text a past step shows, then
   the short-term text. The short-term text is the previous action's feedback (the
   ``ActionResult.feedback`` sentence, which the orchestrator forwards only with
   ``eval.feedback_on_invalid_action``; envs never put it in their observation text), a blank
   line, then the env's short-term context (``short_term_text``); either alone when the other
   is empty.

Why that order (prefix stability): when the current observation becomes a past step, its
message keeps its first part (label and long-term text) unchanged and only loses the tail
(short-term text, image note). So step t+1's chat starts with all of step t's chat up to that
tail, and a backend with a prefix cache (llama.cpp's KV cache, hosted prompt caching) reuses
it: with no short-term text (BabyAI) only the new observation is evaluated each step, not the
previous one again. The current observation is the chat's last user message; no separate
label marks it.

Windows (all counted from the newest end):

- ``max_text_history``: only the newest N *past* observations keep their text; older remembered
  ones keep only their label. The current observation is always shown in full, so with N=0 the
  short-term text (where the invalid-action feedback goes) still reaches the model.
- ``max_image_history``: only the newest M observations, counting the current one, carry their
  PNG image (M=0: text only).
- ``max_cot_history``: only the newest C assistant turns carry their reasoning, and only when
  ``remember_cot`` is set.

A past step is remembered while at least one window still covers it (that is, the newest
``max(N, M - 1, C)`` past steps, C counting only with ``remember_cot``); older steps are dropped
entirely so prompts stay bounded on long games (BALROG also drops events beyond its window).

With ``alternate_roles`` the instruction is sent as a user message instead of a system message.
The builder never merges messages: same-role neighbours (the instruction and the first
observation, for one) are merged by the backend while it builds its request, always for
providers that need strictly alternating turns (``Backend.strict_alternation``) and otherwise
when ``client.alternate_roles`` asks.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from agent_server.backends.base import ChatMessage, Role
from agent_server.turn import TurnInput
from moria.config import AgentConfig

#: Label that opens every observation message, past and current (followed by `` (step N):``).
OBSERVATION_LABEL = "Observation"
#: Line added to an observation message whose image is attached.
IMAGE_NOTE = "(The image of this observation is attached.)"
#: Placeholder in ``answer_template`` replaced by the action text.
ACTION_PLACEHOLDER = "{action}"
#: Assistant text standing in for an empty reply (providers reject empty messages).
EMPTY_REPLY = "(empty reply)"


def short_term_text(turn: TurnInput) -> str:
    """The short-term text a prompt shows for ``turn``: the previous action's feedback
    (``turn.last_feedback``), a blank line, then the env's short-term context; whichever is
    non-empty when the other is empty ("" when both are)."""
    feedback, short = turn.last_feedback, turn.short_term_context
    if feedback and short:
        return f"{feedback}\n\n{short}"
    return feedback or short


def observation_heading(step: int) -> str:
    """The first line of the observation message of ``step``, past or current:
    ``Observation (step 3):``."""
    return f"{OBSERVATION_LABEL} (step {step}):"


@dataclass(frozen=True)
class HistoryStep:
    """One remembered step: the observation the model saw and what it answered.

    ``text`` is the long-term text only (the short-term text is never kept). ``action`` is the
    action text the strategy submitted; ``reasoning`` the reasoning to show again (may be empty).
    ``verbatim``: ``action`` is the model's raw reply (no answer found in it) and is shown as is,
    without the answer template or reasoning.
    """

    step: int
    text: str
    image_png: bytes | None
    action: str
    reasoning: str
    verbatim: bool = False


class HistoryBuilder:
    """Builds the chat for one episode from recorded steps (see the module docstring).

    Args:
        instruction: the full system prompt (env instruction plus the strategy's format rules).
        agent: the history windows (``max_text_history``, ``max_image_history``,
            ``max_cot_history``, ``remember_cot``).
        alternate_roles: send the instruction as a user message (the backend merges it with
            the user message that follows).
        answer_template: how a past action is written back as the assistant's answer; must
            contain ``{action}`` (for example ``"ACTION: {action}"``), so the in-context answers
            follow the format the strategy asks for.

    Raises:
        ValueError: when ``answer_template`` lacks the ``{action}`` placeholder.
    """

    def __init__(
        self,
        instruction: str,
        agent: AgentConfig,
        *,
        alternate_roles: bool = False,
        answer_template: str = ACTION_PLACEHOLDER,
    ) -> None:
        if ACTION_PLACEHOLDER not in answer_template:
            raise ValueError(f"answer_template must contain {ACTION_PLACEHOLDER!r}")
        self.instruction = instruction
        self.alternate_roles = alternate_roles
        self.answer_template = answer_template
        self._text_window = agent.max_text_history
        self._image_window = agent.max_image_history
        self._cot_window = agent.max_cot_history if agent.remember_cot else 0
        keep = max(self._text_window, self._image_window - 1, self._cot_window)
        self._steps: deque[HistoryStep] = deque(maxlen=keep)

    @property
    def steps(self) -> tuple[HistoryStep, ...]:
        """The remembered past steps, oldest first."""
        return tuple(self._steps)

    def record(
        self, turn: TurnInput, action: str, reasoning: str = "", *, verbatim: bool = False
    ) -> None:
        """Remember ``turn``'s observation together with the answer given to it.

        ``action`` is written back through ``answer_template`` (preceded by ``reasoning`` while
        the reasoning window covers it), or as is when ``verbatim`` (a raw reply in which no
        answer was found).
        """
        self._steps.append(
            HistoryStep(
                step=turn.step,
                text=turn.long_term_context,
                image_png=turn.image_png,
                action=action,
                reasoning=reasoning,
                verbatim=verbatim,
            )
        )

    def build(self, turn: TurnInput) -> list[ChatMessage]:
        """The chat for ``turn``: instruction, remembered steps, then the current observation
        (unmerged: role merging is the backend's)."""
        role: Role = "user" if self.alternate_roles else "system"
        messages = [ChatMessage(role=role, content=self.instruction)]
        past = list(self._steps)
        for index, step in enumerate(past):
            age = len(past) - index  # 1 = the newest past step
            messages.append(self._past_observation(step, age))
            messages.append(self._answer(step, age))
        messages.append(self._current_observation(turn))
        return messages

    def _past_observation(self, step: HistoryStep, age: int) -> ChatMessage:
        lines = [observation_heading(step.step)]
        if age <= self._text_window and step.text:
            lines.append(step.text)
        images: list[bytes] = []
        if step.image_png is not None and age <= self._image_window - 1:
            images.append(step.image_png)
            lines.append(IMAGE_NOTE)
        return ChatMessage(role="user", content="\n".join(lines), images=images)

    def _answer(self, step: HistoryStep, age: int) -> ChatMessage:
        if step.verbatim:
            answer = step.action.strip()
        else:
            answer = self.answer_template.replace(ACTION_PLACEHOLDER, step.action)
            if step.reasoning and age <= self._cot_window:
                answer = f"{step.reasoning}\n{answer}"
        return ChatMessage(role="assistant", content=answer or EMPTY_REPLY)

    def _current_observation(self, turn: TurnInput) -> ChatMessage:
        # label and long-term text first, as the past step will show them (prefix stability)
        lines = [observation_heading(turn.step)]
        if turn.long_term_context:
            lines.append(turn.long_term_context)
        images: list[bytes] = []
        if turn.image_png is not None and self._image_window >= 1:
            images.append(turn.image_png)
            lines.append(IMAGE_NOTE)
        short = short_term_text(turn)
        if short:
            lines.append(short)
        return ChatMessage(role="user", content="\n".join(lines), images=images)
