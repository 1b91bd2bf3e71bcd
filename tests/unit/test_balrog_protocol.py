"""agent.protocol=balrog: loading BALROG's code from a checkout, the episode bridge, and BALROG's
answer rule, all against tests/fixtures/balrog_standin (a stand-in written for these tests with
BALROG's module layout and placeholder text)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agent_server.backends.base import Backend, ChatMessage, Completion, GenerateParams, TokenUsage
from agent_server.strategies.balrog_protocol import BalrogProtocolStrategy
from agent_server.turn import EpisodeContext, TurnInput
from env_server.actions import resolve_action
from env_server.game import ActionInfo
from moria.balrog_source import (
    BalrogSourceError,
    describe_commit,
    load_balrog_source,
)
from moria.config import AgentConfig, ClientConfig
from orchestrator.apps.protocol_check import (
    Captured,
    EnvCheck,
    Replayed,
    compare,
    normalize_request,
)

STANDIN = Path(__file__).resolve().parents[1] / "fixtures" / "balrog_standin"
BABYAI = ["turn left", "turn right", "go forward", "pick up", "drop", "toggle"]


class ScriptedBackend(Backend):
    """Answers from a list, in order, and keeps every (messages, params) it was sent."""

    def __init__(self, answers: list[str]) -> None:
        self.answers = list(answers)
        self.calls: list[tuple[list[ChatMessage], GenerateParams]] = []

    async def complete(self, messages: list[ChatMessage], params: GenerateParams) -> Completion:
        self.calls.append((messages, params))
        return Completion(text=self.answers[len(self.calls) - 1], usage=TokenUsage(3, 1),
                          latency_s=0.0, stop_reason="stop")

    async def aclose(self) -> None:
        return None


def _ctx(agent: dict[str, Any], *, env: str = "babyai", names: list[str] | None = None,
         generate: dict[str, Any] | None = None) -> EpisodeContext:
    return EpisodeContext(
        instruction="(Moria's own instruction, unused under protocol=balrog)",
        action_names=BABYAI if names is None else names, default_action="go forward",
        agent=AgentConfig(protocol="balrog", balrog_source=str(STANDIN), **agent),
        client=ClientConfig(client_name="vllm", model_id="m", base_url="http://127.0.0.1:9/v1",
                            **({"generate_kwargs": generate} if generate else {})),
        seed=1, env_name=env, task="BabyAI-MixedTrainLocal-v0/goto", agent_id="agent_0",
        first_info={"mission": "go to the red ball"})


def _turn(step: int, text: str, *, valid: bool = True, applied: str = "") -> TurnInput:
    return TurnInput(step=step, long_term_context=text, short_term_context="", image_png=None,
                     legal_actions=[], info={}, last_valid=valid, last_applied_action=applied)


# -- configuration


def test_balrog_protocol_without_a_source_is_refused_with_what_to_point_it_at() -> None:
    with pytest.raises(ValidationError, match=r"agent\.balrog_source=<path of a BALROG checkout>"):
        AgentConfig(protocol="balrog")


def test_balrog_protocol_only_plays_balrogs_agent_types() -> None:
    with pytest.raises(ValidationError, match="naive, cot, robust_naive, robust_cot, few_shot"):
        AgentConfig(protocol="balrog", balrog_source=str(STANDIN), type="plan_action")


def test_a_path_that_is_not_balrog_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BalrogSourceError, match="is not a BALROG checkout"):
        load_balrog_source(str(tmp_path))
    with pytest.raises(BalrogSourceError, match="does not exist"):
        load_balrog_source(str(tmp_path / "nowhere"))


# -- loading


def test_loading_imports_balrogs_code_without_its_uninstalled_game_packages() -> None:
    source = load_balrog_source(str(STANDIN))
    assert not source.load_errors
    # gym, baba and NLE's language wrapper are imported by the stand-in's game modules but not
    # installed: they were inert while loading and are gone again
    for name in ("gym", "baba", "nle.language_wrapper"):
        assert name not in sys.modules
    with pytest.raises(ModuleNotFoundError):
        __import__("gym")
    # the stand-in sits inside Moria's repository, not at the top of its own checkout
    assert describe_commit(source.package_dir) == "unknown"
    assert source.config.client.generate_kwargs.max_tokens == 321


def test_instructions_come_from_the_checkouts_own_functions() -> None:
    source = load_balrog_source(str(STANDIN))
    babyai = source.instruction("babyai", "BabyAI-MixedTrainLocal-v0/goto", action_names=BABYAI,
                                default_action="go forward", mission="go to the red ball")
    assert "STANDIN" in babyai and "go to the red ball" in babyai
    minihack = source.instruction("minihack", "MiniHack-Corridor-R3-v0",
                                  action_names=["north", "far east", "esc", "pickup"],
                                  default_action="esc")
    assert "STANDIN" in minihack and "far east" in minihack and "esc" not in minihack.split()
    for env in ("crafter", "textworld", "babaisai", "nle"):
        text = source.instruction(env, "coin_collector" if env == "textworld" else "default",
                                  action_names=[], default_action="x")
        assert "STANDIN" in text, env


def test_the_feedback_statement_is_the_checkouts_and_runs_only_for_a_replaced_answer() -> None:
    source = load_balrog_source(str(STANDIN))
    assert source.feedback is not None and "STANDIN" in source.feedback.source
    obs = {"text": {"long_term_context": "a wall"}}
    source.feedback.apply(obs, "go forward", "fly", source.config)
    assert obs["text"]["long_term_context"].startswith("STANDIN: your answer was not an action;")
    assert obs["text"]["long_term_context"].endswith("a wall")
    same = {"text": {"long_term_context": "a wall"}}
    source.feedback.apply(same, "turn left", "turn left", source.config)
    assert same["text"]["long_term_context"] == "a wall"


# -- BALROG's answer rule, golden table

#: completion -> (answer submitted, valid, action applied). The rule is BALROG's: the client
#: strips the completion, the naive agent keeps only letters, whitespace and colons, and the
#: answer is valid only when it is an action name exactly.
GOLDEN = [
    ("turn left", "turn left", True, "turn left"),
    ("Go forward", "Go forward", False, "go forward"),
    ("I will turn right.", "I will turn right", False, "go forward"),
    ("fly", "fly", False, "go forward"),
    ("  turn left\n", "turn left", True, "turn left"),
    ("turn left.", "turn left", True, "turn left"),
    ("**toggle**", "toggle", True, "toggle"),
    ("1. pick up", " pick up", False, "go forward"),
    ("TURN LEFT", "TURN LEFT", False, "go forward"),
    ("pick-up", "pickup", False, "go forward"),
    ("drop!!! 42", "drop ", False, "go forward"),
    ("", "", False, "go forward"),
]


@pytest.mark.parametrize(("completion", "answer", "valid", "applied"), GOLDEN)
async def test_naive_answer_rule_golden(completion: str, answer: str, valid: bool,
                                        applied: str) -> None:
    strategy = BalrogProtocolStrategy(_ctx({"type": "naive"}), ScriptedBackend([completion]))
    decision = await strategy.act(_turn(0, "a wall"))
    assert decision.action == answer
    assert decision.raw_completion == completion
    env_actions = [ActionInfo(name, "") for name in BABYAI]
    assert resolve_action(decision.action, env_actions, "go forward") == (applied, valid)


# -- the bridge


async def test_requests_follow_balrogs_structure_and_settings() -> None:
    backend = ScriptedBackend(["fly", "turn left"])
    strategy = BalrogProtocolStrategy(_ctx({"type": "naive"}), backend)
    await strategy.act(_turn(0, "a wall ahead"))
    await strategy.act(_turn(1, "a ball ahead", valid=False, applied="go forward"))
    first, params = backend.calls[0]
    # the instruction is a user message; the rule is appended to the last user message
    assert [m.role for m in first] == ["user", "user"]
    assert first[0].content == strategy.instruction and "go to the red ball" in first[0].content
    assert first[-1].content.startswith("STANDIN-NOW:")
    # the checkout's generation settings, and no provider seed (BALROG sends none)
    assert (params.temperature, params.max_tokens) == (0.5, 321)
    assert "seed" not in params.extra
    second, _ = backend.calls[1]
    assert [m.role for m in second] == ["user", "user", "assistant", "user"]
    assert second[2].content == "fly"  # the previous answer, as BALROG's agent returned it
    # the feedback is written into the observation, so it also stays in the history
    assert second[3].content.count("STANDIN: your answer was not an action; go forward") == 1
    assert strategy.protocol()["generation"] == {"temperature": 0.5, "max_tokens": 321}


async def test_explicit_spec_values_override_the_checkouts_config() -> None:
    backend = ScriptedBackend(["turn left"] * 3)
    ctx = _ctx({"type": "naive", "max_text_history": 1}, generate={"temperature": 0.0})
    strategy = BalrogProtocolStrategy(ctx, backend)
    for step in range(3):
        await strategy.act(_turn(step, f"view {step}"))
    messages, params = backend.calls[-1]
    assert params.temperature == 0.0 and params.max_tokens == 321
    texts = "\n".join(m.content for m in messages)
    assert "view 1" not in texts and "view 2" in texts  # one observation's text is kept
    assert strategy.protocol()["generation"]["temperature"] == 0.0


@pytest.mark.parametrize(("agent_type", "completion", "answer"), [
    ("cot", "thinking it over\nACTION: toggle", "toggle"),
    ("robust_naive", "<|ACTION|>drop<|END|>", "drop"),
    ("robust_cot", "no tags at all", "STANDIN no valid action found."),
])
async def test_every_balrog_strategy_plays_through_its_own_agent(agent_type: str, completion: str,
                                                                 answer: str) -> None:
    strategy = BalrogProtocolStrategy(_ctx({"type": agent_type}), ScriptedBackend([completion]))
    decision = await strategy.act(_turn(0, "a wall"))
    assert decision.action == answer


# -- protocol-check's comparison


def _body(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()


def test_requests_are_equal_only_as_the_same_bytes() -> None:
    parts = {"model": "m", "max_tokens": 9,
             "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
    as_string = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]}
    assert normalize_request(as_string) == normalize_request(parts)  # the same content
    same, form = EnvCheck("babyai", "goto"), EnvCheck("babyai", "goto")
    compare(same, "babyai naive episode 0",
            Captured([], [parts], ["x"], BABYAI, "go forward", raw_requests=[_body(parts)]),
            Replayed(requests=[parts], raw_requests=[_body(parts)]))
    assert (same.requests, same.requests_equal) == (1, 1) and same.passed
    # a string content where BALROG sends parts: the same content, not the same request
    compare(form, "babyai naive episode 0",
            Captured([], [as_string], ["x"], BABYAI, "go forward",
                     raw_requests=[_body(as_string)]),
            Replayed(requests=[parts], raw_requests=[_body(parts)]))
    assert (form.requests, form.requests_equal) == (1, 0) and not form.passed
    assert "the bodies differ in form only" in form.first_difference


def test_a_difference_is_counted_and_shown_as_a_diff() -> None:
    check = EnvCheck("babyai", "goto")
    ours = {"model": "m", "max_tokens": 9, "messages": [{"role": "system", "content": "rules"}]}
    theirs = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "rules"}]}
    compare(check, "babyai naive episode 0",
            Captured([], [ours], ["x"], BABYAI, "go forward", raw_requests=[_body(ours)]),
            Replayed(requests=[theirs], raw_requests=[_body(theirs)]))
    assert (check.requests, check.requests_equal) == (1, 0)
    assert not check.passed
    assert "the bodies differ in content" in check.first_difference
    assert '-   "role": "user"' in check.first_difference
    assert '+   "role": "system"' in check.first_difference


# -- env text from the checkout ---------------------------------------------------------------


def test_crafter_text_comes_from_the_checkouts_describe_frame() -> None:
    from env_server.families.crafter.family import CrafterFamily
    from env_server.game import GameOptionError, GameOptions

    family = CrafterFamily()
    game = family.open("default", GameOptions(seed=3, kwargs={"balrog_source": str(STANDIN)}))
    view = game.reset()["agent_0"]
    assert view.long_term_context.startswith("STANDIN crafter: awake, facing (0, 1)")
    assert "view (9, 9), unique=True" in view.long_term_context
    assert view.short_term_context == "STANDIN inventory: drink=9, energy=9, food=9, health=9"
    step = game.step({"agent_0": "Move West"}).transitions["agent_0"]
    assert step.valid and step.view.long_term_context.startswith("STANDIN crafter:")
    assert game.metrics()["text_format"] == "balrog"
    with pytest.raises(GameOptionError, match="text_format: not with balrog_source"):
        family.open("default", GameOptions(seed=3, kwargs={"balrog_source": str(STANDIN),
                                                          "text_format": "current"}))


async def test_few_shot_shows_the_episodes_demonstrations_through_balrogs_agent() -> None:
    from dataclasses import replace

    from agent_server.turn import DemoEpisode, DemoStep

    demo = DemoEpisode(task="BabyAI-MixedTrainLocal-v0/goto", seed=7, instruction="",
                       source="babyai-bot",
                       steps=(DemoStep("a key ahead", "go forward"),
                              DemoStep("the key", "pick up")))
    ctx = replace(_ctx({"type": "few_shot"}), demonstrations=(demo,))
    backend = ScriptedBackend(["toggle"])
    decision = await BalrogProtocolStrategy(ctx, backend).act(_turn(0, "a door ahead"))
    assert decision.action == "toggle"
    messages, _ = backend.calls[0]
    texts = [m.content for m in messages]
    assert texts[0].endswith("STANDIN-DEMOS-FOLLOW") and "go to the red ball" in texts[0]
    assert texts[1] == "STANDIN demo 1 start"
    assert texts[2:6] == ["STANDIN-DEMO-OBS:\na key ahead", "go forward",
                          "STANDIN-DEMO-OBS:\nthe key", "pick up"]
    assert texts[6:8] == ["STANDIN demo 1 end", "STANDIN your turn"]
    assert "a door ahead" in texts[-1]


def test_the_protocol_travels_as_a_typed_message_and_comes_back_equal() -> None:
    from moria.prompting import protocol_dict, protocol_message

    strategy = BalrogProtocolStrategy(_ctx({"type": "naive"}), ScriptedBackend([]))
    record = strategy.protocol()
    back = protocol_dict(protocol_message(record))
    assert back == record
    assert back["generation"] == {"temperature": 0.5, "max_tokens": 321}
    assert isinstance(back["generation"]["max_tokens"], int)
    moria = {"name": "moria", "instruction_sha256": "ab",
             "generation": {"temperature": None, "max_tokens": 9}}
    assert protocol_dict(protocol_message(moria)) == moria
