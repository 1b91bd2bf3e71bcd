"""Strategies against a scripted in-test backend; dummy and oracle without one."""

from __future__ import annotations

import copy
import dataclasses
import typing
from collections.abc import Sequence
from pathlib import Path

import pytest

from agent_server.backends.base import (
    Backend,
    BackendError,
    ChatMessage,
    Completion,
    GenerateParams,
    TokenUsage,
)
from agent_server.extract import END_TAG, START_TAG
from agent_server.history import OBSERVATION_LABEL
from agent_server.strategies import (
    STRATEGIES,
    CotStrategy,
    DummyStrategy,
    NaiveStrategy,
    OracleStrategy,
    RobustCotStrategy,
    RobustNaiveStrategy,
    create_strategy,
)
from agent_server.turn import DemoEpisode, DemoStep, EpisodeContext, TurnInput
from moria.config import AgentConfig, AgentType, ClientConfig, GenerateKwargs

ACTIONS = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]


class ScriptedBackend(Backend):
    """Returns scripted completions in order (an exception in the script is raised) and records
    every call's messages and params.
    """

    name = "scripted"

    def __init__(self, replies: Sequence[str | Completion | Exception]) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[list[ChatMessage], GenerateParams]] = []

    async def complete(self, messages: list[ChatMessage], params: GenerateParams) -> Completion:
        self.calls.append((copy.deepcopy(messages), params))
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, Completion):
            return reply
        return Completion(
            text=reply,
            usage=TokenUsage(input_tokens=100, output_tokens=7),
            stop_reason="stop",
            latency_s=0.25,
        )


def _ctx(
    agent_type: str = "naive",
    *,
    seed: int = 1234,
    actions: list[str] | None = None,
    agent: dict[str, object] | None = None,
    client: ClientConfig | None = None,
) -> EpisodeContext:
    return EpisodeContext(
        instruction="You are in a grid world. Actions: " + ", ".join(ACTIONS),
        action_names=list(ACTIONS if actions is None else actions),
        default_action="go forward",
        agent=AgentConfig(type=agent_type, **(agent or {})),  # type: ignore[arg-type]
        client=client or ClientConfig(),
        seed=seed,
        env_name="babyai",
        task="goto",
        agent_id="agent-0",
    )


def _turn(step: int = 0, **kwargs: object) -> TurnInput:
    fields: dict[str, object] = {
        "step": step,
        "long_term_context": f"a wall {step} steps ahead",
        "short_term_context": "",
        "image_png": None,
        "legal_actions": [],
        "info": {},
    }
    fields.update(kwargs)
    return TurnInput(**fields)  # type: ignore[arg-type]


def test_registry_covers_every_agent_type() -> None:
    assert set(STRATEGIES) == set(typing.get_args(AgentType))
    backend = ScriptedBackend([])
    # scripted, rl and human need a supported game, a checkpoint or a console: their own test
    # files (test_scripted_players, test_rl_checkpoint, test_worker_protocol) construct them.
    for name, cls in STRATEGIES.items():
        if name in {"scripted", "rl", "human"}:
            continue
        ctx = _ctx(name)
        if name == "few_shot":
            ctx.demonstrations = (
                DemoEpisode("goto", 1, "", "babyai-bot", (DemoStep("o", "drop"),)),)
        strategy = create_strategy(ctx, backend)
        assert type(strategy) is cls


def test_llm_strategy_without_backend_is_rejected() -> None:
    with pytest.raises(ValueError):
        create_strategy(_ctx("cot"), None)
    assert isinstance(create_strategy(_ctx("dummy"), None), DummyStrategy)


@pytest.mark.asyncio
async def test_naive_decision_params_and_prompt() -> None:
    backend = ScriptedBackend(["Turn Left."])
    client = ClientConfig(
        generate_kwargs=GenerateKwargs.model_validate(
            {"temperature": 0.3, "max_tokens": 77, "top_p": 0.9}
        )
    )
    strategy = create_strategy(_ctx("naive", client=client), backend)

    decision = await strategy.act(_turn(0, short_term_context="carrying nothing"))

    assert decision.action == "turn left"
    assert decision.raw_completion == "Turn Left."
    assert decision.usage == TokenUsage(input_tokens=100, output_tokens=7)
    assert decision.latency_s == 0.25
    assert decision.stop_reason == "stop"
    assert decision.reasoning == ""
    messages, params = backend.calls[0]
    assert [m.role for m in messages] == ["system", "user"]
    assert messages[0].content.startswith("You are in a grid world.")
    assert messages[0].content != _ctx().instruction  # the format rules were appended
    assert "exactly one" in messages[0].content
    assert messages[1].content.startswith(OBSERVATION_LABEL)
    assert "carrying nothing" in messages[1].content
    assert params.temperature == 0.3
    assert params.max_tokens == 77
    assert params.choices is None
    assert params.extra["top_p"] == 0.9
    assert isinstance(params.extra["seed"], int) and 0 <= params.extra["seed"] < 2**31


