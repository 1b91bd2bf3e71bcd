"""The driver every turn-based two-player board game shares: ``TurnBasedGame`` over a ``Board``.

A ``Board`` knows one game (its rules, move names, text and drawing); the driver knows turns,
illegal answers, rewards, metrics and the texts both games phrase the same way. It plays the
role ``single_agent.py`` plays for single-agent games. Families using it: ``pettingzoo``
(``BoardGame``, a board holding a PettingZoo AEC env) and ``nim`` (``NimBoard``).

Turns: ``agents`` are the board's agent ids in seat order; after ``reset`` and after every
step, ``StepResult.next_agents`` holds only the player to move (``[]`` once the game is over);
``first_agents()`` is the first seat. A step needs the mover's action; an action submitted for
an agent whose turn it is not is ignored (its transition says so, ``valid=False``).

Every step returns a transition for *every* agent: both see the new board, and the final
rewards (the board's totals: +1 win, -1 loss, 0 draw) go to both players on the last move.

Actions: a text the board resolves to a legal move (``Board.resolve``) or an integer, read as
the board's action index. Anything else, including a legal-looking move that is illegal now,
is *illegal*: a legal move drawn from a ``random.Random`` seeded from
``f"{board.rng_prefix}/{board.task}/{episode seed}"`` is played instead, ``valid=False``, the
feedback names the move played, and the player's ``illegal_moves`` count goes up. The
sentence travels only in the transition's ``feedback`` (``ActionResult.feedback``), never in the
observation text; the player shows it (``eval.feedback_on_invalid_action``).

Observation per agent: ``long_term_context`` is ``Board.board_text`` (followed by the turn line
where ``Board.turn_line_on_board``); ``short_term_context`` says who the agent is (and its side),
the last move, whose turn it is and, on the agent's turn, the legal moves; ``legal_actions`` are
the legal move names on the agent's turn (else empty); ``action_mask`` and
``tensors["action_mask"]`` (uint8) are the board's mask (all zero once the game is over); the
other tensors are the board's (``Board.observe``); ``info`` has ``current_player``,
``move_number`` and ``Board.agent_info``; the image (``render_image``) is ``Board.render``.

Metrics: ``moves`` (plies played), ``current_player``, ``Board.metrics()``, ``illegal_moves``
{agent: n}, ``returns`` {agent: float}, ``progression_agent``, and once the game is over
``outcome`` {agent: "win" | "draw" | "loss" | "unfinished"}, ``winner`` (agent id, "" for a
draw or an unfinished game), ``end`` (how it ended), ``truncated`` (the step limit was reached
before the game ended: every agent's outcome is ``unfinished``, neither a win nor a draw, with
returns 0), and ``score`` where ``Board.score()`` gives one. ``progression`` is the result for
``progression_agent``: 1.0 win, 0.5 draw, 0.0 loss or unfinished, and 0.0 while the game runs.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Mapping
from numbers import Integral
from typing import Any

import numpy as np

from env_server.game import (
    ActionInfo,
    AgentTransition,
    AgentView,
    Game,
    GameOptions,
    StepResult,
    SubmittedAction,
)

#: The outcome of every agent of a game cut by the step limit before it ended: a draw is a
#: draw only when the rules say so.
UNFINISHED = "unfinished"
OUTCOME_PROGRESS = {"win": 1.0, "draw": 0.5, "loss": 0.0, UNFINISHED: 0.0}


class Board(ABC):
    """One turn-based two-player game as the driver sees it.

    Conventions: an *action index* is the board's own index (the position in its action mask);
    ``legal_moves()`` lists ``(index, name)`` for the player to move, in ascending index order;
    ``resolve(text)`` maps a submitted text to a legal action index or None (the driver then
    plays a random legal move instead). The driver calls ``reset`` before anything else.
    """

    #: the first part of the replacement-move RNG label (``prefix/task/seed``)
    rng_prefix: str = ""
    task: str = ""
    #: the game's name in the instruction ("chess", "Nim")
    title: str = ""
    #: the agent ids, in seat order (the first one moves first)
    agents: tuple[str, ...] = ()
    #: the "Move N: it is X's turn." line goes after the board text (else: in the short-term
    #: text, with the agent's side)
    turn_line_on_board: bool = False
    #: what players see each turn, as the instruction names it
    board_noun: str = "the board"
    #: the instruction's last paragraph
    goal: str = "Goal: win the game. A win scores +1, a draw 0, a loss -1."

    # -- play ------------------------------------------------------------------------------

    @abstractmethod
    def reset(self, seed: int) -> None:
        """Start a new game."""

    @property
    @abstractmethod
    def current(self) -> str:
        """The agent id whose turn it is."""

    @abstractmethod
    def play(self, index: int) -> None:
        """Apply the (legal) action ``index`` for the current player."""

    @abstractmethod
    def terminated(self) -> bool:
        """True once the game is over by its own rules."""

    @abstractmethod
    def total_rewards(self) -> dict[str, float]:
        """The rewards so far per agent (+1 win, -1 loss, 0 draw once the game is over)."""

    @abstractmethod
    def observe(self, agent: str) -> dict[str, np.ndarray]:
        """Tensors for ``agent``, ``action_mask`` among them (all zero when it is not the
        agent's turn)."""

    @abstractmethod
    def render(self) -> np.ndarray:
        """An RGB frame (H, W, 3) uint8 of the current position."""

    def close(self) -> None:  # noqa: B027 (optional hook)
        """Free what the board holds (nothing by default)."""

    # -- notation --------------------------------------------------------------------------

    @abstractmethod
    def static_actions(self) -> list[ActionInfo]:
        """The fixed action list in index order (empty where move names depend on the
        position, as in chess)."""

    @abstractmethod
    def legal_moves(self) -> list[tuple[int, str]]:
        """``(index, name)`` of every legal move of the player to move, ascending index."""

    @abstractmethod
    def resolve(self, text: str) -> int | None:
        """The action index a submitted text names, if it is a legal move now; else None."""

    def legal_labels(self) -> list[str]:
        """The legal moves as shown in the short-term text (chess: ``uci (SAN)``)."""
        return [name for _, name in self.legal_moves()]

    def move_label(self, index: int) -> str:
        """How a move is shown in texts (before it is played)."""
        return dict(self.legal_moves()).get(index, str(index))

    # -- text ------------------------------------------------------------------------------

    def side(self, agent: str) -> str:
        """The agent's side as players say it ("White", "X"); "" where seats have no side."""
        return ""

    @abstractmethod
    def board_text(self, agent: str) -> str:
        """The board as text, seen by ``agent``."""

    @abstractmethod
    def rule_sections(self) -> list[str]:
        """The instruction's paragraphs on rules and move notation."""

    def end_detail(self) -> str:
        """How the game ended, in words (after termination)."""
        return ""

    def score(self) -> float | None:
        """A final score where the game has one (Go's area score); else None."""
        return None

    def agent_info(self, agent: str) -> dict[str, Any]:
        """Extra JSON-able facts for ``agent``'s observation info."""
        return {}

    def metrics(self) -> dict[str, Any]:
        """Extra JSON-able running metrics."""
        return {}


class TurnBasedGame(Game):
    """A turn-based two-player game driven over a ``Board``; not reset yet.

    Args:
        board: the game.
        options: the open options (seed, render_image; max_steps already validated).
        max_steps: the ply limit (the episode is truncated, unfinished, when it is reached).
        progression_agent: the agent whose result ``metrics["progression"]`` reports.
    """

    def __init__(self, board: Board, options: GameOptions, *, max_steps: int,
                 progression_agent: str):
        self._board = board
        self._options = options
        self._limit = max_steps
        self._progression_agent = progression_agent
        self._agents = list(board.agents)
        self._instructions = {a: self._build_instruction(a) for a in self._agents}
        self._started = False
        self._closed = False
        self._rng = random.Random(0)
        self._done = False
        self._truncated = False
        self._moves = 0
        self._last_move: tuple[str, str] | None = None
        self._illegal: dict[str, int] = {}
        self._returns: dict[str, float] = {}
        self._outcome: dict[str, str] = {}
        self._winner = ""
        self._end = ""
        self._score: float | None = None
        self._reset_counters()

    # -- static facts -----------------------------------------------------------------------

    @property
    def agents(self) -> list[str]:
        """The agent ids, first mover first."""
        return list(self._agents)

    @property
    def max_steps(self) -> int:
        """The ply limit (moves of both players together)."""
        return self._limit

    def first_agents(self) -> list[str]:
        """Who moves first after ``reset``: the first seat only."""
        return [self._agents[0]]

    def instruction(self, agent_id: str) -> str:
        """Rules, the agent's seat, the move notation and the illegal-move rule."""
        self._check_agent(agent_id)
        return self._instructions[agent_id]

    def actions(self, agent_id: str) -> list[ActionInfo]:
        """The board's fixed move list in index order (chess: empty; its legal UCI moves come
        with every observation)."""
        self._check_agent(agent_id)
        return self._board.static_actions()

    def default_action(self, agent_id: str) -> str:
        """``""``: an illegal answer is replaced by a random legal move, not a fixed action."""
        self._check_agent(agent_id)
        return ""

    # -- episode ----------------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> dict[str, AgentView]:
        """Start a game; ``seed`` (default: the options' seed) seeds the board and the RNG that
        picks replacement moves for illegal answers."""
        if self._closed:
            raise RuntimeError("the game is closed")
        episode_seed = self._options.seed if seed is None else int(seed)
        self._board.reset(episode_seed)
        self._rng = random.Random(
            f"{self._board.rng_prefix}/{self._board.task}/{episode_seed}")
        self._reset_counters()
        self._started = True
        return {a: self._view(a) for a in self._agents}

    def step(self, actions: Mapping[str, SubmittedAction]) -> StepResult:
        """Play the mover's action (an illegal one becomes a seeded random legal move).

        Raises:
            RuntimeError: before ``reset``, after the game ended or once the game is closed.
            ValueError: no action for the player to move, or an unknown agent id.
        """
        if self._closed:
            raise RuntimeError("the game is closed")
        if not self._started:
            raise RuntimeError("step() before reset()")
        if self._done:
            raise RuntimeError("the episode is over; call reset() to start a new one")
        unknown = sorted(set(actions) - set(self._agents))
        if unknown:
            raise ValueError(f"unknown agents {unknown}; this game has {self._agents}")
        mover = self._board.current
        if mover not in actions:
            raise ValueError(f"it is {mover!r}'s turn; got actions for {sorted(actions)}")

        submitted = actions[mover]
        legal = self._board.legal_moves()
        index = self._resolve(submitted, legal)
        valid = index is not None
        if index is None:
            index = self._rng.choice(legal)[0]
            self._illegal[mover] += 1
        label = self._board.move_label(index)
        name = dict(legal)[index]
        feedback = "" if valid else (
            f"Your previous answer was not a legal move, so the random legal move "
            f"'{name}' was played for you instead.")
        self._board.play(index)
        self._moves += 1
        self._last_move = (mover, label)

        terminated = self._board.terminated()
        truncated = not terminated and self._moves >= self._limit
        self._done = terminated or truncated
        self._truncated = truncated
        if self._done:
            self._finish(terminated)
        rewards = self._reward_deltas(terminated)

        transitions: dict[str, AgentTransition] = {}
        for agent in self._agents:
            if agent == mover:
                transitions[agent] = AgentTransition(
                    view=self._view(agent), reward=rewards[agent],
                    terminated=terminated, truncated=truncated, valid=valid,
                    applied_action=name, feedback=feedback)
            else:
                off_turn = agent in actions
                note = ("It was not your turn, so your answer was ignored." if off_turn
                        else "")
                transitions[agent] = AgentTransition(
                    view=self._view(agent), reward=rewards[agent],
                    terminated=terminated, truncated=truncated, valid=not off_turn,
                    applied_action="", feedback=note)
        next_agents = [] if self._done else [self._board.current]
        return StepResult(transitions=transitions, next_agents=next_agents,
                          metrics=self.metrics(), done=self._done)

    def metrics(self) -> dict[str, Any]:
        """Running metrics (module docstring)."""
        out: dict[str, Any] = {
            "progression": 0.0,
            "moves": self._moves,
            "current_player": "" if self._done or not self._started else self._board.current,
            **self._board.metrics(),
            "illegal_moves": dict(self._illegal),
            "returns": dict(self._returns),
            "progression_agent": self._progression_agent,
        }
        if self._outcome:
            out["progression"] = OUTCOME_PROGRESS[self._outcome[self._progression_agent]]
            out.update(outcome=dict(self._outcome), winner=self._winner, end=self._end,
                       truncated=self._truncated)
            if self._score is not None:
                out["score"] = self._score
        return out

    def render(self) -> np.ndarray:
        """The board's RGB drawing of the current position, (H, W, 3) uint8 (resets with the
        options' seed first if no game was started)."""
        if not self._started:
            self.reset()
        return self._board.render()

    def close(self) -> None:
        """Drop the board; safe to call twice."""
        if not self._closed:
            self._closed = True
            self._board.close()

    # -- helpers ----------------------------------------------------------------------------

    def _reset_counters(self) -> None:
        self._done = False
        self._truncated = False
        self._moves = 0
        self._last_move = None
        self._illegal = dict.fromkeys(self._agents, 0)
        self._returns = dict.fromkeys(self._agents, 0.0)
        self._outcome = {}
        self._winner = ""
        self._end = ""
        self._score = None

    def _check_agent(self, agent_id: str) -> None:
        if agent_id not in self._agents:
            raise KeyError(f"unknown agent {agent_id!r}; this game has {self._agents}")

    def _resolve(self, submitted: SubmittedAction, legal: list[tuple[int, str]]) -> int | None:
        if isinstance(submitted, Integral) and not isinstance(submitted, bool):
            index = int(submitted)
            return index if any(i == index for i, _ in legal) else None
        if isinstance(submitted, str):
            return self._board.resolve(submitted)
        return None

    def _reward_deltas(self, terminated: bool) -> dict[str, float]:
        """This step's reward per agent: the change of the board's total (0 on truncation)."""
        totals = (self._board.total_rewards() if terminated
                  else dict.fromkeys(self._agents, 0.0))
        deltas = {a: totals[a] - self._returns[a] for a in self._agents}
        self._returns = totals
        return deltas

    def _finish(self, terminated: bool) -> None:
        """Record outcome, winner and how the game ended (or that the step limit stopped it:
        every outcome ``unfinished``)."""
        self._score = self._board.score()
        if not terminated:
            self._outcome = dict.fromkeys(self._agents, UNFINISHED)
            self._end = f"step limit of {self._limit} moves reached before the game ended"
            return
        totals = self._board.total_rewards()
        best = max(totals.values())
        for agent, value in totals.items():
            if value == best and list(totals.values()).count(best) == 1:
                self._outcome[agent] = "win"
                self._winner = agent
            elif value == best:
                self._outcome[agent] = "draw"
            else:
                self._outcome[agent] = "loss"
        self._end = self._board.end_detail()

    def _view(self, agent: str) -> AgentView:
        board = self._board
        obs = dict(board.observe(agent))
        mask = obs.pop("action_mask").astype(np.uint8)
        if self._done:  # the envs leave a mask for the last agent selected; nobody moves now
            mask = np.zeros_like(mask)
        my_turn = not self._done and board.current == agent
        legal = [name for _, name in board.legal_moves()] if my_turn else []
        info: dict[str, Any] = {
            "current_player": "" if self._done else board.current,
            "move_number": self._moves + 1,
            **board.agent_info(agent),
        }
        long_term = board.board_text(agent)
        if board.turn_line_on_board:
            long_term += "\n" + self._turn_line(agent, my_turn)
        tensors = {key: np.ascontiguousarray(value) for key, value in obs.items()}
        return AgentView(
            long_term_context=long_term,
            short_term_context=self._short_term(agent, my_turn),
            image=board.render() if self._options.render_image else None,
            tensors={**tensors, "action_mask": mask},
            legal_actions=legal,
            action_mask=[bool(v) for v in mask],
            info=info,
        )

    def _playing(self, agent: str) -> str:
        side = self._board.side(agent)
        return f", playing {side}" if side else ""

    def _turn_line(self, agent: str, my_turn: bool) -> str:
        if self._done:
            return "The game is over."
        current = self._board.current
        if my_turn:
            return f"Move {self._moves + 1}: it is your turn."
        side = self._board.side(current)
        return f"Move {self._moves + 1}: it is {current}'s turn" + (f" ({side})." if side
                                                                   else ".")

    def _short_term(self, agent: str, my_turn: bool) -> str:
        board = self._board
        lines = [f"You are {agent}{self._playing(agent)}."]
        if self._last_move is None:
            lines.append("No move has been played yet.")
        else:
            who, label = self._last_move
            lines.append(f"Last move: {'you' if who == agent else who} played {label}.")
        if self._done:
            result = self._outcome.get(agent, UNFINISHED)
            words = {"win": "You won.", "draw": "It is a draw.", "loss": "You lost.",
                     UNFINISHED: "Nobody won: the game did not finish."}[result]
            lines.append(f"The game is over ({self._end}). {words}")
            return "\n".join(lines)
        if not board.turn_line_on_board:
            lines.append(self._turn_line(agent, my_turn))
        if my_turn:
            lines.append("Legal moves: " + ", ".join(board.legal_labels()))
        return "\n".join(lines)

    def _build_instruction(self, agent: str) -> str:
        board = self._board
        opponent = next(a for a in self._agents if a != agent)
        first = "You move first." if agent == self._agents[0] else "Your opponent moves first."
        return "\n\n".join([
            f"You are playing {board.title} against another player. You are "
            f"{agent}{self._playing(agent)}; your opponent is {opponent}"
            f"{self._playing(opponent)}. {first}",
            *board.rule_sections(),
            f"Each turn you see {board.board_noun} and the list of legal moves. Answer with "
            "exactly one legal move, written as it appears in that list. If your answer is not a "
            "legal move, a random legal move is played for you instead and you are told which one.",
            board.goal,
        ])
