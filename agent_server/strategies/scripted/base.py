"""The bot interface shared by the scripted players, and small helpers they share."""

from __future__ import annotations

import abc
import random

import numpy as np

from agent_server.turn import EpisodeContext, TurnInput
from moria.quoting import quote_names


class Bot(abc.ABC):
    """One game's scripted player, bound to one episode.

    Args:
        ctx: the episode context (action names, seed, env and task).
        rng: the episode's generator (``random.Random(ctx.seed)``); every tie-break and random
            choice draws from it, so a (seed, observation sequence) gives the same moves.
    """

    def __init__(self, ctx: EpisodeContext, rng: random.Random) -> None:
        self.ctx = ctx
        self.rng = rng

    @abc.abstractmethod
    def choose(self, turn: TurnInput) -> tuple[str, str]:
        """``(action name, reasoning sentence)`` for ``turn``.

        Raises:
            ValueError: the observation lacks what the bot reads (a tensor or info key).
        """


def legal_indices(ctx: EpisodeContext, turn: TurnInput) -> list[int]:
    """Indices into ``ctx.action_names`` that are legal now: from ``turn.action_mask`` when
    given, else from ``turn.legal_actions`` (names), else every action."""
    names = ctx.action_names
    if turn.action_mask and len(turn.action_mask) == len(names):
        return [i for i, ok in enumerate(turn.action_mask) if ok]
    if turn.legal_actions:
        legal = set(turn.legal_actions)
        return [i for i, name in enumerate(names) if name in legal]
    return list(range(len(names)))


def tensor(turn: TurnInput, name: str, ndim: int) -> np.ndarray:
    """``turn.tensors[name]`` checked to have ``ndim`` dimensions.

    Raises:
        ValueError: the tensor is missing (the session was not opened with tensors) or has
            another rank.
    """
    if name not in turn.tensors:
        raise ValueError(f"the scripted player needs the observation tensor {name!r}; "
                         f"got tensors {quote_names(sorted(turn.tensors), 10) or 'none'}")
    array = turn.tensors[name]
    if array.ndim != ndim:
        raise ValueError(f"tensor {name!r} has shape {array.shape}; expected {ndim} dimensions")
    return array


def pick_best(rng: random.Random, scored: list[tuple[float, int]]) -> int:
    """The item with the highest score; ties broken with ``rng``. ``scored`` is non-empty."""
    best = max(score for score, _ in scored)
    return rng.choice([item for score, item in scored if score == best])
