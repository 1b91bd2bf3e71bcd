"""The small interface every game family implements (pure Python, no gRPC).

The session layer (``env_server.service``) turns these objects into ``moria.env.v1`` messages.
A *family* lists its tasks and opens games; a *game* is one environment instance holding all the
state of one episode. Nothing here is shared across games.

Shapes and units:
- images are ``numpy.ndarray`` of shape (H, W, 3), dtype uint8, RGB;
- tensors are any ``numpy.ndarray``; they travel as raw little-endian bytes plus dtype and shape;
- rewards are floats in the game's own units; ``metrics`` values are JSON-able scalars/lists,
  and ``metrics["progression"]`` is a float in [0, 1] (BALROG's per-episode progression).
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from moria.family_options import MAX_OPTION_KEYS, OptionError, OptionSpec, check_options
from moria.quoting import quote

if TYPE_CHECKING:
    from moria.families import FamilyManifest


class TaskNotFoundError(KeyError):
    """Raised by ``Family.open`` for an unknown task; ``valid`` lists the accepted task names."""

    def __init__(self, task: str, valid: list[str]):
        super().__init__(task)
        self.task = task
        self.valid = valid

    def __str__(self) -> str:
        shown = ", ".join(self.valid[:40]) + (" ..." if len(self.valid) > 40 else "")
        return f"unknown task {quote(self.task, 128)}; valid tasks: {shown}"


class GameOptionError(OptionError):
    """Raised for a bad open option (the message names the option and what is allowed)."""


class TaskUnavailableError(ValueError):
    """Raised by ``Family.open`` for a task the family lists with ``TaskInfo.unavailable`` set:
    the task exists, but this server cannot open it (the env server answers
    FAILED_PRECONDITION, not NOT_FOUND). ``reason`` says what is missing and how to provide
    it (the ``TaskInfo.unavailable`` sentence, or a narrower one that the open options
    leave)."""

    def __init__(self, task: str, reason: str):
        super().__init__(task, reason)
        self.task = task
        self.reason = reason

    def __str__(self) -> str:
        return f"task {quote(self.task, 128)} is unavailable on this server: {self.reason}"


@dataclass(frozen=True)
class ActionInfo:
    """One natural-language action: its exact name and a one-line description."""

    name: str
    description: str


@dataclass(frozen=True)
class PlayerSpec:
    """One seat at the game: ``agent_id`` as the game names it, an optional role and options."""

    agent_id: str
    role: str = ""
    options: Mapping[str, Any] = field(default_factory=dict)


def check_player_ids(players: Iterable[PlayerSpec], ids: Sequence[str]) -> None:
    """Raise GameOptionError for the first ``PlayerSpec`` whose ``agent_id`` is not one of the
    game's ``ids`` (the message lists them) or that names an agent a second time."""
    seen: set[str] = set()
    for player in players:
        if player.agent_id not in ids:
            raise GameOptionError(f"players: unknown agent id {player.agent_id!r}; this game "
                                  f"has {', '.join(ids)}")
        if player.agent_id in seen:
            raise GameOptionError(f"players: {player.agent_id!r} appears twice")
        seen.add(player.agent_id)


@dataclass(frozen=True)
class TaskInfo:
    """A task a family lists. ``unavailable``: "" when this server can open it; else why not,
    a sentence naming what is missing and how to provide it (``open`` then raises
    ``TaskUnavailableError`` with it; ``ListTasks`` sends it as ``TaskInfo.unavailable``)."""

    family: str
    task: str
    description: str = ""
    max_steps: int = 0  # 0: depends on the seed / not fixed
    default_action: str = ""
    num_agents: int = 1
    unavailable: str = ""


@dataclass
class GameOptions:
    """Everything that configures one game besides the task name.

    ``seed``: 64-bit unsigned; (task, seed) fully determines the initial state.
    ``oracle``: put the expert's next action in ``AgentView.info["expert_action"]``.
    ``render_image``: fill ``AgentView.image`` every observation.
    ``include_tensors``: fill ``AgentView.tensors`` (the session asked for
    ``ObservationOptions.include_tensors``); a game may leave them out when False, which saves
    copying and, for games in worker processes, pickling them every step.
    ``max_steps``: overrides the task's own step limit when not None.
    ``kwargs``: family-specific keyword options (``envs.<family>_kwargs`` of the run spec).
    """

    seed: int
    players: list[PlayerSpec] = field(default_factory=list)
    oracle: bool = False
    render_image: bool = False
    include_tensors: bool = True
    max_steps: int | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class AgentView:
    """What one agent observes at one point of the episode."""

    long_term_context: str
    short_term_context: str = ""
    extra_text: dict[str, str] = field(default_factory=dict)
    image: np.ndarray | None = None
    tensors: dict[str, np.ndarray] = field(default_factory=dict)
    legal_actions: list[str] = field(default_factory=list)
    action_mask: list[bool] | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class AgentTransition:
    """The result of one step for one agent.

    ``valid`` is False when the submitted action was not in the action list; then
    ``applied_action`` is the default action and ``feedback`` explains it. The feedback goes
    only here (``ActionResult.feedback``): no game writes it into ``view``'s texts.
    """

    view: AgentView
    reward: float
    terminated: bool
    truncated: bool
    valid: bool
    applied_action: str
    feedback: str = ""


@dataclass
class StepResult:
    """One step of the whole game: per-agent transitions, who acts next, running metrics."""

    transitions: dict[str, AgentTransition]
    next_agents: list[str]
    metrics: dict[str, Any]
    done: bool


# An action as submitted by a player: a text (action name or free text) or an index into the
# action list.
SubmittedAction = str | int