@pytest.mark.asyncio
async def test_naive_history_grows_with_past_steps() -> None:
    backend = ScriptedBackend(["toggle", "nonsense", "drop"])
    strategy = create_strategy(_ctx("naive", agent={"max_text_history": 16}), backend)
    first = await strategy.act(_turn(0))
    second = await strategy.act(_turn(1))
    third = await strategy.act(
        _turn(2, last_feedback="Your output was not a valid action; go forward was used.")
    )

    assert (first.action, second.action, third.action) == ("toggle", "nonsense", "drop")
    messages = backend.calls[2][0]
    assert [m.role for m in messages] == ["system", *["user", "assistant"] * 2, "user"]
    assert messages[2].content == "toggle"
    assert messages[4].content == "nonsense"
    assert "not a valid action" in messages[-1].content
    assert "a wall 2 steps ahead" in messages[-1].content


@pytest.mark.asyncio
async def test_naive_constrained_output_gets_choices() -> None:
    backend = ScriptedBackend(["drop", "drop"])
    strategy = create_strategy(_ctx("naive", client=ClientConfig(constrain_actions=True)), backend)
    await strategy.act(_turn(0))
    await strategy.act(_turn(1, legal_actions=["drop", "toggle"]))
    assert backend.calls[0][1].choices == ACTIONS
    assert backend.calls[1][1].choices == ["drop", "toggle"]


@pytest.mark.asyncio
async def test_only_naive_is_constrained() -> None:
    client = ClientConfig(constrain_actions=True)
    for name in ("cot", "robust_naive", "robust_cot"):
        backend = ScriptedBackend(["ACTION: drop"])
        await create_strategy(_ctx(name, client=client), backend).act(_turn())
        assert backend.calls[0][1].choices is None


@pytest.mark.asyncio
async def test_seed_is_deterministic_per_episode_and_overridable() -> None:
    async def seeds(ctx: EpisodeContext) -> list[object]:
        backend = ScriptedBackend(["drop"] * 3)
        strategy = create_strategy(ctx, backend)
        for step in range(3):
            await strategy.act(_turn(step))
        return [params.extra["seed"] for _, params in backend.calls]

    a, b, c = await seeds(_ctx(seed=7)), await seeds(_ctx(seed=7)), await seeds(_ctx(seed=8))
    assert a == b
    assert a != c
    assert len(set(a)) == 3  # a fresh provider seed per call
    fixed = ClientConfig(generate_kwargs=GenerateKwargs.model_validate({"seed": 42}))
    assert await seeds(_ctx(seed=7, client=fixed)) == [42, 42, 42]


@pytest.mark.asyncio
async def test_cot_extracts_marker_and_remembers_reasoning() -> None:
    replies = [
        "The key is to my left.\nACTION: turn left",
        "Now ahead.\nACTION: go forward",
        "I forgot the format and just ramble",
    ]
    backend = ScriptedBackend(replies)
    strategy = create_strategy(
        _ctx("cot", agent={"max_cot_history": 1, "remember_cot": True}), backend
    )
    first = await strategy.act(_turn(0))
    second = await strategy.act(_turn(1))
    third = await strategy.act(_turn(2))

    assert first.action == "turn left"
    assert first.reasoning == replies[0]
    assert second.action == "go forward"
    assert third.action == replies[2]  # no marker: raw text, which the env will reject
    system = backend.calls[0][0][0].content
    assert "ACTION: <action>" in system and "step by step" in system
    answers = [m.content for m in backend.calls[2][0] if m.role == "assistant"]
    assert answers == ["ACTION: turn left", "Now ahead.\nACTION: go forward"]


@pytest.mark.asyncio
async def test_reply_without_answer_is_remembered_verbatim() -> None:
    replies = ["I would rather go forward", "x\nACTION: dance", "ok\nACTION: drop"]
    backend = ScriptedBackend(replies)
    strategy = create_strategy(_ctx("cot", agent={"max_cot_history": 0}), backend)
    actions = [(await strategy.act(_turn(step))).action for step in range(3)]
    assert actions == ["I would rather go forward", "dance", "drop"]
    answers = [m.content for m in backend.calls[2][0] if m.role == "assistant"]
    # no marker: the raw reply as written; marker with an unknown action: the usual format
    assert answers == ["I would rather go forward", "ACTION: dance"]


@pytest.mark.asyncio
async def test_cot_without_remember_cot_shows_bare_actions() -> None:
    backend = ScriptedBackend(["a\nACTION: drop", "b\nACTION: toggle", "c\nACTION: drop"])
    strategy = create_strategy(
        _ctx("cot", agent={"max_cot_history": 5, "remember_cot": False}), backend
    )
    for step in range(3):
        await strategy.act(_turn(step))
    answers = [m.content for m in backend.calls[2][0] if m.role == "assistant"]
    assert answers == ["ACTION: drop", "ACTION: toggle"]


