"""plan_action: the model keeps a multi-step plan and answers ``PLAN: ...`` then ``ACTION: ...``.

Each turn the current observation message ends with the plan in force ("Your current plan:
..." or "You have no plan yet."). The model answers with a ``PLAN:`` section (its plan, revised
whenever it sees fit) and a final ``ACTION:`` line. The action is read as in ``cot`` (the first
line after the last ``ACTION:`` marker). The plan is the text after the last ``PLAN:`` marker
that precedes the action (up to that ``ACTION:``); without a ``PLAN:`` marker, or with
``PLAN: unchanged``, the previous plan stays in force.

The plan lives on the strategy instance, one per episode: nothing crosses episodes. Each
decision's reasoning records the plan in force after the turn (and whether it was kept), after
any provider reasoning and before any other prose of the reply.
"""

from __future__ import annotations

import re

from agent_server.backends.base import Backend, ChatMessage
from agent_server.extract import normalize
from agent_server.strategies.llm import LLMStrategy
from agent_server.turn import Decision, EpisodeContext, TurnInput

#: Marker of the plan section.
PLAN_MARKER = "PLAN:"
#: Line shown with the current observation while no plan exists.
NO_PLAN_NOTE = "You have no plan yet."
#: Prefix of the line that shows the plan in force.
PLAN_NOTE = "Your current plan:"
#: Plans longer than this many characters are cut (keeps prompts bounded).
MAX_PLAN_CHARS = 4000
#: Answers after ``PLAN:`` that mean "keep the plan as it is" (compared normalised).
KEEP_WORDS = frozenset({"unchanged", "no change", "no changes", "no changes to the plan",
                        "same", "same plan", "keep", "keep plan", "keep the plan"})

# Markers, with any markdown emphasis around them (``**PLAN:**``).
_PLAN_RE = re.compile(r"\**\bPLAN\b\**\s*:\**", re.IGNORECASE)
_ACTION_RE = re.compile(r"\**\bACTION\b\**\s*:", re.IGNORECASE)


def split_plan(text: str) -> tuple[str | None, str]:
    """Read a reply: ``(plan, other)``.

    ``plan``: the stripped text after the last ``PLAN:`` marker that comes before the last
    ``ACTION:`` marker (or anywhere, without one), up to the next ``ACTION:`` marker or the end;
    None when there is no such marker or the text is empty. ``other``: the reply's prose outside
    the plan and the action (stripped; may be empty).
    """
    actions = list(_ACTION_RE.finditer(text))
    limit = actions[-1].start() if actions else len(text)
    plans = [m for m in _PLAN_RE.finditer(text) if m.start() < limit]
    if not plans:
        return None, text[:limit].strip()
    marker = plans[-1]
    following = _ACTION_RE.search(text, marker.end())
    end = following.start() if following else len(text)
    plan = text[marker.end():end].strip()
    other = text[:marker.start()].strip()
    return (plan or None), other


class PlanActionStrategy(LLMStrategy):
    """PLAN/ACTION answering with a plan carried from turn to turn (see the module docstring).

    ``plan``: the plan in force ("" before the first one).

    Raises:
        ValueError: at construction when ``backend`` is None.
        BackendError: from ``act`` when the model call failed for good.
    """

    name = "plan_action"
    format_instruction = (
        "How to answer: keep a short plan of the next few moves that lead to the goal, and let "
        "it guide each action. Your latest plan is shown to you again on the next turn; revise "
        "it whenever the situation calls for it. Write your reply in this form:\n"
        "PLAN: <the plan you will follow from here, as a few short steps>\n"
        "ACTION: <action>\n"
        "where <action> is exactly one of the available actions, spelled as listed. To keep "
        "your plan as it is, you may write PLAN: unchanged."
    )
    extract_mode = "cot"
    answer_template = "ACTION: {action}"

    def __init__(self, ctx: EpisodeContext, backend: Backend | None) -> None:
        super().__init__(ctx, backend)
        self.plan = ""

    async def act(self, turn: TurnInput) -> Decision:
        """Ask for ``turn``'s plan and action (the shared LLM turn, with the plan note added by
        ``messages``), then update the plan and record it in the decision's reasoning."""
        decision = await super().act(turn)
        new_plan, other = split_plan(decision.raw_completion)
        kept = new_plan is None or normalize(new_plan) in KEEP_WORDS
        if not kept and new_plan is not None:
            self.plan = _bounded(new_plan)
        if self.plan:
            plan = f"{PLAN_MARKER} {self.plan}" + (" (kept from the previous turn)"
                                                    if kept else "")
        else:
            plan = f"{PLAN_MARKER} (none yet)"
        # The base reasoning is the provider's own (text_is_reasoning is off).
        parts = [decision.reasoning.strip(), plan, other]
        decision.reasoning = "\n\n".join(p for p in parts if p)
        return decision

    def messages(self, turn: TurnInput) -> list[ChatMessage]:
        """The shared chat, with the plan in force appended to the current observation (the
        last message, always a user message)."""
        messages = super().messages(turn)
        last = messages[-1]
        last.content = f"{last.content}\n\n{self.plan_note()}"
        return messages

    def plan_note(self) -> str:
        """The line(s) appended to the current observation: the plan in force, or none yet."""
        return f"{PLAN_NOTE}\n{self.plan}" if self.plan else NO_PLAN_NOTE


def _bounded(plan: str) -> str:
    return plan if len(plan) <= MAX_PLAN_CHARS else plan[:MAX_PLAN_CHARS].rstrip() + " [...]"