class Game(ABC):
    """One environment instance. Created by ``Family.open``; not thread-safe; one episode at a
    time (``reset`` starts a fresh one with the same or a new seed)."""

    @property
    @abstractmethod
    def agents(self) -> list[str]:
        """The agent ids, in seat order."""

    @property
    @abstractmethod
    def max_steps(self) -> int:
        """The step limit of the current episode (after the last ``reset``)."""

    def first_agents(self) -> list[str]:
        """Who acts first after ``reset``: every agent by default (simultaneous games); a
        turn-based game returns only the player to move."""
        return list(self.agents)

    @abstractmethod
    def instruction(self, agent_id: str) -> str:
        """The full instruction text for one agent: game rules, goal, actions, tips."""

    @abstractmethod
    def actions(self, agent_id: str) -> list[ActionInfo]:
        """The action list (empty for free-text games such as TextWorld)."""

    @abstractmethod
    def default_action(self, agent_id: str) -> str:
        """The action applied when an agent's answer is not a valid action."""

    @abstractmethod
    def reset(self, seed: int | None = None) -> dict[str, AgentView]:
        """Start an episode (seed None: the seed from ``GameOptions``); first view per agent."""

    @abstractmethod
    def step(self, actions: Mapping[str, SubmittedAction]) -> StepResult:
        """Apply one action per acting agent. Invalid actions never raise: they become the
        default action with ``valid=False``. Raises ``RuntimeError`` if the episode is over."""

    @abstractmethod
    def metrics(self) -> dict[str, Any]:
        """Running episode metrics; always includes ``progression`` in [0, 1]."""

    @abstractmethod
    def render(self) -> np.ndarray:
        """A full RGB frame (H, W, 3) uint8 of the current state."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Free resources. Safe to call twice."""


class Family(ABC):
    """A game family (``babyai``, ``nle``, ...): lists its tasks and opens games."""

    name: str = ""
    #: Distribution names whose versions GetInfo reports (e.g. ("minigrid", "gymnasium")).
    packages: tuple[str, ...] = ()
    #: "thread": games run in the server process (on its game thread pool); "process": each
    #: game runs in its own worker process (families with global C state or heavy steps).
    isolation: str = "thread"
    #: True for families whose ``step`` is a fraction of a millisecond and holds the GIL
    #: throughout (BabyAI and BabaIsAI in pure Python; NLE and MiniHack, whose C step does
    #: not release it): the session runs it on the server's event loop instead of the game
    #: thread pool, whose hop (a thread wake-up and a loop wake-up per step) costs more than
    #: the step and buys no parallelism. ``open``, ``reset`` and ``render`` still run on the
    #: pool. It applies only while the family's games run in the server process: for NLE and
    #: MiniHack, a server started with ``--isolate`` not naming them (measured 2026-11-28: a
    #: step's handling 0.45-0.53 ms on the loop against 0.66-0.71 on the pool).
    inline_steps: bool = False
    #: Modules the worker forkserver imports once, so new workers start warm.
    preload: tuple[str, ...] = ()
    #: Every family's manifest by name, shared by all families: set by ``env_server.families``
    #: when it discovers them (every family class is defined under that package, so importing
    #: one sets it); empty until then. Read by ``option_schema``.
    manifests: ClassVar[Mapping[str, FamilyManifest]] = {}

    @abstractmethod
    def list_tasks(self) -> list[TaskInfo]:
        """The canonical tasks of the family (the BALROG evaluation set first); tasks this
        server cannot open are listed too, with ``TaskInfo.unavailable`` saying why."""

    def option_schema(self) -> tuple[Mapping[str, OptionSpec], Mapping[str, OptionSpec]]:
        """The family's options and seat options, from its manifest
        (``moria.families.FamilyManifest.options`` / ``player_options``, in ``manifests``); a
        family with no manifest (a test's) takes none."""
        manifest = self.manifests.get(self.name)
        if manifest is None:
            return {}, {}
        return manifest.options, manifest.player_options

    def check_options(self, task: str, options: GameOptions) -> GameOptions:
        """``options`` with ``kwargs`` and every seat's ``options`` checked against the
        family's schema (:meth:`option_schema`, ``moria.family_options.check_options``): each
        value as the family reads it, the defaults filled in. The env server calls it before
        anything is constructed; each family's ``open`` calls it again (cheap), so a family
        opened directly is held to the same schema. Idempotent. Raises GameOptionError
        (naming the key, the value and what is allowed; more than ``MAX_OPTION_KEYS`` seats
        are refused too)."""
        schema, seat_schema = self.option_schema()
        if len(options.players) > MAX_OPTION_KEYS:
            raise GameOptionError(f"players: {len(options.players):,} given; a game seats at "
                                  f"most {MAX_OPTION_KEYS}")
        try:
            kwargs = check_options(schema, options.kwargs, task=task)
            players = [dataclasses.replace(p, options=check_options(
                seat_schema, p.options, task=task,
                where=f"players[{quote(p.agent_id, 64)}].options", fill_defaults=False))
                for p in options.players]
        except OptionError as exc:
            raise GameOptionError(str(exc)) from None
        return dataclasses.replace(options, kwargs=kwargs, players=players)

    @abstractmethod
    def open(self, task: str, options: GameOptions) -> Game:
        """Create a game for ``task``. Raises ``TaskNotFoundError`` (unknown task),
        ``TaskUnavailableError`` (a task listed with ``TaskInfo.unavailable``, with that
        reason) or ``GameOptionError`` (bad option). The returned game has not been reset
        yet. Implementations read their options through :meth:`check_options` first."""