@pytest.mark.asyncio
async def test_reasoning_records_provider_reasoning() -> None:
    thought = Completion(text="drop", reasoning="hidden thoughts", stop_reason="stop")
    decision = await create_strategy(_ctx("naive"), ScriptedBackend([thought])).act(_turn())
    assert decision.reasoning == "hidden thoughts"
    cot = Completion(text="visible\nACTION: drop", reasoning="hidden", stop_reason="stop")
    decision = await create_strategy(_ctx("cot"), ScriptedBackend([cot])).act(_turn())
    assert decision.reasoning == "hidden\n\nvisible\nACTION: drop"


@pytest.mark.asyncio
async def test_robust_naive_tags_and_fallback() -> None:
    backend = ScriptedBackend([f"{START_TAG}pick up{END_TAG}", "toggle"])
    strategy = create_strategy(_ctx("robust_naive"), backend)
    assert isinstance(strategy, RobustNaiveStrategy)
    assert (await strategy.act(_turn(0))).action == "pick up"
    assert (await strategy.act(_turn(1))).action == "toggle"  # no tags: whole completion
    system = backend.calls[0][0][0].content
    assert f"{START_TAG}action{END_TAG}" in system
    answers = [m.content for m in backend.calls[1][0] if m.role == "assistant"]
    assert answers == [f"{START_TAG}pick up{END_TAG}"]


@pytest.mark.asyncio
async def test_robust_cot_missing_tags_is_invalid() -> None:
    backend = ScriptedBackend([f"Door ahead, open it. {START_TAG}toggle{END_TAG}", "I'd pick up"])
    strategy = create_strategy(_ctx("robust_cot"), backend)
    assert isinstance(strategy, RobustCotStrategy)
    first = await strategy.act(_turn(0))
    second = await strategy.act(_turn(1))
    assert first.action == "toggle"
    assert "Door ahead" in first.reasoning
    assert second.action == "I'd pick up"  # not matched to "pick up": the tags were missing


@pytest.mark.asyncio
async def test_free_text_game_returns_command() -> None:
    backend = ScriptedBackend(["Take the brass key."])
    strategy = create_strategy(_ctx("naive", actions=[]), backend)
    decision = await strategy.act(_turn())
    assert decision.action == "Take the brass key"
    assert backend.calls[0][1].choices is None


@pytest.mark.asyncio
async def test_backend_error_propagates_and_records_nothing() -> None:
    failure = BackendError("bad request", provider="scripted", status=400)
    backend = ScriptedBackend([failure])
    strategy = create_strategy(_ctx("cot"), backend)
    assert isinstance(strategy, CotStrategy)
    with pytest.raises(BackendError):
        await strategy.act(_turn())
    assert strategy.history.steps == ()


@pytest.mark.asyncio
async def test_episodes_do_not_share_state() -> None:
    backend = ScriptedBackend(["drop", "drop", "toggle"])
    first = create_strategy(_ctx("naive"), backend)
    await first.act(_turn(0))
    await first.act(_turn(1))
    second = create_strategy(_ctx("naive"), backend)
    assert isinstance(second, NaiveStrategy)
    await second.act(_turn(0))
    assert [m.role for m in backend.calls[2][0]] == ["system", "user"]


@pytest.mark.asyncio
async def test_dummy_is_deterministic_per_seed_and_varies_across_seeds() -> None:
    async def play(seed: int) -> list[str]:
        strategy = create_strategy(_ctx("dummy", seed=seed), None)
        return [(await strategy.act(_turn(step))).action for step in range(30)]

    a, b = await play(2**63 + 5), await play(2**63 + 5)
    assert a == b
    assert set(a) <= set(ACTIONS)
    assert len(set(a)) > 1
    others = [await play(seed) for seed in (1, 2, 3)]
    assert any(other != a for other in others)


@pytest.mark.asyncio
async def test_dummy_prefers_legal_actions_and_falls_back_to_default() -> None:
    strategy = create_strategy(_ctx("dummy"), None)
    for step in range(10):
        decision = await strategy.act(_turn(step, legal_actions=["e2e4", "d2d4"]))
        assert decision.action in {"e2e4", "d2d4"}
    empty = create_strategy(_ctx("dummy", actions=[]), None)
    assert (await empty.act(_turn())).action == "go forward"


