"""The per-game adapter the PettingZoo game driver talks to.

A ``BoardGame`` wraps one PettingZoo classic ``raw_env`` (an AEC env, always built with
``render_mode="rgb_array"``) and knows everything game specific: the agent ids, the move names
and how they map to the env's action indices, the text board, the instruction, and how the game
ended. The driver (``env_server.turn_based.TurnBasedGame``, which ``game.PettingZooGame``
names) knows nothing of chess or Go; it only asks the adapter, through the ``Board`` interface
this class implements for PettingZoo envs.

Conventions shared by every adapter:
- an *action index* is the env's own index (the position in its ``action_mask``);
- ``legal_moves()`` lists ``(index, name)`` for the player to move, in ascending index order;
- ``resolve(text)`` maps a submitted text to an action index or None (unparseable or illegal);
  the driver then applies a random legal move instead.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np

from env_server.turn_based import Board


class BoardGame(Board):
    """One PettingZoo classic game (an AEC env plus its text and notation).

    Subclasses set ``task``, ``title``, ``agents`` and ``default_max_steps`` and implement the
    abstract methods. ``self.env`` is the raw AEC env; the driver calls ``reset`` before
    anything else.
    """

    rng_prefix = "pettingzoo"
    #: plies after which the driver truncates the episode (a draw)
    default_max_steps: int = 0

    def __init__(self, env: Any):
        self.env = env
        #: facts about the current position (legal moves ...), cleared by reset and play
        self._cache: dict[str, Any] = {}

    # -- the env ---------------------------------------------------------------------------

    def reset(self, seed: int) -> None:
        """Start a new game (``seed`` is passed to the env's own reset)."""
        self._cache.clear()
        self.env.reset(seed=seed)

    @property
    def current(self) -> str:
        """The agent id whose turn it is."""
        return str(self.env.agent_selection)

    def play(self, index: int) -> None:
        """Apply the (legal) action ``index`` for the current player."""
        self._cache.clear()
        self.env.step(int(index))

    def observe(self, agent: str) -> dict[str, np.ndarray]:
        """The env's own observation for ``agent``: ``observation`` (planes) and
        ``action_mask`` (int8, all zero when it is not the agent's turn or the game is over)."""
        obs = self.env.observe(agent)
        return {"observation": np.asarray(obs["observation"]),
                "action_mask": np.asarray(obs["action_mask"], dtype=np.uint8)}

    def terminated(self) -> bool:
        """True once the game is over by its own rules."""
        return all(bool(v) for v in self.env.terminations.values())

    def total_rewards(self) -> dict[str, float]:
        """The env's rewards so far per agent (these games reward only the final move:
        +1 win, -1 loss, 0 draw)."""
        return {a: float(self.env.rewards[a]) for a in self.agents}

    def render(self) -> np.ndarray:
        """An RGB frame (H, W, 3) uint8 of the current position (the env's own drawing)."""
        return np.ascontiguousarray(self.env.render(), dtype=np.uint8)

    def legal_indices(self) -> list[int]:
        """Action indices legal for the player to move (the env's mask), ascending."""
        if "legal" not in self._cache:
            mask = self.observe(self.current)["action_mask"]
            self._cache["legal"] = [int(i) for i in np.flatnonzero(mask)]
        return list(self._cache["legal"])

    # -- notation and text (the rest of the interface is ``Board``'s) ----------------------

    @abstractmethod
    def side(self, agent: str) -> str:
        """The agent's side as players say it ("White", "X", "Black stones (X)")."""

    @abstractmethod
    def rules(self) -> str:
        """A short rules summary and the move notation (for the instruction)."""

    def rule_sections(self) -> list[str]:
        """The instruction's rules paragraph."""
        return [f"Rules and notation:\n{self.rules()}"]

    def agent_info(self, agent: str) -> dict[str, Any]:
        """The agent's ``side`` and the board's extras (``info``)."""
        return {"side": self.side(agent), **self.info()}

    def info(self) -> dict[str, Any]:
        """Extra JSON-able facts for the observation's info (chess: the FEN)."""
        return {}

    def close(self) -> None:
        """Drop the env. The envs' own close() calls pygame.quit(), a process-wide reset that
        would disturb other games' rendering, so it is not called."""
        self.env = None
