"""few_shot: demonstrations between markers before the episode's own history."""

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
from agent_server.service import demos_from_proto
from agent_server.strategies import STRATEGIES, create_strategy
from agent_server.strategies.few_shot import (
    DEMO_END,
    DEMO_START,
    NOW_YOUR_TURN,
    FewShotStrategy,
    cut_demonstrations,
)
from agent_server.turn import DemoEpisode, DemoStep, EpisodeContext, TurnInput
from moria.config import AgentConfig, ClientConfig
from moria.policy.v1 import policy_service_pb2 as pol_pb

ACTIONS = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]
INSTRUCTION = "You are playing BabyAI.\nYour goal: go to the green key.\nActions: " + ", ".join(
    ACTIONS)


class ScriptedBackend(Backend):
    """A test double of the model: returns queued replies and records the messages it got."""

    name = "scripted"

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[list[ChatMessage], GenerateParams]] = []

    async def complete(self, messages: list[ChatMessage], params: GenerateParams) -> Completion:
        self.calls.append((copy.deepcopy(messages), params))
        return Completion(text=self.replies.pop(0), usage=TokenUsage(input_tokens=10,
                                                                     output_tokens=1),
                          stop_reason="stop", latency_s=0.01)


def _demo(tag: str, steps: int = 3, goal: str = "go to the red ball") -> DemoEpisode:
    return DemoEpisode(
        task="BabyAI-MixedTrainLocal-v0/goto", seed=sum(map(ord, tag)),
        instruction=f"You are playing BabyAI.\nYour goal: {goal}.\nActions: "
                    + ", ".join(ACTIONS),
        source="babyai-bot",
        steps=tuple(DemoStep(f"{tag} observation {i}", ACTIONS[i % 3],
                             1.0 if i == steps - 1 else 0.0) for i in range(steps)))


def _ctx(demos: tuple[DemoEpisode, ...], *, max_icl: int = 1000,
         alternate_roles: bool = False) -> EpisodeContext:
    return EpisodeContext(
        instruction=INSTRUCTION, action_names=list(ACTIONS), default_action="go forward",
        agent=AgentConfig(type="few_shot", max_icl_history=max_icl),
        client=ClientConfig(alternate_roles=alternate_roles), seed=7, env_name="babyai",
        task="BabyAI-MixedTrainLocal-v0/goto", agent_id="agent_0", demonstrations=demos)


def _turn(step: int, text: str = "") -> TurnInput:
    return TurnInput(step=step, long_term_context=text or f"a wall {step} steps ahead",
                     short_term_context="", image_png=None, legal_actions=[], info={})


async def _first_prompt(demos: tuple[DemoEpisode, ...], **kwargs: object,
                        ) -> list[ChatMessage]:
    backend = ScriptedBackend(["go forward"])
    strategy = create_strategy(_ctx(demos, **kwargs), backend)  # type: ignore[arg-type]
    await strategy.act(_turn(0))
    return backend.calls[0][0]


def _demo_part(messages: list[ChatMessage]) -> list[ChatMessage]:
    """The demonstration turns: from the message after the instruction to the one that ends
    with NOW_YOUR_TURN."""
    end = next(i for i, m in enumerate(messages) if m.content.endswith(NOW_YOUR_TURN))
    return messages[1:end + 1]


def _text(messages: list[ChatMessage]) -> str:
    return "\n".join(m.content for m in messages)


def _demo_actions(messages: list[ChatMessage]) -> list[str]:
    return [m.content for m in _demo_part(messages) if m.role == "assistant"]


def test_registered_and_needs_demonstrations() -> None:
    assert STRATEGIES["few_shot"] is FewShotStrategy
    with pytest.raises(ValueError, match=r"moria record-demos --env babyai --tasks "
                                         r"BabyAI-MixedTrainLocal-v0/goto"):
        create_strategy(_ctx(()), ScriptedBackend([]))
    with pytest.raises(ValueError, match="needs a model backend"):
        create_strategy(_ctx((_demo("a"),)), None)


async def test_markers_come_in_order_between_instruction_and_episode() -> None:
    messages = await _first_prompt((_demo("alpha"), _demo("beta")))
    assert [m.role for m in messages] == ["system", *["user", "assistant"] * 6, "user", "user"]
    assert messages[0].content.startswith(INSTRUCTION)
    demo = _text(_demo_part(messages))
    order = [demo.index(DEMO_START), demo.index("Demonstration 1 of 2"),
             demo.index("alpha observation 0"), demo.index("Demonstration 2 of 2"),
             demo.index("beta observation 2"), demo.index(DEMO_END), demo.index(NOW_YOUR_TURN)]
    assert order == sorted(order)
    assert demo.endswith(NOW_YOUR_TURN)
    assert messages[-1].content.startswith(OBSERVATION_LABEL)
    assert "alpha" not in messages[-1].content


async def test_demo_steps_are_rendered_with_their_actions() -> None:
    part = _demo_part(await _first_prompt((_demo("alpha"),)))
    for i in range(3):
        seen = next(n for n, m in enumerate(part) if f"alpha observation {i}" in m.content)
        assert part[seen].role == "user"
        assert (part[seen + 1].role, part[seen + 1].content) == ("assistant", ACTIONS[i % 3])
    assert part[-1].content.startswith("(reward +1)")  # what the last action earned
    demo = _text(part)
    # Only the goal line of the demo's instruction differs from the episode's.
    assert "  Your goal: go to the red ball." in demo
    assert "You are playing BabyAI." not in demo
    same = _text(_demo_part(await _first_prompt((_demo("x", goal="go to the green key"),))))
    assert "same instructions as your episode" in same