@pytest.mark.asyncio
async def test_oracle_plays_expert_action_or_default() -> None:
    strategy = create_strategy(_ctx("oracle"), None)
    assert isinstance(strategy, OracleStrategy)
    hinted = await strategy.act(_turn(0, info={"expert_action": "toggle"}))
    assert hinted.action == "toggle"
    by_index = await strategy.act(_turn(1, info={"expert_action": 3}))
    assert by_index.action == "pick up"
    missing = await strategy.act(_turn(2, info={}))
    assert missing.action == "go forward"
    assert "absent" in missing.reasoning
    assert missing.usage == TokenUsage()


def test_the_generated_strategy_table_matches_the_strategy_classes() -> None:
    """The strategy classes own calls_model / reads_tensors / keeps_images; moria/strategies.json
    (what the orchestrator, the workers and moria.config read) must say exactly what they
    declare, and moria.config's sets must be derived from it."""
    from agent_server.strategies import STRATEGIES, registry_facts
    from agent_server.strategies.llm import LLMStrategy
    from agent_server.strategies.table import main as table_main
    from moria.config import NON_MODEL_AGENT_TYPES, TENSOR_AGENT_TYPES
    from moria.strategies import TABLE_PATH, StrategyFacts, strategy_facts, table_text

    assert table_main(["--check"]) == 0
    assert TABLE_PATH.read_text(encoding="utf-8") == table_text(registry_facts())
    table = strategy_facts()
    assert set(table) == set(STRATEGIES)
    for name, cls in STRATEGIES.items():
        assert table[name] == StrategyFacts(name, cls.calls_model, cls.reads_tensors,
                                            cls.keeps_images)
        # Only the prompting strategies call a model, and they are the VLM-capable ones.
        assert cls.calls_model == issubclass(cls, LLMStrategy) == cls.keeps_images
    assert {"dummy", "random", "oracle", "scripted", "rl", "human"} == NON_MODEL_AGENT_TYPES
    assert {"scripted", "rl"} == TENSOR_AGENT_TYPES
    assert {n for n, f in table.items() if not f.calls_model} == NON_MODEL_AGENT_TYPES
    assert {n for n, f in table.items() if f.reads_tensors} == TENSOR_AGENT_TYPES


def test_strategy_facts_default_to_no_and_gate_images(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The base class says "no" to every fact; uses_images follows keeps_images and
    agent.max_image_history; a stale table fails --check."""
    from agent_server.strategies import table as table_module
    from agent_server.strategies.base import Strategy
    from moria.strategies import StrategyFacts

    assert (Strategy.calls_model, Strategy.reads_tensors, Strategy.keeps_images) == (
        False, False, False)
    text_only = create_strategy(_ctx("naive"), ScriptedBackend([]))
    assert text_only.keeps_images and not text_only.uses_images
    vlm = create_strategy(_ctx("naive", agent={"max_image_history": 1},
                               client=ClientConfig(client_name="openai")), ScriptedBackend([]))
    assert vlm.uses_images
    # A player that keeps no images ignores the window.
    assert not create_strategy(_ctx("dummy", agent={"max_image_history": 1}), None).uses_images
    with pytest.raises(KeyError):
        StrategyFacts.from_json({"name": "x", "calls_model": True, "reads_tensors": False})
    with pytest.raises(TypeError):
        StrategyFacts.from_json({"name": "x", "calls_model": 1, "reads_tensors": False,
                                 "keeps_images": False})
    stale = tmp_path / "strategies.json"
    stale.write_text('{"strategies": []}\n', encoding="utf-8")
    monkeypatch.setattr(table_module, "TABLE_PATH", stale)
    assert table_module.main(["--check"]) == 1
    assert table_module.main([]) == 0
    assert table_module.main(["--check"]) == 0


class _TypedMoves:
    """A ``HumanConsole`` with moves typed ahead; closed once they run out."""

    def __init__(self, *moves: str) -> None:
        self.moves = list(moves)
        self.asked: list[str] = []

    async def ask(self, ctx: EpisodeContext, turn: TurnInput) -> str:
        self.asked.append(ctx.agent_id)
        if not self.moves:
            raise ConnectionError("no more moves")
        return self.moves.pop(0)


def test_the_human_strategy_needs_a_console() -> None:
    with pytest.raises(ValueError, match="human console"):
        create_strategy(_ctx("human"), None)


async def test_the_human_strategy_plays_the_typed_move_and_fails_when_the_console_closes(
) -> None:
    """A policy server with a human console (a terminal front end) seats a human: the move is
    answered as typed (stripped); a closed console is a backend error (an agent error)."""
    console = _TypedMoves(" go forward \n")
    strategy = create_strategy(dataclasses.replace(_ctx("human"), human_console=console), None)
    decision = await strategy.act(_turn())
    assert (decision.action, decision.raw_completion) == ("go forward", " go forward \n")
    assert decision.usage.input_tokens == 0 and console.asked == ["agent-0"]
    with pytest.raises(BackendError, match="closed"):
        await strategy.act(_turn(1))
