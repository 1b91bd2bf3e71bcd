"""HistoryBuilder: message order, text/image/reasoning windows, roles."""

from __future__ import annotations

import itertools

import pytest

from agent_server.backends.base import ChatMessage, merge_consecutive_roles
from agent_server.history import (
    EMPTY_REPLY,
    IMAGE_NOTE,
    OBSERVATION_LABEL,
    HistoryBuilder,
    short_term_text,
)
from agent_server.turn import TurnInput
from moria.config import AgentConfig, ClientConfig


def _turn(
    step: int, *, short: str = "", image: bytes | None = None, feedback: str = ""
) -> TurnInput:
    return TurnInput(
        step=step,
        long_term_context=f"view {step}",
        short_term_context=short,
        image_png=image,
        legal_actions=[],
        info={},
        last_feedback=feedback,
    )


def _png(step: int) -> bytes:
    return b"\x89PNG" + bytes([step])


def _play(builder: HistoryBuilder, steps: int, *, images: bool = False) -> TurnInput:
    """Record ``steps`` past steps (0..steps-1) and return the current turn (index ``steps``)."""
    for i in range(steps):
        turn = _turn(i, image=_png(i) if images else None)
        builder.record(turn, f"act {i}", f"why {i}")
    return _turn(steps, short=f"status {steps}", image=_png(steps) if images else None)


def test_message_order_and_current_observation_layout() -> None:
    builder = HistoryBuilder("RULES", AgentConfig(max_text_history=16))
    messages = builder.build(_play(builder, 2))

    assert [m.role for m in messages] == ["system", *["user", "assistant"] * 2, "user"]
    assert messages[0].content == "RULES"
    assert messages[1].content == f"{OBSERVATION_LABEL} (step 0):\nview 0"
    assert messages[2].content.endswith("act 0")
    assert messages[3].content == f"{OBSERVATION_LABEL} (step 1):\nview 1"
    assert messages[4].content.endswith("act 1")
    # label and long-term text as a past step shows them, then the short-term context
    assert messages[-1].content.split("\n") == [f"{OBSERVATION_LABEL} (step 2):", "view 2",
                                                "status 2"]


def test_each_chat_starts_with_the_previous_chat_up_to_its_short_term_tail() -> None:
    """Prefix stability: once the current observation becomes a past step, its message is
    the current one cut before its short-term text, and everything before it is unchanged, so
    a prefix cache reuses the whole previous chat but that tail."""
    builder = HistoryBuilder("RULES", AgentConfig(max_text_history=16))
    chats = []
    for step in range(4):
        turn = _turn(step, short=f"status {step}")
        chats.append(builder.build(turn))
        builder.record(turn, f"act {step}")
    for step, (before, after) in enumerate(itertools.pairwise(chats)):
        assert after[:len(before) - 1] == before[:-1]
        shown_as_current, shown_as_past = before[-1], after[len(before) - 1]
        assert shown_as_current.content == f"{shown_as_past.content}\nstatus {step}"
        assert shown_as_past.content == f"{OBSERVATION_LABEL} (step {step}):\nview {step}"


def test_text_window_keeps_only_labels_of_older_observations() -> None:
    # image window 6 keeps 5 past steps remembered; the text window shows only the newest 2
    builder = HistoryBuilder("RULES", AgentConfig(max_text_history=2, max_image_history=6))
    messages = builder.build(_play(builder, 5))

    past_obs = [m.content for m in messages[1:-1] if m.role == "user"]
    assert len(past_obs) == 5
    assert [("view" in c) for c in past_obs] == [False, False, False, True, True]
    assert past_obs[0].startswith(f"{OBSERVATION_LABEL} (step 0):")
    assert "view 0" not in past_obs[0]
    assert past_obs[3].endswith("view 3")
    assert past_obs[4].endswith("view 4")


def test_steps_beyond_every_window_are_dropped() -> None:
    builder = HistoryBuilder("RULES", AgentConfig(max_text_history=3, max_cot_history=1))
    messages = builder.build(_play(builder, 10))

    assert len(builder.steps) == 3
    assert [s.step for s in builder.steps] == [7, 8, 9]
    assert len(messages) == 1 + 2 * 3 + 1
    assert all("view" in m.content for m in messages if m.role == "user")


def test_zero_text_history_still_shows_current_observation_and_short_term() -> None:
    agent = AgentConfig(max_text_history=0, max_cot_history=0)
    builder = HistoryBuilder("RULES", agent)
    current = _play(builder, 4)
    current.last_feedback = "Your previous output held no valid action; Noop was used."
    messages = builder.build(current)

    assert [m.role for m in messages] == ["system", "user"]
    assert "Your previous output held no valid action; Noop was used." in messages[-1].content
    assert "view 4" in messages[-1].content