@pytest.mark.parametrize(("cap", "expected"), [(1000, [3, 3]), (4, [3, 1]), (3, [3]),
                                               (2, [2]), (0, [])])
def test_cut_keeps_whole_first_demos(cap: int, expected: list[int]) -> None:
    demos = (_demo("alpha"), _demo("beta"))
    assert [n for _, n in cut_demonstrations(demos, cap)] == expected


async def test_prompt_is_cut_by_max_icl_history() -> None:
    messages = await _first_prompt((_demo("alpha"), _demo("beta")), max_icl=4)
    demo = _text(_demo_part(messages))
    assert "alpha observation 2" in demo
    assert "beta observation 0" in demo and "beta observation 1" not in demo
    assert "only its first 1 of 3 steps are shown" in demo
    assert len(_demo_actions(messages)) == 4

    demo = _text(_demo_part(await _first_prompt((_demo("alpha"), _demo("beta")), max_icl=3)))
    assert "beta" not in demo and "Demonstration 1 of 1" in demo

    messages = await _first_prompt((_demo("alpha"),), max_icl=0)
    demo = _text(_demo_part(messages))
    assert not _demo_actions(messages) and "max_icl_history = 0" in demo
    assert demo.index(DEMO_START) < demo.index(DEMO_END)


async def test_answer_is_read_as_naive_and_history_follows_the_demos() -> None:
    backend = ScriptedBackend(["Turn Left.", "drop"])
    strategy = create_strategy(_ctx((_demo("alpha"),)), backend)
    decision = await strategy.act(_turn(0))
    assert decision.action == "turn left"
    await strategy.act(_turn(1))
    messages = backend.calls[1][0]
    assert [m.role for m in messages][-4:] == ["user", "user", "assistant", "user"]
    assert messages[-2].content == "turn left"
    assert "a wall 0 steps ahead" in messages[-3].content
    assert messages[-4].content.endswith(NOW_YOUR_TURN)


async def test_alternate_roles_keeps_demos_after_the_instruction() -> None:
    backend = ScriptedBackend(["drop", "drop"])
    strategy = create_strategy(_ctx((_demo("alpha"),), alternate_roles=True), backend)
    await strategy.act(_turn(0))
    await strategy.act(_turn(1))
    messages = backend.calls[1][0]
    # the strategy hands the chat over unmerged, the instruction as a user message right
    # before the demonstrations; the backend merges same-role neighbours
    assert messages[0].role == "user" and messages[0].content.startswith(INSTRUCTION)
    assert messages[1].role == "user" and messages[1].content.startswith(DEMO_START)
    sent = merge_consecutive_roles(messages)
    roles = [m.role for m in sent]
    assert roles == ["user", "assistant"] * (len(roles) // 2) + ["user"] * (len(roles) % 2)
    first = sent[0].content
    assert first.index(INSTRUCTION) < first.index(DEMO_START)
    joined = _text(sent)
    assert joined.index(NOW_YOUR_TURN) < joined.index("a wall 0 steps ahead")


async def test_no_leak_across_instances_or_episodes() -> None:
    backend = ScriptedBackend(["drop", "toggle", "drop"])
    first = create_strategy(_ctx((_demo("alpha"),)), backend)
    await first.act(_turn(0, "first episode view"))
    await first.act(_turn(1, "first episode later view"))
    second = create_strategy(_ctx((_demo("beta"),)), backend)
    await second.act(_turn(0, "second episode view"))

    first_prompt = "\n".join(m.content for m in backend.calls[0][0])
    second_prompt = "\n".join(m.content for m in backend.calls[2][0])
    assert first_prompt != second_prompt
    assert "alpha observation" in first_prompt and "beta observation" not in first_prompt
    assert "beta observation" in second_prompt
    assert "alpha observation" not in second_prompt
    assert "first episode" not in second_prompt
    assert [m.role for m in backend.calls[2][0]][-2:] == ["user", "user"]
    assert backend.calls[2][0][-1].content.startswith(OBSERVATION_LABEL)


def test_demos_from_proto_keeps_order_and_fields() -> None:
    messages = [pol_pb.Demonstration(
        task="t", seed=2**63 + 5, instruction="i", source="solver",
        steps=[pol_pb.DemonstrationStep(observation="o1", action="up", reward=0.0),
               pol_pb.DemonstrationStep(observation="o2", action="left", reward=1.0)]),
        pol_pb.Demonstration(task="t", seed=3, source="solver")]
    episodes = demos_from_proto(messages)
    assert episodes[0] == DemoEpisode(task="t", seed=2**63 + 5, instruction="i",
                                      source="solver",
                                      steps=(DemoStep("o1", "up", 0.0), DemoStep("o2", "left",
                                                                                 1.0)))
    assert episodes[1].seed == 3 and episodes[1].steps == ()


async def test_recorded_prompt_holds_the_demonstrations() -> None:
    ctx = _ctx((_demo("alpha"),))
    ctx.record_prompts = True
    decision = await create_strategy(ctx, ScriptedBackend(["drop"])).act(_turn(0))
    assert DEMO_START in decision.prompt_json and "alpha observation 2" in decision.prompt_json
