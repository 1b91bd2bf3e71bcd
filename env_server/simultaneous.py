"""The plumbing every simultaneous-move game with a named action list shares.

In a simultaneous-move game (``multigrid``, ``meltingpot``) every agent acts at every step, all at
once, each choosing from the same fixed list of named actions. A subclass keeps the attributes
the base reads: ``self._agents`` (the agent ids, in order), ``self._actions`` (the action list,
in index order), ``self._instructions`` (agent id -> its instruction) and ``self._done`` (True
once the episode ended), and provides :meth:`SimultaneousGame._default_name`. In return it gets
``agents``, ``instruction``, ``actions``, ``default_action``, the agent-id check
(:meth:`_check_agent`), :meth:`_choose_all`, which turns a step's submitted actions into one
:class:`~env_server.single_agent.Choice` per agent (BALROG's rule, as for single-agent games: an
answer that is not an action name becomes the default action, with feedback), and
:meth:`_step_result` (every agent acts next until the episode is done). The feedback sentence
travels only in the transition's ``feedback`` (``ActionResult.feedback``).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping

from env_server.actions import invalid_action_feedback, resolve_action
from env_server.game import ActionInfo, AgentTransition, Game, StepResult, SubmittedAction
from env_server.single_agent import Choice


class SimultaneousGame(Game):
    """Base of games whose agents all act at once, every step, from one list of names."""

    _agents: list[str]
    _actions: list[ActionInfo]
    _instructions: dict[str, str]
    _done: bool

    @abstractmethod
    def _default_name(self) -> str:
        """The action applied for an invalid answer."""

    @property
    def agents(self) -> list[str]:
        """The agent ids, in the game's order; every one acts at every step."""
        return list(self._agents)

    def instruction(self, agent_id: str) -> str:
        """The agent's instruction. Raises ``KeyError`` for an unknown agent."""
        self._check_agent(agent_id)
        return self._instructions[agent_id]

    def actions(self, agent_id: str) -> list[ActionInfo]:
        """The action list (names and descriptions), in index order, the same for every agent.
        Raises ``KeyError`` for an unknown agent."""
        self._check_agent(agent_id)
        return list(self._actions)

    def default_action(self, agent_id: str) -> str:
        """The action applied when an answer is not a valid action. Raises ``KeyError`` for an
        unknown agent."""
        self._check_agent(agent_id)
        return self._default_name()

    def _check_agent(self, agent_id: str) -> None:
        if agent_id not in self._agents:
            raise KeyError(f"unknown agent {agent_id!r}; agents: {', '.join(self._agents)}")

    def _choose_all(self, actions: Mapping[str, SubmittedAction], *,
                    started: bool) -> dict[str, Choice]:
        """The action each agent's answer applies this step, by agent id in the game's order.

        Raises:
            RuntimeError: before ``reset`` (``started`` False) or after the episode ended.
            ValueError: ``actions`` does not hold exactly one entry per agent.
        """
        if not started:
            raise RuntimeError("step() before reset()")
        if self._done:
            raise RuntimeError("the episode is over; call reset() to start a new one")
        if set(actions) != set(self._agents):
            raise ValueError(f"expected one action for each of {self._agents}; "
                             f"got {sorted(actions)}")
        default = self._default_name()
        chosen: dict[str, Choice] = {}
        for agent in self._agents:
            submitted = actions[agent]
            applied, valid = resolve_action(submitted, self._actions, default)
            feedback = "" if valid else invalid_action_feedback(submitted, applied)
            chosen[agent] = Choice(applied, valid, feedback)
        return chosen

    def _step_result(self, transitions: dict[str, AgentTransition]) -> StepResult:
        """The step's result: every agent acts next until the episode is done."""
        return StepResult(transitions=transitions,
                          next_agents=[] if self._done else list(self._agents),
                          metrics=self.metrics(), done=self._done)