def test_feedback_leads_the_short_term_text_after_a_blank_line() -> None:
    builder = HistoryBuilder("RULES", AgentConfig(max_text_history=0, max_cot_history=0))
    fb = "That was not a valid action."
    label = f"{OBSERVATION_LABEL} (step 1):"
    both = builder.build(_turn(1, short="hp 5", feedback=fb))[-1].content
    assert both == f"{label}\nview 1\n{fb}\n\nhp 5"
    alone = builder.build(_turn(1, feedback=fb))[-1].content
    assert alone == f"{label}\nview 1\n{fb}"
    quiet = builder.build(_turn(1, short="hp 5"))[-1].content
    assert quiet == f"{label}\nview 1\nhp 5"
    assert builder.build(_turn(1))[-1].content == f"{label}\nview 1"


def test_short_term_text_composition() -> None:
    fb = "That was not a valid action."
    assert short_term_text(_turn(1, short="hp 5", feedback=fb)) == f"{fb}\n\nhp 5"
    assert short_term_text(_turn(1, feedback=fb)) == fb
    assert short_term_text(_turn(1, short="hp 5")) == "hp 5"
    assert short_term_text(_turn(1)) == ""
    # no de-duplication: the env never puts the feedback in its text, so both are shown as given
    assert short_term_text(_turn(1, short=fb, feedback=fb)) == f"{fb}\n\n{fb}"


def test_no_feedback_no_sentence() -> None:
    """With eval.feedback_on_invalid_action off the orchestrator forwards no feedback, and the
    prompt shows none (the short-term text is the env's alone)."""
    builder = HistoryBuilder("RULES", AgentConfig(max_text_history=2, max_cot_history=0))
    content = builder.build(_turn(1, short="hp 5", feedback=""))[-1].content
    assert "valid" not in content and content.endswith("view 1\nhp 5")


def test_image_window_counts_current_observation() -> None:
    builder = HistoryBuilder("RULES", AgentConfig(max_text_history=4, max_image_history=2))
    messages = builder.build(_play(builder, 4, images=True))

    user = [m for m in messages if m.role == "user"]
    assert [len(m.images) for m in user] == [0, 0, 0, 1, 1]
    assert user[-1].images == [_png(4)]
    assert user[-2].images == [_png(3)]
    assert IMAGE_NOTE in user[-1].content and IMAGE_NOTE not in user[0].content
    assert sum(len(m.images) for m in messages) == 2


def test_zero_image_history_is_text_only() -> None:
    builder = HistoryBuilder("RULES", AgentConfig(max_text_history=4, max_image_history=0))
    messages = builder.build(_play(builder, 3, images=True))
    assert all(not m.images for m in messages)
    assert all(IMAGE_NOTE not in m.content for m in messages)


def test_image_window_one_attaches_only_current_image() -> None:
    builder = HistoryBuilder("RULES", AgentConfig(max_text_history=4, max_image_history=1))
    messages = builder.build(_play(builder, 3, images=True))
    assert [len(m.images) for m in messages] == [0, 0, 0, 0, 0, 0, 0, 1]


def test_cot_window_limits_reasoning_to_newest_answers() -> None:
    agent = AgentConfig(max_text_history=5, max_cot_history=2, remember_cot=True)
    builder = HistoryBuilder("RULES", agent, answer_template="ACTION: {action}")
    messages = builder.build(_play(builder, 5))

    answers = [m.content for m in messages if m.role == "assistant"]
    assert answers[:3] == ["ACTION: act 0", "ACTION: act 1", "ACTION: act 2"]
    assert answers[3] == "why 3\nACTION: act 3"
    assert answers[4] == "why 4\nACTION: act 4"


def test_remember_cot_off_shows_no_reasoning() -> None:
    agent = AgentConfig(max_text_history=5, max_cot_history=5, remember_cot=False)
    builder = HistoryBuilder("RULES", agent)
    messages = builder.build(_play(builder, 5))
    answers = [m.content for m in messages if m.role == "assistant"]
    assert answers == [f"act {i}" for i in range(5)]


