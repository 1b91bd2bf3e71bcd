"""Provider-neutral input and output of one policy turn, and the per-episode context.

The Play stream handler converts wire messages into these dataclasses, hands a ``TurnInput`` to a
strategy and sends the returned ``Decision`` back. Nothing here depends on gRPC or on a provider.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from agent_server.backends.base import TokenUsage
from moria.config import AgentConfig, ClientConfig


@dataclass
class TurnInput:
    """What the agent sees on one turn.

    ``step``: index of the env step this observation belongs to (as sent by the orchestrator).
    ``long_term_context``: the per-step view kept in history (the env's long-term text).
    ``short_term_context``: the env's text shown only for the current step (inventory, status;
    never the invalid-action feedback, which comes only as ``last_feedback``).
    ``image_png``: PNG bytes of the rendered frame, or None in text-only mode.
    ``legal_actions``: the legal moves this turn (may be empty: then the episode's action names
    apply). ``info``: free-form env extras (for example ``expert_action`` for the oracle).
    ``tensors``: the env's named arrays (only when the session was opened with tensors, for
    players that read them: scripted, rl). ``action_mask``: legality per action name, in
    ``EpisodeContext.action_names`` order (empty when the game has no mask).
    ``last_valid`` / ``last_applied_action`` / ``last_feedback``: the env's verdict on the
    previous action (valid or not, what it actually applied, and its feedback sentence; the
    orchestrator sends the sentence only with ``eval.feedback_on_invalid_action``, and prompt
    builders show it in front of the short-term text, ``history.short_term_text``).
    """

    step: int
    long_term_context: str
    short_term_context: str
    image_png: bytes | None
    legal_actions: list[str]
    info: dict[str, Any]
    last_valid: bool = True
    last_applied_action: str = ""
    last_feedback: str = ""
    tensors: dict[str, np.ndarray] = field(default_factory=dict)
    action_mask: list[bool] = field(default_factory=list)


@dataclass
class Decision:
    """What the agent answers on one turn.

    ``action``: the extracted action text to submit to the env (the env judges its validity).
    ``raw_completion``: the model's full output text (empty for non-LLM strategies that have
    none). ``reasoning``: the reasoning to record (provider reasoning and/or the chain of
    thought). ``usage``: token counts of this turn's model calls. ``latency_s``: wall-clock
    seconds of the model call(s), retries included. ``stop_reason``: the normalised stop reason
    (``backends.base.STOP_*``; empty for non-LLM strategies). ``attempts``: tries the model call
    took (0 for non-LLM strategies). ``prompt_json``: the exact chat handed to the backend, as
    JSON (only with ``EpisodeContext.record_prompts``; images appear as sha256 hex digests),
    before the backend's own request building (role merging among it).
    """

    action: str
    raw_completion: str
    reasoning: str
    usage: TokenUsage
    latency_s: float
    stop_reason: str
    attempts: int = 0
    prompt_json: str = ""


@dataclass(frozen=True)
class DemoStep:
    """One step of a demonstration: the observation text shown, then the action taken."""

    observation: str
    action: str
    reward: float = 0.0


@dataclass(frozen=True)
class DemoEpisode:
    """One recorded demonstration episode (few_shot), as sent in ``Begin.demonstrations``.

    ``source`` names the player that produced it (``babyai-bot``, ``walkthrough``, ...);
    ``seed`` is the recorded episode's seed (disjoint from evaluation seeds).
    """

    task: str
    seed: int
    instruction: str
    source: str
    steps: tuple[DemoStep, ...]


@dataclass
class EpisodeContext:
    """Everything a strategy needs to know about its episode, fixed at ``Begin``.

    ``instruction``: the env's instruction text (rules, actions, goal). ``action_names``: the
    natural-language action names (empty for free-text games such as TextWorld).
    ``default_action``: what the env applies when an answer is invalid. ``agent`` / ``client``:
    the BALROG-style configuration sections. ``seed``: the episode's 64-bit seed; every random
    choice of the strategy derives from it. ``env_name`` / ``task`` / ``agent_id``: identify the
    episode and the player. ``demonstrations``: few_shot examples of the same env (empty for
    other strategies). ``record_prompts``: keep the exact prompt of each call for auditing.
    ``human_console``: where a ``human`` player's moves come from (the policy server's console;
    None when the server has none). ``first_info``: the ``info`` of the episode's first
    observation (``Begin.observation``; BabyAI's ``mission`` for BALROG's instruction).
    """

    instruction: str
    action_names: list[str]
    default_action: str
    agent: AgentConfig
    client: ClientConfig
    seed: int
    env_name: str
    task: str
    agent_id: str
    demonstrations: tuple[DemoEpisode, ...] = ()
    record_prompts: bool = False
    human_console: HumanConsole | None = None
    first_info: dict[str, Any] = field(default_factory=dict)


class HumanConsole(Protocol):
    """The channel a ``human`` player's moves are typed into (the interactive JSON-lines
    protocol or a terminal). One console serves every human seat of a policy server."""

    async def ask(self, ctx: EpisodeContext, turn: TurnInput) -> str:
        """Show ``turn`` to the human playing ``ctx.agent_id`` and return the move typed, as
        text (the env judges it like any other answer).

        Raises:
            ConnectionError: the human's channel closed before a move came.
        """
        ...
