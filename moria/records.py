"""Typed records of what one episode produced, as the orchestrator hands them to results/telemetry.

``StepRecord`` is one agent turn; ``EpisodeRecord`` is one finished (or failed) episode with its
whole trajectory. Both are plain pydantic models: ``orchestrator.store.episodes`` turns them into
BALROG-compatible files and ``orchestrator.store.telemetry`` into JSON lines.

End reasons (``EpisodeRecord.end_reason``):

- ``terminated`` / ``truncated``: the game ended normally (goal/death, or the step limit). Only
  these are *scored*: they enter progression averages and count as completed on resume.
- ``agent_error`` / ``env_error`` / ``cancelled``: an infrastructure fault, a policy that could
  not answer, or a cancelled run. They are reported separately, never averaged, and re-run on
  resume.
- ``budget_exhausted``: the run's cost cap (``eval.max_cost_usd``) refused the episode's next
  model call. Like the failures: not scored, re-run on resume (with a higher cap).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: All values ``EpisodeRecord.end_reason`` may take.
EndReason = Literal["terminated", "truncated", "agent_error", "env_error", "cancelled",
                    "budget_exhausted"]

END_REASONS: Final[tuple[str, ...]] = (
    "terminated",
    "truncated",
    "agent_error",
    "env_error",
    "cancelled",
    "budget_exhausted",
)
#: End reasons whose episodes are scored (progression averages) and count as completed on resume.
SCORED_END_REASONS: Final[frozenset[str]] = frozenset({"terminated", "truncated"})
#: End reasons whose episodes are re-run on resume and excluded from progression averages.
RERUN_END_REASONS: Final[frozenset[str]] = frozenset({"agent_error", "env_error", "cancelled",
                                                     "budget_exhausted"})
#: The failed end reasons in the order reports list them.
FAILED_END_REASONS: Final[tuple[str, ...]] = tuple(
    r for r in END_REASONS if r in RERUN_END_REASONS)

#: The protocol of an episode whose ``protocol`` names none (every result older than the field).
DEFAULT_PROTOCOL: Final[str] = "moria"

_MAX_SEED: Final[int] = 2**64 - 1


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


#: How many characters of a step's model- or env-written text (``observation``,
#: ``raw_completion``, ``reasoning``) a record keeps; the rest is cut with a line counting it
#: (``moria.quoting.cut``). Far above what a model writes within ``max_tokens`` (about 4
#: characters a token) or a game shows; it keeps a server that ignores ``max_tokens`` or answers
#: megabytes from filling the disk, and an episode file within what ``moria.results`` reads.
MAX_RECORDED_TEXT_CHARS: Final[int] = 256 * 1024


class StepRecord(_Record):
    """One agent turn: what the agent saw, what it answered and what the env applied.

    ``observation`` is the long-term text the agent saw before acting, followed by the short-term
    context if any. ``raw_completion`` is the model's full output; these two and ``reasoning``
    are kept to ``MAX_RECORDED_TEXT_CHARS`` characters each. ``action`` the action the env
    actually applied (the env's default action when the output held no valid one, in which case
    ``valid`` is False). ``feedback`` is the env's word on the action as the player is shown it
    at its next turn (why an answer was invalid; "" when there is none, or when
    ``eval.feedback_on_invalid_action`` is off). ``reward``/``done`` are the env's answer to
    this step. ``progression`` is the env's progression once the step was applied (in [0, 1];
    None in files written before the field). Token counts are
    this turn's usage; ``latency_s`` is the policy's answer time in seconds. ``model`` is the
    player that answered (``"<client_name>/<model_id>"``, or the strategy name for non-LLM
    players); ``stop_reason`` the normalised stop reason of its model call (``stop``,
    ``length``, ``blocked:<detail>``, ``empty``, ``other:<detail>``; empty for non-LLM players)
    and ``attempts`` how many tries that call took.
    """

    step: int = Field(ge=0, description="0-based step index within the episode")
    agent_id: str = ""
    observation: str = ""
    raw_completion: str = ""
    action: str = ""
    valid: bool = True
    feedback: str = ""
    reasoning: str = ""
    reward: float = 0.0
    done: bool = False
    progression: float | None = Field(default=None, ge=0.0, le=1.0)
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cached_input_tokens: int = Field(default=0, ge=0)
    reasoning_tokens: int = Field(default=0, ge=0)
    latency_s: float = Field(default=0.0, ge=0.0)
    model: str = ""
    stop_reason: str = ""
    attempts: int = Field(default=0, ge=0)
    rate_limit_wait_s: float = Field(
        default=0.0, ge=0.0,
        description="seconds the turn's model calls waited on the client's rate limits")


class EpisodeRecord(_Record):
    """One episode of one task, with its outcome, usage totals, configs and trajectory.

    ``task`` is the original task name (it may hold "/", e.g. ``BabyAI-MixedTrainLocal-v0/goto``);
    ``seed`` is the 64-bit seed derived from the run seed. ``progression`` is the env's metric
    in [0, 1] (also found in ``stats["progression"]`` once written). ``failed_candidates`` are
    the answers that held no valid action: the raw outputs, or under ``agent.protocol=balrog``
    the answers the checkout's agent extracted from them (as BALROG's evaluator keeps them);
    ``action_frequency`` counts the *applied* actions.
    ``started_at``/``ended_at`` are ISO-8601 timestamps, ``wall_time_s`` seconds.
    ``episode_return`` sums the rewards of every seat (for one agent, BALROG's return; per-seat
    returns of multi-agent games are in ``stats["returns"]``). ``players``: for multi-agent
    games, every seat's run-spec ``players`` entry (agent, client, role, coordination level,
    observation mode; when given) plus ``player``, who played it (strategy and model, as the
    policy named them at Begin); single-agent episodes keep only the spec's entries.
    ``attempts``: sessions this episode took (1 = first try; more when an env or policy server
    failed under it and it was re-queued with the same seed); ``retry_errors``: why each
    earlier attempt failed.
    ``usage_by_model``: per model (``"<client_name>/<model_id>"``) the counters of
    ``orchestrator.report.accounting.USAGE_KEYS`` (calls, four token counts, latency_s).
    ``frames``: the folder of the episode's frames, relative to its JSON (``eval.save_images``
    or ``moria replay --frames``; "" when none, layout in ``orchestrator.store.frames``), and
    ``frame_count`` how many it holds. ``prompts``: the
    exact prompts sent, one dict per model call (``eval.save_prompts``); written to a separate
    file, never into the episode JSON.
    ``protocol``: the prompting protocol the episode was played under, as the player reported
    it. All keys are optional: ``name`` (``"moria"`` or ``"balrog"``; ``"mixed"`` when the seats
    of a multi-agent game differ), ``balrog_commit`` and ``balrog_source`` (the BALROG checkout
    whose prompts were used; balrog only), ``instruction_sha256`` (SHA-256 hex of the
    instruction text the model got), ``generation`` (``{"temperature", "max_tokens"}``) and
    ``protocol_check`` (the ``moria protocol-check`` result for that commit; {} when none). An
    empty dict, or one without ``name``, means Moria's own protocol, as in every result written
    before this field existed (see ``protocol_name``).

    Raises ``pydantic.ValidationError`` on unknown fields, an unknown ``end_reason``, a seed out of
    [0, 2**64), a progression out of [0, 1] or an unparsable timestamp.
    """

    run_id: str
    env: str = Field(min_length=1)
    task: str = Field(min_length=1)
    episode_index: int = Field(ge=0)
    seed: int = Field(ge=0, le=_MAX_SEED)
    end_reason: EndReason = "terminated"
    error: str = ""
    done: bool = False
    episode_return: float = 0.0
    num_steps: int = Field(default=0, ge=0)
    progression: float = Field(default=0.0, ge=0.0, le=1.0)
    stats: dict[str, Any] = Field(default_factory=dict)
    failed_candidates: list[str] = Field(default_factory=list)
    action_frequency: dict[str, int] = Field(default_factory=dict)
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cached_input_tokens: int = Field(default=0, ge=0)
    reasoning_tokens: int = Field(default=0, ge=0)
    usage_by_model: dict[str, dict[str, float]] = Field(default_factory=dict)
    agent_config: dict[str, Any] = Field(default_factory=dict)
    client_config: dict[str, Any] = Field(default_factory=dict)
    players: dict[str, dict[str, Any]] = Field(default_factory=dict)
    versions: dict[str, str] = Field(default_factory=dict)
    started_at: str = ""
    ended_at: str = ""
    wall_time_s: float = Field(default=0.0, ge=0.0)
    attempts: int = Field(default=1, ge=1)
    retry_errors: list[str] = Field(default_factory=list)
    protocol: dict[str, Any] = Field(default_factory=dict)
    steps: list[StepRecord] = Field(default_factory=list)
    frames: str = ""
    frame_count: int = Field(default=0, ge=0)
    prompts: list[dict[str, Any]] = Field(default_factory=list, exclude=True)

    @field_validator("started_at", "ended_at")
    @classmethod
    def _iso_timestamp(cls, value: str) -> str:
        if value:
            datetime.fromisoformat(value)  # raises ValueError -> ValidationError
        return value

    @property
    def key(self) -> tuple[str, str, int]:
        """``(env, task, episode_index)``: the identity used for resume."""
        return (self.env, self.task, self.episode_index)

    @property
    def scored(self) -> bool:
        """True when the episode ended normally and enters progression averages."""
        return self.end_reason in SCORED_END_REASONS

    @property
    def protocol_name(self) -> str:
        """The protocol's ``name`` (``"moria"``, ``"balrog"`` or ``"mixed"``); ``"moria"`` when
        ``protocol`` is empty or names none."""
        return str(self.protocol.get("name") or DEFAULT_PROTOCOL)

    def summary_fields(self) -> dict[str, Any]:
        """All fields except the step trajectory, as a JSON-ready dict (for telemetry)."""
        return self.model_dump(mode="json", exclude={"steps"})
