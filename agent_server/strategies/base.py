"""The strategy interface: one instance per episode turns observations into decisions."""

from __future__ import annotations

import abc
from typing import Any, ClassVar

from agent_server.backends.base import Backend
from agent_server.turn import Decision, EpisodeContext, TurnInput


class Strategy(abc.ABC):
    """A prompting (or non-LLM) strategy bound to one episode.

    A fresh instance is created for every episode (every Play stream) and owns all its state:
    history, random generators, counters. Nothing is shared across episodes except the backend,
    which is re-entrant and stateless per episode.

    Args:
        ctx: the episode context (instruction, action names, configuration, seed).
        backend: the model backend; None is accepted only by strategies that call no model.
    """

    #: The ``agent.type`` name this class is registered under.
    name: ClassVar[str] = ""

    # What a player of this class is, declared by the class itself (the one owner of these
    # facts). ``PolicyService.GetInfo`` serves them (``strategy_info``) and
    # ``python -m agent_server.strategies`` writes them to ``moria/strategies.json`` for the
    # orchestrator and workers (``moria.strategies``). Every default is "no".

    #: Whether it calls a model: its turns take a model-call slot and it needs a backend.
    calls_model: ClassVar[bool] = False
    #: Whether it reads the env's tensor observation (``TurnInput.tensors``): env sessions with
    #: such a seat are opened with ``include_tensors``.
    reads_tensors: ClassVar[bool] = False
    #: Whether it can keep image frames in its history (a VLM-capable prompting strategy; it
    #: does so when ``agent.max_image_history`` > 0, see ``uses_images``).
    keeps_images: ClassVar[bool] = False

    def __init__(self, ctx: EpisodeContext, backend: Backend | None) -> None:
        self.ctx = ctx
        self.backend = backend

    @property
    def uses_images(self) -> bool:
        """Whether ``act`` reads ``TurnInput.image_png``: for a class that ``keeps_images``,
        when ``agent.max_image_history`` > 0. When False the server neither decodes nor
        re-encodes the observation's image and passes ``image_png=None`` (an image that would
        not decode is then no error either)."""
        return self.keeps_images and self.ctx.agent.max_image_history > 0

    def protocol(self) -> dict[str, Any]:
        """What results record of this episode's prompting protocol (``Ready.protocol``):
        ``{"name": "moria"}`` for players that prompt no model; LLM strategies add the
        instruction's SHA-256 and the generation settings."""
        return {"name": "moria"}

    @abc.abstractmethod
    async def act(self, turn: TurnInput) -> Decision:
        """Choose the action for ``turn``.

        Raises:
            BackendError: when the model call failed for good (the episode ends).
        """