def test_cot_window_keeps_last_answer_with_zero_text_history() -> None:
    agent = AgentConfig(max_text_history=0, max_cot_history=1, remember_cot=True)
    builder = HistoryBuilder("RULES", agent)
    messages = builder.build(_play(builder, 3))
    assert [m.role for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[1].content == f"{OBSERVATION_LABEL} (step 2):"
    assert messages[2].content == "why 2\nact 2"


def test_alternate_roles_sends_the_instruction_as_a_user_message_unmerged() -> None:
    builder = HistoryBuilder("RULES", AgentConfig(max_text_history=2), alternate_roles=True)
    messages = builder.build(_play(builder, 2))

    # the builder never merges; the backend does (Backend.strict_alternation / alternate_roles)
    assert [m.role for m in messages] == ["user", "user", "assistant", "user", "assistant",
                                          "user"]
    assert messages[0].content == "RULES"
    sent = merge_consecutive_roles(messages)  # what a merging backend sends
    roles = [m.role for m in sent]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assert all(a != b for a, b in itertools.pairwise(roles))
    assert sent[0].content.startswith("RULES\n\n" + OBSERVATION_LABEL)


def test_alternate_roles_with_no_history_merges_into_one_user_message() -> None:
    builder = HistoryBuilder(
        "RULES", AgentConfig(max_text_history=0, max_cot_history=0), alternate_roles=True
    )
    messages = builder.build(_turn(0, short="s", image=_png(0)))
    assert (messages[0].role, messages[0].content) == ("user", "RULES")
    sent = merge_consecutive_roles(messages)
    assert len(sent) == 1
    assert sent[0].role == "user"
    assert sent[0].content.startswith("RULES\n\n" + OBSERVATION_LABEL)


def test_backends_alone_merge_roles() -> None:
    """Anthropic and Gemini take only alternating turns and always merge; the others merge
    only with ``client.alternate_roles``; the wrappers report their inner backend's rule."""
    from agent_server.backends.anthropic_backend import AnthropicBackend
    from agent_server.backends.base import ConcurrencyLimited, PromptCapped
    from agent_server.backends.gemini_backend import GeminiBackend
    from agent_server.backends.llamacpp_server import LlamaCppServerBackend
    from agent_server.backends.local_llama import LocalLlamaBackend
    from agent_server.backends.openai_compat import OpenAICompatBackend
    from agent_server.backends.vllm_engine import VLLMEngineBackend

    assert AnthropicBackend.strict_alternation and GeminiBackend.strict_alternation
    for cls in (OpenAICompatBackend, LocalLlamaBackend, LlamaCppServerBackend,
                VLLMEngineBackend):
        assert not cls.strict_alternation, cls.__name__
    strict = LocalLlamaBackend(ClientConfig(client_name="local"))
    strict.strict_alternation = True
    wrapped = ConcurrencyLimited(PromptCapped(strict, 100, provider="local"), 2)
    assert wrapped.strict_alternation
    assert not ConcurrencyLimited(LocalLlamaBackend(ClientConfig()), 2).strict_alternation


@pytest.mark.parametrize("alternate_roles", [False, True])
def test_build_never_merges_same_role_messages(alternate_roles: bool) -> None:
    builder = HistoryBuilder("RULES", AgentConfig(max_text_history=3),
                             alternate_roles=alternate_roles)
    messages = builder.build(_play(builder, 3))
    assert len(messages) == 1 + 2 * 3 + 1
    assert messages[0].content == "RULES"
    assert messages[0].role == ("user" if alternate_roles else "system")


def test_merge_consecutive_roles_joins_text_and_images_without_mutating() -> None:
    original = [
        ChatMessage("system", "a"),
        ChatMessage("user", "b", [b"1"]),
        ChatMessage("user", "c", [b"2"]),
        ChatMessage("assistant", "d"),
        ChatMessage("assistant", ""),
        ChatMessage("user", "e"),
    ]
    merged = merge_consecutive_roles(original)
    assert [(m.role, m.content, m.images) for m in merged] == [
        ("system", "a", []),
        ("user", "b\n\nc", [b"1", b"2"]),
        ("assistant", "d", []),
        ("user", "e", []),
    ]
    assert original[1].content == "b" and original[1].images == [b"1"]


def test_builders_share_no_state() -> None:
    agent = AgentConfig(max_text_history=4)
    first = HistoryBuilder("RULES", agent)
    second = HistoryBuilder("RULES", agent)
    _play(first, 3)
    assert second.steps == ()
    assert len(second.build(_turn(0))) == 2


def test_answer_template_requires_placeholder() -> None:
    with pytest.raises(ValueError):
        HistoryBuilder("RULES", AgentConfig(), answer_template="ACTION:")


def test_verbatim_answers_skip_template_and_empty_replies_get_placeholder() -> None:
    agent = AgentConfig(max_text_history=4, max_cot_history=4)
    builder = HistoryBuilder("RULES", agent, answer_template="<A>{action}</A>")
    builder.record(_turn(0), "I ramble without an answer", "ignored", verbatim=True)
    builder.record(_turn(1), "drop", "because")
    builder.record(_turn(2), "")
    answers = [m.content for m in builder.build(_turn(3)) if m.role == "assistant"]
    assert answers == ["I ramble without an answer", "because\n<A>drop</A>", "<A></A>"]
    naked = HistoryBuilder("RULES", agent)
    naked.record(_turn(0), "")
    naked.record(_turn(1), "  ", verbatim=True)
    answers = [m.content for m in naked.build(_turn(2)) if m.role == "assistant"]
    assert answers == [EMPTY_REPLY, EMPTY_REPLY]


def test_prompt_bytes_counts_utf8_bytes_and_png_bytes() -> None:
    from agent_server.backends.base import ChatMessage, prompt_bytes

    messages = [ChatMessage("system", "go to the red box"),            # ASCII: 17 bytes
                ChatMessage("user", "café → ☕", images=[b"\x89PNG" + bytes(6)]),
                ChatMessage("assistant", "")]
    expected = sum(len(m.content.encode("utf-8")) for m in messages) + 10
    assert prompt_bytes(messages) == expected == 17 + len("café → ☕".encode()) + 10
