"""What a run will cost before it runs: model calls, prompt and completion tokens, wall time.

``moria plan`` (``orchestrator.apps.plan``) opens each planned task's first episode, has the
policy server build the first prompts of each seat (against a stand-in model endpoint, so no
provider is asked) and hands what it measured here as a :class:`TaskProbe` per task. This
module turns probes, and the usage recorded by earlier runs of the same setup
(:func:`recorded_usage`), into a :class:`PlanEstimate`. It does no I/O but reading earlier
result files, and prices nothing (the price table belongs to the report layer; the caller
prices :meth:`PlanEstimate.by_model`).

The model (docs/plan.md has the whole derivation and the documented error):

- **calls**: a seat that calls a model calls it ``calls_per_step`` times per env step (1 for
  every Moria strategy on a one-player game; measured by the probe). Upper bound: every
  episode runs to its step cap. Estimate: the mean steps per episode of earlier matching
  episodes when there are any, else the cap.
- **prompt tokens** of a seat's j-th call: ``P(j) = p0 + min(j, W) * g``, where ``p0`` is the
  real first prompt, ``W`` is ``agent.max_text_history`` and ``g`` what one remembered step
  adds (the first observation shown again as history and one answer, measured from the
  seat's first two prompts: :func:`step_tokens`), so every observation is taken to be the size
  of the first; plus, for the strategies whose answers carry reasoning back into the history,
  ``min(j, C) * R`` (``C`` = ``agent.max_cot_history`` with ``remember_cot``, ``R`` the
  assumed reasoning length) and a plan note for plan_action.
- **completion tokens**: per call the recorded mean, else the assumption of
  :data:`ANSWER_ASSUMPTIONS` for the strategy (a bare action for naive answers, reasoning plus
  the action for chain-of-thought styles), never above ``generate_kwargs.max_tokens``; the
  upper bound is ``max_tokens`` per call.
- **wall time**: ``calls * latency / concurrency``, but never less than the longest episode's
  own calls one after another; ``concurrency`` = ``eval.num_workers`` (capped by
  ``eval.max_concurrent_model_calls`` and the number of episodes).

Token counts: the provider's tokenizer when one is installed and usable offline (tiktoken's
encodings for OpenAI models, when already in its cache), else UTF-8 bytes / 4
(:func:`tokenizer_for`); each chat message adds :data:`MESSAGE_OVERHEAD_TOKENS`, each prompt
:data:`REPLY_PRIMING_TOKENS`, each image :data:`IMAGE_TOKENS`.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from moria.config import NON_MODEL_AGENT_TYPES
from moria.records import SCORED_END_REASONS
from moria.results import EPISODE_GLOB, read_episode
from moria.tokens import BYTES_PER_TOKEN, estimate_tokens
from orchestrator.plan.spec import RunSpec

#: Tokens each chat message adds around its text (role and separators; OpenAI counts 3).
MESSAGE_OVERHEAD_TOKENS: Final = 3
#: Tokens every prompt adds for the reply's start (OpenAI counts 3).
REPLY_PRIMING_TOKENS: Final = 3
#: Tokens assumed per attached image (OpenAI's price of one 512 px tile at high detail: 85 +
#: 170; providers bill images by size, so this is a rough figure).
IMAGE_TOKENS: Final = 255
#: Tokens of an answer in a free-text game (no action list to measure): a short command.
FREE_TEXT_ANSWER_TOKENS: Final = 6
#: Seconds per model call assumed when neither ``--latency`` nor earlier runs say.
DEFAULT_LATENCY_S: Final = 2.0
#: The documented error of the token estimate (docs/plan.md): with no earlier runs and episodes
#: that run to their step cap, the estimated prompt tokens are within this fraction of the
#: measured ones (the test checks it against a run).
DOCUMENTED_ERROR: Final = 0.35


@dataclass(frozen=True)
class AnswerAssumption:
    """What one strategy's answer is assumed to hold when no earlier run measured it.

    ``reasoning``: tokens of prose before the action (0 for bare answers); ``wrapper``: tokens
    around the action (tags, an ``ACTION:`` marker); ``kept``: whether the reasoning goes back
    into the history (the newest ``max_cot_history`` answers, with ``remember_cot``);
    ``note``: tokens added to every observation after the first (plan_action's plan);
    ``text``: the assumption in words, as printed."""

    reasoning: int
    wrapper: int
    kept: bool
    note: int
    text: str


#: Per ``agent.type`` (both protocols): the assumed answer. Players that call no model have
#: none.
ANSWER_ASSUMPTIONS: Final[Mapping[str, AnswerAssumption]] = {
    "naive": AnswerAssumption(0, 1, False, 0, "a bare action name"),
    "few_shot": AnswerAssumption(0, 1, False, 0, "a bare action name"),
    "robust_naive": AnswerAssumption(0, 8, False, 0, "an action name in <|ACTION|> tags"),
    "cot": AnswerAssumption(250, 4, True, 0,
                            "about 250 tokens of reasoning, then ACTION: <action>"),
    "robust_cot": AnswerAssumption(250, 8, True, 0,
                                   "about 250 tokens of reasoning, then the tagged action"),
    "plan_action": AnswerAssumption(80, 4, True, 80,
                                    "a plan of about 80 tokens, then ACTION: <action>"),
}
#: The assumption for a model-calling type missing above.
FALLBACK_ANSWER: Final = AnswerAssumption(100, 4, False, 0, "about 100 tokens (no assumption "
                                                            "for this strategy)")


# -- tokens --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Tokenizer:
    """A token counter: ``name`` says which (printed with the estimate) and ``exact`` whether it
    is the provider's own tokenizer; ``count(text)`` -> tokens (>= 0)."""

    name: str
    exact: bool
    counter: Callable[[str], int]

    def count(self, text: str) -> int:
        """Tokens of ``text``."""
        return self.counter(text) if text else 0


def byte_tokenizer() -> Tokenizer:
    """The fallback: UTF-8 bytes / ``BYTES_PER_TOKEN``, rounded up."""
    return Tokenizer(f"estimate: UTF-8 bytes / {BYTES_PER_TOKEN}", False,
                     lambda text: estimate_tokens(len(text.encode("utf-8"))))


#: Clients whose models use OpenAI's tokenizers (tiktoken knows them by model name).
_TIKTOKEN_CLIENTS: Final = frozenset({"openai", "openrouter"})


@functools.lru_cache(maxsize=32)
def tokenizer_for(client_name: str, model_id: str | None) -> Tokenizer:
    """The tokenizer of ``client_name``'s ``model_id`` when one is installed and usable without
    network access, else :func:`byte_tokenizer`.

    Only tiktoken (OpenAI models, also through OpenRouter as ``openai/<model>``) is tried, and
    only from its local cache: an encoding it would download is not fetched (``moria plan``
    sends nothing anywhere). Never raises."""
    if client_name in _TIKTOKEN_CLIENTS and model_id:
        found = _offline_tiktoken(model_id.rsplit("/", 1)[-1])
        if found is not None:
            return found
    return byte_tokenizer()


def _offline_tiktoken(model: str) -> Tokenizer | None:
    """tiktoken's encoding for ``model`` when tiktoken is installed, knows the model and has
    the encoding in its local cache; None otherwise (nothing is downloaded: tiktoken's file
    reader is swapped for one that refuses URLs while the encoding loads)."""
    try:
        import tiktoken
        import tiktoken.load as tiktoken_load
        import tiktoken.model as tiktoken_model
    except ImportError:
        return None
    try:
        name = tiktoken_model.encoding_name_for_model(model)
    except KeyError:
        return None
    reader = tiktoken_load.read_file

    def local_only(blobpath: str) -> bytes:
        if "://" in blobpath:
            raise OSError(f"not downloading {blobpath}")
        return reader(blobpath)

    tiktoken_load.read_file = local_only  # type: ignore[assignment]
    try:
        encoding = tiktoken.get_encoding(name)
    except Exception:  # noqa: BLE001 - any failure of an optional tokenizer means "use bytes/4"
        return None
    finally:
        tiktoken_load.read_file = reader  # type: ignore[assignment]
    return Tokenizer(f"tiktoken {name}", True,
                     lambda text: len(encoding.encode(text, disallowed_special=())))


def chat_tokens(messages: Sequence[Mapping[str, Any]], tokenizer: Tokenizer) -> tuple[int, int]:
    """``(tokens, images)`` of one chat as a policy server records it (``prompt_json``: a list
    of ``{"role", "content", "images"}``): every message's text plus
    ``MESSAGE_OVERHEAD_TOKENS``, plus ``REPLY_PRIMING_TOKENS``, plus ``IMAGE_TOKENS`` per
    image; ``images`` counts the images."""
    tokens = REPLY_PRIMING_TOKENS
    images = 0
    for message in messages:
        content = message.get("content")
        tokens += MESSAGE_OVERHEAD_TOKENS + tokenizer.count(content if isinstance(content, str)
                                                            else "")
        images += len(message.get("images") or ())
    return tokens + images * IMAGE_TOKENS, images


# -- probes --------------------------------------------------------------------------------------

def step_tokens(first: Sequence[Mapping[str, Any]], second: Sequence[Mapping[str, Any]] | None,
                tokenizer: Tokenizer, probe_answer: str, answer_tokens: float) -> float:
    """Prompt tokens one remembered step adds (``g``), from a seat's first two chats.

    The second chat holds what the first one did plus the first observation as a past step and
    the answer to it; its last message is the new current observation. So ``g`` = (second -
    first) - (second's last message - first's last message), with the stand-in's answer
    (``probe_answer``) swapped for a real one of ``answer_tokens``: the first observation,
    shown again as history, and one answer, whatever layout the strategy (or BALROG's prompt
    builder) gives them. Without a second chat (the episode ended at once): the first
    observation plus an answer and two messages' overhead. Never below ``answer_tokens``."""
    first_total, _ = chat_tokens(first, tokenizer)
    first_last, _ = chat_tokens(first[-1:], tokenizer)
    if not second:
        return first_last - REPLY_PRIMING_TOKENS + answer_tokens + MESSAGE_OVERHEAD_TOKENS
    second_total, _ = chat_tokens(second, tokenizer)
    second_last, _ = chat_tokens(second[-1:], tokenizer)
    grown = (second_total - first_total) - (second_last - first_last)
    return max(float(answer_tokens), grown - tokenizer.count(probe_answer) + answer_tokens)


@dataclass(frozen=True)
class SeatProbe:
    """One seat of a probed task, as the policy server prompted it.

    ``agent_id``; ``agent_type`` (``agent.type``); ``model``: ``"<client_name>/<model_id>"``
    of the seat's configured client (``model_id`` "" for the client's default); ``calls_model``
    (False also when the probe saw no prompt of it); ``first_prompt``: tokens of its real first
    prompt (images included, :func:`chat_tokens`); ``images``: images in it; ``step_tokens``:
    what one remembered step adds (:func:`step_tokens`); ``calls_per_step``: its model calls
    per env step; ``answer_tokens``: mean tokens of its action names
    (``FREE_TEXT_ANSWER_TOKENS`` without names); ``window`` (``max_text_history``),
    ``cot_window`` (``max_cot_history`` when ``remember_cot``, else 0) and ``max_tokens``
    (``generate_kwargs.max_tokens``)."""

    agent_id: str
    agent_type: str
    model: str
    calls_model: bool
    first_prompt: int
    images: int
    step_tokens: float
    calls_per_step: float
    answer_tokens: float
    window: int
    cot_window: int
    max_tokens: int

    @property
    def answer(self) -> AnswerAssumption:
        """The strategy's answer assumption."""
        return ANSWER_ASSUMPTIONS.get(self.agent_type, FALLBACK_ANSWER)

    @property
    def growth(self) -> float:
        """Prompt tokens one more remembered step adds inside the window (``g``; 0 when the
        window is 0)."""
        return self.step_tokens if self.window > 0 else 0.0

    def completion_tokens(self) -> float:
        """Completion tokens assumed per call: reasoning + wrapper + answer, at most
        ``max_tokens``."""
        answer = self.answer
        return float(min(self.max_tokens, answer.reasoning + answer.wrapper + self.answer_tokens))

    def prompt_at(self, call: int) -> float:
        """``P(j)``: prompt tokens of the seat's ``call``-th call (0 = the first) of an
        episode."""
        answer = self.answer
        kept = (min(call, self.cot_window) * min(answer.reasoning, self.max_tokens)
                if answer.kept else 0)
        return (self.first_prompt + min(call, self.window) * self.growth + kept
                + (answer.note if call > 0 else 0))

    def prompt_tokens(self, calls: int) -> float:
        """Prompt tokens of the seat's first ``calls`` calls of one episode, summed
        (``sum(prompt_at(j) for j in range(calls))`` in closed form). ``calls`` <= 0 gives 0."""
        if calls <= 0:
            return 0.0
        answer = self.answer
        total = calls * self.first_prompt + window_sum(calls, self.window) * self.growth
        if answer.kept:
            total += window_sum(calls, self.cot_window) * min(answer.reasoning, self.max_tokens)
        return float(total + (calls - 1) * answer.note)


def window_sum(n: int, window: int) -> int:
    """``sum(min(k, window) for k in range(n))`` in closed form (0 for ``n`` <= 0)."""
    if n <= 0 or window <= 0:
        return 0
    if n <= window + 1:
        return n * (n - 1) // 2
    return window * (window + 1) // 2 + (n - window - 1) * window


@dataclass(frozen=True)
class TaskProbe:
    """One planned (env, task): ``episodes`` planned, ``step_cap`` (the env's step limit of
    its first episode under the spec's ``eval.max_steps_per_episode``), ``seats`` (one
    :class:`SeatProbe` per agent) and ``probe_steps`` (env steps the probe played)."""

    env: str
    task: str
    episodes: int
    step_cap: int
    seats: tuple[SeatProbe, ...]
    probe_steps: int


# -- earlier runs -----------------------------------------------------------------------------

@dataclass
class Recorded:
    """Usage recorded by earlier scored episodes of one (env, task), or of one env:
    ``episodes``, ``steps`` (env steps, summed), ``by_model`` (``usage_by_model`` counters
    summed: calls, input/output/cached tokens, latency_s) and ``runs`` (their run
    directories)."""

    episodes: int = 0
    steps: int = 0
    by_model: dict[str, dict[str, float]] = field(default_factory=dict)
    runs: set[str] = field(default_factory=set)

    def add(self, steps: int, usage: Mapping[str, Mapping[str, float]], run: str) -> None:
        """Count one episode of ``steps`` env steps and its ``usage_by_model``."""
        self.episodes += 1
        self.steps += steps
        self.runs.add(run)
        for model, counters in usage.items():
            into = self.by_model.setdefault(model, {})
            for key, value in counters.items():
                into[key] = into.get(key, 0.0) + float(value)

    @property
    def calls(self) -> float:
        """Model calls recorded, all models."""
        return sum(c.get("calls", 0.0) for c in self.by_model.values())

    @property
    def latency_s(self) -> float:
        """Seconds of model calls recorded, all models."""
        return sum(c.get("latency_s", 0.0) for c in self.by_model.values())


#: The settings an earlier run must share with the plan for its usage to count (run.json's
#: spec, dotted): who plays, how prompts are built and how long episodes may last.
MATCHED_SETTINGS: Final[tuple[str, ...]] = (
    "agent.type", "agent.protocol", "agent.max_text_history", "agent.max_image_history",
    "client.client_name", "client.model_id", "eval.max_steps_per_episode", "players",
)


def _setting(data: Mapping[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def run_directories(roots: Iterable[str | Path]) -> list[Path]:
    """The run directories under ``roots``: each root that holds a ``run.json`` and each of its
    immediate subfolders that does, each once, in order. A root that does not exist gives
    none."""
    found: list[Path] = []
    seen: set[Path] = set()
    for root in roots:
        base = Path(root).expanduser()
        if not base.is_dir():
            continue
        try:
            children = sorted(p for p in base.iterdir() if p.is_dir())
        except OSError:
            children = []
        for candidate in (base, *children):
            resolved = candidate.resolve()
            if resolved not in seen and (candidate / "run.json").is_file():
                seen.add(resolved)
                found.append(candidate)
    return found


def recorded_usage(spec: RunSpec, roots: Iterable[str | Path],
                   ) -> tuple[dict[tuple[str, str], Recorded], dict[str, Recorded], list[str]]:
    """Usage of earlier scored episodes played with the plan's setup, from the run directories
    under ``roots`` (:func:`run_directories`): per (env, task), per env, and warnings (files
    that could not be read).

    A run counts when its ``run.json`` spec has the plan's ``MATCHED_SETTINGS``; of its
    episodes only those of the plan's envs that ended normally (terminated or truncated). Never
    raises for bad files."""
    mine = spec.model_dump(mode="json")
    envs = set(spec.envs.env_list)
    by_task: dict[tuple[str, str], Recorded] = {}
    by_env: dict[str, Recorded] = {}
    warnings: list[str] = []
    for run in run_directories(roots):
        try:
            meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            warnings.append(f"ignoring {run / 'run.json'}: {exc}")
            continue
        theirs = meta.get("spec") if isinstance(meta, dict) else None
        if not isinstance(theirs, dict) or any(
                _setting(theirs, key) != _setting(mine, key) for key in MATCHED_SETTINGS):
            continue
        for path in sorted(run.glob(EPISODE_GLOB)):
            if path.parts[-3] not in envs:
                continue
            try:
                episode = read_episode(path)
            except (OSError, ValueError) as exc:
                warnings.append(f"ignoring {path}: {str(exc).splitlines()[0] if str(exc) else exc}")
                continue
            if episode.env not in envs or episode.end_reason not in SCORED_END_REASONS:
                continue
            for into in (by_task.setdefault((episode.env, episode.task), Recorded()),
                         by_env.setdefault(episode.env, Recorded())):
                into.add(episode.num_steps, episode.usage_by_model, str(run))
    return by_task, by_env, warnings


# -- the estimate ----------------------------------------------------------------------------

@dataclass
class Usage:
    """Calls and tokens of a part of the plan (floats: estimates are means)."""

    calls: float = 0.0
    input_tokens: float = 0.0
    cached_input_tokens: float = 0.0
    output_tokens: float = 0.0

    def add(self, other: Usage) -> None:
        """Add ``other`` into this."""
        self.calls += other.calls
        self.input_tokens += other.input_tokens
        self.cached_input_tokens += other.cached_input_tokens
        self.output_tokens += other.output_tokens

    def as_dict(self) -> dict[str, float]:
        """The counters, as ``PriceTable.cost`` reads them."""
        return {"calls": self.calls, "input_tokens": self.input_tokens,
                "cached_input_tokens": self.cached_input_tokens,
                "output_tokens": self.output_tokens}


def _merge(into: dict[str, Usage], part: Mapping[str, Usage]) -> None:
    for model, usage in part.items():
        into.setdefault(model, Usage()).add(usage)


@dataclass
class TaskEstimate:
    """The estimate of one (env, task).

    ``basis``: where the estimate comes from: ``"first prompt"`` (the probe and the window
    model), ``"earlier runs of this task"`` or ``"earlier runs of this env"``;
    ``recorded_episodes`` how many earlier episodes it rests on. ``steps_per_episode``: the
    estimated mean. ``first_prompt_tokens`` and ``growth_per_step``: the first seat that calls
    a model (0 when none does). ``estimate`` and ``at_cap``: usage per model, the estimate and
    every episode run to its cap (``at_cap`` output tokens are ``max_tokens`` per call: an
    upper bound; its prompt tokens follow the window model). ``longest_episode_calls``: model
    calls of one episode, estimated (for the wall-time floor)."""

    env: str
    task: str
    episodes: int
    step_cap: int
    steps_per_episode: float
    basis: str
    recorded_episodes: int
    first_prompt_tokens: int
    growth_per_step: float
    estimate: dict[str, Usage]
    at_cap: dict[str, Usage]
    episode_calls: float

    def total(self, which: str) -> Usage:
        """``estimate`` or ``at_cap`` summed over models."""
        out = Usage()
        for usage in getattr(self, which).values():
            out.add(usage)
        return out


def _probe_usage(probe: TaskProbe, steps: int) -> dict[str, Usage]:
    """Per model, one episode of ``steps`` env steps under the probe's model (completion:
    the assumption)."""
    out: dict[str, Usage] = {}
    for seat in probe.seats:
        if not seat.calls_model:
            continue
        calls = ceil_int(steps * seat.calls_per_step)
        part = Usage(calls=calls, input_tokens=seat.prompt_tokens(calls),
                     output_tokens=calls * seat.completion_tokens())
        _merge(out, {seat.model: part})
    return out


def _cap_usage(probe: TaskProbe) -> dict[str, Usage]:
    """Per model, one episode run to its cap; output at ``max_tokens`` per call."""
    out: dict[str, Usage] = {}
    for seat in probe.seats:
        if not seat.calls_model:
            continue
        calls = ceil_int(probe.step_cap * seat.calls_per_step)
        part = Usage(calls=calls, input_tokens=seat.prompt_tokens(calls),
                     output_tokens=float(calls * seat.max_tokens))
        _merge(out, {seat.model: part})
    return out


def _scaled(usage: Mapping[str, Usage], factor: float) -> dict[str, Usage]:
    return {model: Usage(u.calls * factor, u.input_tokens * factor,
                         u.cached_input_tokens * factor, u.output_tokens * factor)
            for model, u in usage.items()}


def estimate_task(probe: TaskProbe, recorded: Recorded | None, basis: str = "") -> TaskEstimate:
    """The estimate of one task from its probe and, when given (``episodes`` > 0), the usage
    recorded by earlier episodes (``basis`` names them, e.g. "earlier runs of this task").

    With records, the estimate is their mean usage per episode times the planned episodes
    (their mean steps, capped at ``step_cap``, is the steps estimate); without, every episode
    runs to its cap under the window model. ``at_cap`` is always the window model at the cap,
    raised to the estimate's tokens where earlier runs measured more."""
    models_seats = [s for s in probe.seats if s.calls_model]
    first = models_seats[0] if models_seats else None
    cap_one = _cap_usage(probe)
    at_cap = _scaled(cap_one, probe.episodes)
    if recorded is not None and recorded.episodes > 0:
        steps = min(float(probe.step_cap), recorded.steps / recorded.episodes)
        per_episode = {
            model: Usage(c.get("calls", 0.0), c.get("input_tokens", 0.0),
                         c.get("cached_input_tokens", 0.0), c.get("output_tokens", 0.0))
            for model, c in recorded.by_model.items()}
        estimate = _scaled(per_episode, probe.episodes / recorded.episodes)
        episode_calls = recorded.calls / recorded.episodes
        for model, usage in estimate.items():  # the cap never below what was measured
            cap = at_cap.setdefault(model, Usage())
            cap.calls = max(cap.calls, usage.calls)
            cap.input_tokens = max(cap.input_tokens, usage.input_tokens)
            cap.output_tokens = max(cap.output_tokens, usage.output_tokens)
        used_basis, count = basis or "earlier runs", recorded.episodes
    else:
        steps = float(probe.step_cap)
        estimate = _scaled(_probe_usage(probe, probe.step_cap), probe.episodes)
        episode_calls = sum(u.calls for u in _probe_usage(probe, probe.step_cap).values())
        used_basis, count = "first prompt", 0
    return TaskEstimate(
        env=probe.env, task=probe.task, episodes=probe.episodes, step_cap=probe.step_cap,
        steps_per_episode=steps, basis=used_basis, recorded_episodes=count,
        first_prompt_tokens=first.first_prompt if first else 0,
        growth_per_step=first.growth if first else 0.0,
        estimate=estimate, at_cap=at_cap, episode_calls=episode_calls)


@dataclass
class PlanEstimate:
    """The whole plan's estimate: ``tasks`` (one :class:`TaskEstimate` each, in plan order),
    ``concurrency`` (model calls in flight), ``latency_s`` per call and ``latency_basis``
    (``"given"``, ``"earlier runs"`` or ``"assumed"``), ``tokenizer`` (its name) and
    ``assumptions`` (sentences, printed with the estimate)."""

    tasks: list[TaskEstimate]
    concurrency: int
    latency_s: float
    latency_basis: str
    tokenizer: str
    assumptions: list[str]

    def by_model(self, which: str = "estimate") -> dict[str, Usage]:
        """``estimate`` or ``at_cap`` usage per model over the whole plan."""
        out: dict[str, Usage] = {}
        for task in self.tasks:
            _merge(out, getattr(task, which))
        return out

    def total(self, which: str = "estimate") -> Usage:
        """``estimate`` or ``at_cap`` usage of the whole plan."""
        out = Usage()
        for usage in self.by_model(which).values():
            out.add(usage)
        return out

    def wall_time_s(self, which: str = "estimate") -> float:
        """Seconds the run takes at ``concurrency`` calls in flight and ``latency_s`` per call:
        ``calls * latency / concurrency``, at least the longest episode's own calls in a row
        (env steps and server start are not counted)."""
        calls = self.total(which).calls
        if which == "estimate":
            longest = max((t.episode_calls for t in self.tasks), default=0.0)
        else:
            longest = max((t.total("at_cap").calls / max(1, t.episodes) for t in self.tasks),
                          default=0.0)
        return max(calls / max(1, self.concurrency), longest) * self.latency_s


def concurrency_of(spec: RunSpec) -> int:
    """Model calls in flight: ``eval.num_workers`` episodes, capped by
    ``eval.max_concurrent_model_calls`` and by the number of planned episodes (>= 1)."""
    limits = [spec.eval.num_workers, spec.episode_count()]
    if spec.eval.max_concurrent_model_calls is not None:
        limits.append(spec.eval.max_concurrent_model_calls)
    return max(1, min(limits))


def latency_for(given: float | None, recorded: Iterable[Recorded]) -> tuple[float, str]:
    """``(seconds per call, basis)``: ``given`` when not None (``"given"``), else the recorded
    mean over every recorded call (``"earlier runs"``), else ``DEFAULT_LATENCY_S``
    (``"assumed"``)."""
    if given is not None:
        return given, "given"
    calls = latency = 0.0
    for part in recorded:
        calls += part.calls
        latency += part.latency_s
    if calls > 0 and latency > 0:
        return latency / calls, "earlier runs"
    return DEFAULT_LATENCY_S, "assumed"


def assumptions_for(spec: RunSpec, tokenizer: Tokenizer, tasks: Sequence[TaskEstimate],
                    latency_basis: str, latency_s: float) -> list[str]:
    """The sentences printed under the estimate: how tokens were counted, how prompts grow,
    what a completion is assumed to hold, where steps and latency come from, what is not
    counted."""
    agent = spec.agent
    answer = ANSWER_ASSUMPTIONS.get(agent.type, FALLBACK_ANSWER)
    out = [
        "first prompts: built by a local policy server from each task's first episode "
        "(its first seed), answered by a stand-in endpoint; nothing is sent to a provider",
        f"tokens counted with {tokenizer.name}, plus {MESSAGE_OVERHEAD_TOKENS} per message, "
        f"{REPLY_PRIMING_TOKENS} per prompt and {IMAGE_TOKENS} per image",
        f"prompt at step k = the first prompt + min(k, {agent.max_text_history}) x one "
        "remembered step (the first observation shown again plus an answer; the window is "
        "agent.max_text_history): every observation is taken to be the size of the first",
    ]
    if agent.type not in NON_MODEL_AGENT_TYPES:
        out.append(f"completion per call without earlier runs: {answer.text} (at most "
                   f"max_tokens={spec.client.generate_kwargs.max_tokens}; the bound uses "
                   "max_tokens per call)")
        if answer.kept and agent.remember_cot and agent.max_cot_history > 0:
            out.append(f"the newest {agent.max_cot_history} answer(s) keep their reasoning in "
                       "the prompt (remember_cot)")
    recorded = [t for t in tasks if t.recorded_episodes]
    if recorded:
        runs = sum(t.recorded_episodes for t in recorded)
        out.append(f"{len(recorded)} of {len(tasks)} task(s) estimated from {runs} earlier "
                   "episode(s) with the same " + ", ".join(MATCHED_SETTINGS)
                   + " (their mean usage per episode)")
    if len(recorded) < len(tasks):
        out.append("no earlier runs" + (" for the other tasks" if recorded else "")
                   + ": assuming every episode runs to its step cap")
    out.append(f"latency {latency_s:g} s per call ({latency_basis}); wall time = calls x "
               "latency / concurrency, at least the longest episode; env steps and server "
               "start not counted")
    out.append("no prompt-cache discount assumed unless earlier runs recorded cached tokens; "
               "retries after provider errors are not counted")
    if spec.client.reasoning_effort or spec.client.thinking_budget:
        out.append("reasoning (thinking) tokens are not estimated; the bound's max_tokens "
                   "per call covers them only where the provider counts them in it")
    return out


def ceil_int(value: float) -> int:
    """``value`` rounded up to an int (estimates are printed as whole tokens and calls)."""
    return math.ceil(value - 1e-9)
