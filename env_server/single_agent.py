"""The plumbing every single-agent game with a named action list shares.

A subclass provides :meth:`SingleAgentGame._action_list` and :meth:`_default_name` and keeps two
attributes the base reads: ``self._options`` (its ``GameOptions``) and ``self._done`` (True once
the episode ended). In return it gets ``agents``, ``actions``, ``default_action``, the agent-id
check, and :meth:`_choose` (a free-text game such as TextWorld returns an empty action list and
validates answers itself instead), which turns a step's submitted actions into the action to apply
(BALROG's rule: an answer that is not an action name becomes the default action, with feedback).
The feedback sentence travels only in the transition's ``feedback`` (``ActionResult.feedback``):
no game writes it into its observation text.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from env_server.actions import invalid_action_feedback, resolve_action, single_agent_action
from env_server.game import (
    ActionInfo,
    AgentTransition,
    AgentView,
    Game,
    GameOptions,
    SubmittedAction,
)

#: The one agent of a single-agent game.
AGENT_ID = "agent_0"


@dataclass(frozen=True)
class Choice:
    """The action a step applies.

    ``applied``: the action name; ``valid``: whether the answer was that name (or its index);
    ``feedback``: the invalid-action sentence ("" when valid), for ``ActionResult.feedback``
    only (never the observation text).
    """

    applied: str
    valid: bool
    feedback: str

    def transition(self, view: AgentView, reward: float, *, terminated: bool,
                   truncated: bool) -> AgentTransition:
        """The agent's transition for this step, carrying the choice's validity and feedback."""
        return AgentTransition(view=view, reward=reward, terminated=terminated,
                               truncated=truncated, valid=self.valid,
                               applied_action=self.applied, feedback=self.feedback)


class SingleAgentGame(Game):
    """Base of single-agent games whose agent ``agent_0`` picks from a fixed list of names."""

    _options: GameOptions
    _done: bool

    @abstractmethod
    def _action_list(self) -> Sequence[ActionInfo]:
        """The actions, in index order."""

    @abstractmethod
    def _default_name(self) -> str:
        """The action applied for an invalid answer."""

    @property
    def agents(self) -> list[str]:
        """Always ``["agent_0"]``."""
        return [AGENT_ID]

    def actions(self, agent_id: str) -> list[ActionInfo]:
        """The action list (names and descriptions), in index order. Raises ``KeyError`` for
        an agent other than ``agent_0``."""
        self._check_agent(agent_id)
        return list(self._action_list())

    def default_action(self, agent_id: str) -> str:
        """The action applied when an answer is not a valid action."""
        self._check_agent(agent_id)
        return self._default_name()

    def _choose(self, actions: Mapping[str, SubmittedAction], *, started: bool) -> Choice:
        """The action this step applies.

        Raises:
            RuntimeError: before ``reset`` (``started`` False) or after the episode ended.
            ValueError: ``actions`` is not exactly one entry, for ``agent_0``.
        """
        submitted = single_agent_action(actions, AGENT_ID, started=started, done=self._done)
        applied, valid = resolve_action(submitted, self._action_list(), self._default_name())
        feedback = "" if valid else invalid_action_feedback(submitted, applied)
        return Choice(applied, valid, feedback)

    @staticmethod
    def _check_agent(agent_id: str) -> None:
        if agent_id != AGENT_ID:
            raise KeyError(f"unknown agent {agent_id!r}; this game has only {AGENT_ID!r}")
