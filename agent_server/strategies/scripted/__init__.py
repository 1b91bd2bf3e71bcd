"""scripted: non-LLM players with a simple, sensible strategy per multi-agent game.

``ScriptedStrategy`` (``agent.type=scripted``) picks its bot from ``BOTS``, a registry from a
game key to a bot class. The game key is the env family and a game name derived from the task
by that family's entry in ``GAME_NAMES`` (PettingZoo: the task itself; multigrid: ``soccer`` or
``collect`` from the task id). Bots decide from what the policy receives each turn (tensors,
action mask, info) and draw every random choice from ``random.Random(ctx.seed)``.

Bots (see each module):
- ``pettingzoo/connect_four_v3``, ``pettingzoo/tictactoe_v3``: ``boards``;
- ``pettingzoo/chess_v6``: ``chess_bot``; ``pettingzoo/go_v5``: ``go_bot``;
- ``multigrid/soccer``, ``multigrid/collect``: ``multigrid_bot`` (any Soccer or Collect task).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from agent_server.backends.base import Backend, TokenUsage
from agent_server.strategies.base import Strategy
from agent_server.strategies.scripted.base import Bot
from agent_server.strategies.scripted.boards import ConnectFourBot, TicTacToeBot
from agent_server.strategies.scripted.chess_bot import ChessBot
from agent_server.strategies.scripted.go_bot import GoBot
from agent_server.strategies.scripted.multigrid_bot import CollectBot, SoccerBot
from agent_server.turn import Decision, EpisodeContext, TurnInput
from moria.quoting import quote

#: (env family, game) -> bot class
BOTS: dict[tuple[str, str], type[Bot]] = {
    ("pettingzoo", "connect_four_v3"): ConnectFourBot,
    ("pettingzoo", "tictactoe_v3"): TicTacToeBot,
    ("pettingzoo", "chess_v6"): ChessBot,
    ("pettingzoo", "go_v5"): GoBot,
    ("multigrid", "soccer"): SoccerBot,
    ("multigrid", "collect"): CollectBot,
}

_MULTIGRID_SPORT = re.compile(r"^MosaicMultiGrid-(S|Soccer|C|Collect)-", re.IGNORECASE)
_SPORTS = {"s": "soccer", "soccer": "soccer", "c": "collect", "collect": "collect"}


def _multigrid_game(task: str) -> str:
    match = _MULTIGRID_SPORT.match(task)
    return _SPORTS[match.group(1).lower()] if match else task


#: env family -> task -> game name used in ``BOTS``
GAME_NAMES: dict[str, Callable[[str], str]] = {
    "pettingzoo": lambda task: task,
    "multigrid": _multigrid_game,
}


def supported() -> str:
    """The supported games in words, for error messages."""
    return ", ".join(f"{env}/{game}" for env, game in BOTS) + \
        " (multigrid: any MosaicMultiGrid-S-* Soccer or MosaicMultiGrid-C-* Collect task)"


def bot_class(env_name: str, task: str) -> type[Bot]:
    """The bot class for ``task`` of ``env_name``.

    Raises:
        ValueError: no scripted bot plays that env/task; the message names the supported ones.
    """
    naming = GAME_NAMES.get(env_name)
    cls = BOTS.get((env_name, naming(task))) if naming else None
    if cls is None:
        raise ValueError(f"agent type 'scripted' has no bot for env {quote(env_name, 64)} "
                         f"task {quote(task, 128)}; supported: {supported()}")
    return cls


class ScriptedStrategy(Strategy):
    """Plays the scripted bot of the episode's game (``BOTS``). Calls no model (``backend``
    may be None); every random choice comes from ``random.Random(ctx.seed)``.

    Raises:
        ValueError: at construction, when no bot supports ``ctx.env_name``/``ctx.task`` (the
            policy server answers INVALID_ARGUMENT at Begin), or the game lacks the actions
            the bot needs.
    """

    name = "scripted"
    calls_model = False
    reads_tensors = True  # the board bots read PettingZoo's observation planes
    keeps_images = False

    def __init__(self, ctx: EpisodeContext, backend: Backend | None) -> None:
        super().__init__(ctx, backend)
        self.bot: Bot = bot_class(ctx.env_name, ctx.task)(ctx, random.Random(ctx.seed))

    async def act(self, turn: TurnInput) -> Decision:
        """The bot's action for ``turn``.

        Raises:
            ValueError: the observation lacks what the bot reads (for example no tensors).
        """
        action, reasoning = self.bot.choose(turn)
        return Decision(action=action, raw_completion=action, reasoning=reasoning,
                        usage=TokenUsage(), latency_s=0.0, stop_reason="")


__all__ = ["BOTS", "GAME_NAMES", "ScriptedStrategy", "bot_class", "supported"]
