"""Agent strategies: a registry from ``agent.type`` to strategy class, and a factory.

Every episode gets a fresh instance from ``create_strategy``; no state crosses episodes.
"""

from __future__ import annotations

from agent_server.backends.base import Backend
from agent_server.strategies.base import Strategy
from agent_server.strategies.cot import CotStrategy
from agent_server.strategies.dummy import DummyStrategy, RandomStrategy
from agent_server.strategies.few_shot import FewShotStrategy
from agent_server.strategies.human import HumanStrategy
from agent_server.strategies.llm import LLMStrategy
from agent_server.strategies.naive import NaiveStrategy
from agent_server.strategies.oracle import OracleStrategy
from agent_server.strategies.plan_action import PlanActionStrategy
from agent_server.strategies.rl import RLStrategy
from agent_server.strategies.robust import RobustCotStrategy, RobustNaiveStrategy
from agent_server.strategies.scripted import ScriptedStrategy
from agent_server.turn import EpisodeContext
from moria.strategies import StrategyFacts

#: ``agent.type`` -> strategy class.
STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls
    for cls in (
        NaiveStrategy,
        CotStrategy,
        RobustNaiveStrategy,
        RobustCotStrategy,
        DummyStrategy,
        OracleStrategy,
        FewShotStrategy,
        PlanActionStrategy,
        RandomStrategy,
        ScriptedStrategy,
        RLStrategy,
        HumanStrategy,
    )
}


def registry_facts() -> list[StrategyFacts]:
    """What each registered strategy class declares (``calls_model``, ``reads_tensors``,
    ``keeps_images``), sorted by name: what ``PolicyService.GetInfo`` serves as
    ``strategy_info`` and ``python -m agent_server.strategies`` writes to
    ``moria/strategies.json``."""
    return [StrategyFacts(name=name, calls_model=cls.calls_model,
                          reads_tensors=cls.reads_tensors, keeps_images=cls.keeps_images)
            for name, cls in sorted(STRATEGIES.items())]


def create_strategy(ctx: EpisodeContext, backend: Backend | None) -> Strategy:
    """A new strategy instance for one episode, chosen by ``ctx.agent.protocol`` and
    ``ctx.agent.type``: under ``protocol=balrog`` BALROG's own agent of that type plays
    (``agent_server.strategies.balrog_protocol``), otherwise the registered Moria strategy.

    Raises:
        ValueError: when the type is not registered, an LLM strategy gets no backend, or the
            BALROG source cannot be used (``BalrogSourceError``, a ValueError).
    """
    if ctx.agent.protocol == "balrog":
        from agent_server.strategies.balrog_protocol import BalrogProtocolStrategy

        return BalrogProtocolStrategy(ctx, backend)
    try:
        cls = STRATEGIES[ctx.agent.type]
    except KeyError:
        known = ", ".join(sorted(STRATEGIES))
        raise ValueError(f"unknown agent type {ctx.agent.type!r}; known: {known}") from None
    return cls(ctx, backend)


__all__ = [
    "STRATEGIES",
    "CotStrategy",
    "DummyStrategy",
    "FewShotStrategy",
    "LLMStrategy",
    "NaiveStrategy",
    "OracleStrategy",
    "PlanActionStrategy",
    "RobustCotStrategy",
    "RobustNaiveStrategy",
    "Strategy",
    "create_strategy",
    "registry_facts",
]
