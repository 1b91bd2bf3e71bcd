"""plan_action: PLAN/ACTION answers, the plan carried per episode into the next prompt."""

from __future__ import annotations

import copy

import pytest

from agent_server.backends.base import (
    Backend,
    ChatMessage,
    Completion,
    GenerateParams,
    TokenUsage,
    merge_consecutive_roles,
)
from agent_server.history import OBSERVATION_LABEL
from agent_server.strategies import STRATEGIES, create_strategy
from agent_server.strategies.plan_action import (
    NO_PLAN_NOTE,
    PLAN_NOTE,
    PlanActionStrategy,
    split_plan,
)
from agent_server.turn import EpisodeContext, TurnInput
from moria.config import AgentConfig, ClientConfig

ACTIONS = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]


class ScriptedBackend(Backend):
    """A test double of the model: returns queued replies and records the messages it got."""

    name = "scripted"

    def __init__(self, replies: list[str | Completion]) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[list[ChatMessage], GenerateParams]] = []

    async def complete(self, messages: list[ChatMessage], params: GenerateParams) -> Completion:
        self.calls.append((copy.deepcopy(messages), params))
        reply = self.replies.pop(0)
        if isinstance(reply, Completion):
            return reply
        return Completion(text=reply, usage=TokenUsage(input_tokens=10, output_tokens=5),
                          stop_reason="stop", latency_s=0.01)


def _ctx(*, alternate_roles: bool = False) -> EpisodeContext:
    return EpisodeContext(
        instruction="Grid world. Actions: " + ", ".join(ACTIONS), action_names=list(ACTIONS),
        default_action="go forward", agent=AgentConfig(type="plan_action"),
        client=ClientConfig(alternate_roles=alternate_roles), seed=3, env_name="babyai",
        task="goto", agent_id="agent_0")


def _turn(step: int) -> TurnInput:
    return TurnInput(step=step, long_term_context=f"view {step}", short_term_context="",
                     image_png=None, legal_actions=[], info={})


def _last(backend: ScriptedBackend, call: int) -> str:
    return backend.calls[call][0][-1].content


def test_registered_and_asks_for_plan_and_action() -> None:
    assert STRATEGIES["plan_action"] is PlanActionStrategy
    strategy = create_strategy(_ctx(), ScriptedBackend([]))
    assert isinstance(strategy, PlanActionStrategy)
    system = strategy.history.instruction
    assert "PLAN: <" in system and "ACTION: <action>" in system


async def test_plan_is_carried_revised_and_kept() -> None:
    backend = ScriptedBackend([
        "PLAN: turn to the door, then walk through it\nACTION: turn left",
        "I see the door now.\nACTION: go forward",  # no PLAN: keep the plan
        "PLAN: unchanged\nACTION: go forward",  # explicit keep
        "PLAN: pick up the key first\nthen open the door\nACTION: pick up",
        "ACTION: toggle",
    ])
    strategy = create_strategy(_ctx(), backend)
    assert isinstance(strategy, PlanActionStrategy)
    decisions = [await strategy.act(_turn(step)) for step in range(5)]

    assert [d.action for d in decisions] == ["turn left", "go forward", "go forward", "pick up",
                                             "toggle"]
    assert _last(backend, 0).endswith(NO_PLAN_NOTE)
    first_plan = f"{PLAN_NOTE}\nturn to the door, then walk through it"
    assert _last(backend, 1).startswith(OBSERVATION_LABEL)
    assert _last(backend, 1).endswith(first_plan)
    assert _last(backend, 2).endswith(first_plan)  # kept: no PLAN line
    assert _last(backend, 3).endswith(first_plan)  # kept: "PLAN: unchanged"
    revised = f"{PLAN_NOTE}\npick up the key first\nthen open the door"
    assert _last(backend, 4).endswith(revised)
    assert "walk through it" not in _last(backend, 4)
    assert strategy.plan == "pick up the key first\nthen open the door"

    assert decisions[0].reasoning == "PLAN: turn to the door, then walk through it"
    assert decisions[1].reasoning == ("PLAN: turn to the door, then walk through it (kept from "
                                      "the previous turn)\n\nI see the door now.")
    assert "PLAN: pick up the key first" in decisions[3].reasoning


async def test_plan_is_not_shared_between_instances() -> None:
    backend = ScriptedBackend(["PLAN: explore the east room\nACTION: turn right",
                               "ACTION: drop", "PLAN: go north\nACTION: go forward"])
    first = create_strategy(_ctx(), backend)
    await first.act(_turn(0))
    second = create_strategy(_ctx(), backend)
    await second.act(_turn(0))
    await first.act(_turn(1))
    assert isinstance(first, PlanActionStrategy) and isinstance(second, PlanActionStrategy)
    assert _last(backend, 1).endswith(NO_PLAN_NOTE)
    assert "east room" not in "\n".join(m.content for m in backend.calls[1][0])
    assert second.plan == "" and first.plan == "go north"


async def test_history_shows_past_answers_as_actions() -> None:
    backend = ScriptedBackend(["PLAN: go on\nACTION: go forward", "ACTION: drop"])
    strategy = create_strategy(_ctx(alternate_roles=True), backend)
    await strategy.act(_turn(0))
    await strategy.act(_turn(1))
    messages = backend.calls[1][0]
    assert [m.role for m in messages] == ["user", "user", "assistant", "user"]  # unmerged
    assert [m.role for m in merge_consecutive_roles(messages)] == ["user", "assistant", "user"]
    assert messages[2].content.endswith("ACTION: go forward")
    assert messages[-1].content.endswith(f"{PLAN_NOTE}\ngo on")


async def test_reply_without_action_is_unmatched_and_keeps_no_plan() -> None:
    backend = ScriptedBackend(["let me think about it", Completion(
        text="PLAN: reach the key\nACTION: fly", reasoning="provider thoughts",
        usage=TokenUsage(), stop_reason="stop", latency_s=0.0)])
    strategy = create_strategy(_ctx(), backend)
    decision = await strategy.act(_turn(0))
    assert decision.action == "let me think about it"
    assert decision.reasoning == "PLAN: (none yet)\n\nlet me think about it"
    decision = await strategy.act(_turn(1))
    assert decision.action == "fly"  # unmatched: the env judges it invalid
    assert decision.reasoning.startswith("provider thoughts\n\nPLAN: reach the key")
    assert "let me think about it" in backend.calls[1][0][2].content  # shown verbatim


@pytest.mark.parametrize(("text", "plan", "other"), [
    ("PLAN: a\nACTION: b", "a", ""),
    ("thinking\n**PLAN**: step one\nstep two\nACTION: x", "step one\nstep two", "thinking"),
    ("ACTION: x", None, ""),
    ("plan: lower case works\naction: x", "lower case works", ""),
    ("PLAN:\nACTION: x", None, ""),
    ("PLAN: old\nACTION: y\nPLAN: new\nACTION: x", "new", "PLAN: old\nACTION: y"),
    ("PLAN: only a plan", "only a plan", ""),
    ("**PLAN:** bold plan\n**ACTION:** x", "bold plan", ""),
])
def test_split_plan(text: str, plan: str | None, other: str) -> None:
    assert split_plan(text) == (plan, other)


async def test_recorded_prompt_holds_the_plan_note() -> None:
    backend = ScriptedBackend(["PLAN: go east\nACTION: turn right", "ACTION: go forward"])
    ctx = _ctx()
    ctx.record_prompts = True
    strategy = create_strategy(ctx, backend)
    await strategy.act(_turn(0))
    decision = await strategy.act(_turn(1))
    assert f"{PLAN_NOTE}\\ngo east" in decision.prompt_json
