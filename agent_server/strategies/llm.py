"""Shared machinery of the LLM strategies: history, generation parameters, extraction.

A concrete LLM strategy only declares its format instruction, its extraction mode, how its answer
is written back into the history and whether its output may be grammar-constrained.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any, ClassVar

from agent_server.backends import image_input_problem
from agent_server.backends.base import Backend, ChatMessage, Completion, GenerateParams
from agent_server.extract import ExtractMode, extract_action, split_answer
from agent_server.history import HistoryBuilder
from agent_server.strategies.base import Strategy
from agent_server.turn import Decision, EpisodeContext, TurnInput
from moria.balrog_source import text_sha256

#: Per-call provider seeds are drawn below this bound (fits every provider's seed field).
SEED_BOUND_BITS = 31


def system_prompt(instruction: str, format_instruction: str) -> str:
    """The env instruction followed by the strategy's answer-format rules."""
    return f"{instruction.rstrip()}\n\n{format_instruction}" if instruction else format_instruction


def prompt_json(messages: list[ChatMessage]) -> str:
    """The chat as audit JSON: ``[{"role", "content", "images": [sha256 hex of each PNG]}]``
    (images by digest so saved prompts stay small; the frames themselves are in the env's
    record when ``eval.save_images`` is on)."""
    return json.dumps(
        [
            {
                "role": m.role,
                "content": m.content,
                "images": [hashlib.sha256(png).hexdigest() for png in m.images],
            }
            for m in messages
        ],
        ensure_ascii=False,
    )


class LLMStrategy(Strategy):
    """Base of the strategies that ask a model (naive, cot, robust_naive, robust_cot).

    Each turn: build the chat with the episode's ``HistoryBuilder``, call ``backend.complete``
    with ``GenerateParams`` from ``ctx.client.generate_kwargs``, extract the action (matched
    against ``turn.legal_actions`` when given, else ``ctx.action_names``), then record the step
    in the history (the reply verbatim when it held no marker/tags and matched nothing).

    The provider ``seed`` in ``params.extra`` is drawn per call from ``random.Random(ctx.seed)``
    (deterministic per episode, different on every call) unless ``generate_kwargs`` sets
    ``seed`` explicitly.

    Raises:
        ValueError: at construction when ``backend`` is None, or when
            ``agent.max_image_history`` > 0 would send frames to a client that takes no images
            (``agent_server.backends.image_input_problem``): the Begin is refused, so a run's
            preflight stops instead of every episode failing at its first turn.
        BackendError: from ``act`` when the model call failed for good.
    """

    calls_model = True
    reads_tensors = False
    keeps_images = True  # frames stay in the history when agent.max_image_history > 0

    #: Answer-format rules appended to the system prompt.
    format_instruction: ClassVar[str] = ""
    #: ``extract_action`` mode.
    extract_mode: ClassVar[ExtractMode] = "plain"
    #: How a past action is written back as the assistant's answer.
    answer_template: ClassVar[str] = "{action}"
    #: Whether the output may be constrained to the bare action names (``constrain_actions``).
    constrainable: ClassVar[bool] = False
    #: Whether the completion text itself is the reasoning to record (chain-of-thought styles).
    text_is_reasoning: ClassVar[bool] = False

    def __init__(self, ctx: EpisodeContext, backend: Backend | None) -> None:
        if backend is None:
            raise ValueError(f"strategy {self.name!r} needs a model backend")
        problem = image_input_problem(ctx.client, ctx.agent.max_image_history)
        if problem:
            raise ValueError(problem)
        super().__init__(ctx, backend)
        self._backend: Backend = backend
        self._seeds = random.Random(ctx.seed)
        self.history = HistoryBuilder(
            system_prompt(ctx.instruction, self.format_instruction),
            ctx.agent,
            alternate_roles=ctx.client.alternate_roles,
            answer_template=self.answer_template,
        )

    def protocol(self) -> dict[str, Any]:
        """Moria's protocol: the SHA-256 of the system prompt (instruction + answer rules) and
        the generation settings sent."""
        kwargs = self.ctx.client.generate_kwargs
        return {"name": "moria", "instruction_sha256": text_sha256(self.history.instruction),
                "generation": {"temperature": kwargs.temperature, "max_tokens": kwargs.max_tokens}}

    async def act(self, turn: TurnInput) -> Decision:
        """Ask the model for ``turn``'s action (see the class docstring)."""
        names = list(turn.legal_actions or self.ctx.action_names)
        messages = self.messages(turn)
        completion = await self._backend.complete(messages, self.params(names))
        action, matched = extract_action(completion.text, names, self.extract_mode)
        reasoning, answer = split_answer(completion.text, self.extract_mode)
        if answer is None and not matched:
            # No answer in the reply: show the model what it actually wrote.
            self.history.record(turn, completion.text, verbatim=True)
        else:
            self.history.record(turn, action, reasoning)
        return Decision(
            action=action,
            raw_completion=completion.text,
            reasoning=self._reasoning(completion),
            usage=completion.usage,
            latency_s=completion.latency_s,
            stop_reason=completion.stop_reason,
            attempts=completion.attempts,
            prompt_json=prompt_json(messages) if self.ctx.record_prompts else "",
        )

    def messages(self, turn: TurnInput) -> list[ChatMessage]:
        """The chat sent for ``turn`` (strategies add to it by overriding this)."""
        return self.history.build(turn)

    def params(self, names: list[str]) -> GenerateParams:
        """Generation settings for one call; ``names`` are this turn's valid action names."""
        kwargs = self.ctx.client.generate_kwargs
        extra = dict(kwargs.model_extra or {})
        seed = self._seeds.getrandbits(SEED_BOUND_BITS)
        extra.setdefault("seed", seed)
        constrain = self.constrainable and self.ctx.client.constrain_actions and bool(names)
        return GenerateParams(
            temperature=kwargs.temperature,
            max_tokens=kwargs.max_tokens,
            choices=names if constrain else None,
            extra=extra,
        )

    def _reasoning(self, completion: Completion) -> str:
        parts = [completion.reasoning.strip()]
        if self.text_is_reasoning:
            parts.append(completion.text.strip())
        return "\n\n".join(p for p in parts if p)
