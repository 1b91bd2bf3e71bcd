"""The textworld family over real gRPC on loopback, its games in worker processes.

Two oracle-played episodes run concurrently (each game in its own worker process, the family's
isolation) and must show exactly the texts the same games show when played alone in-process.

The games are the cheap test variants (``recipes.small_recipe``), built here in-process into the
test session's temporary cache. A worker process does not see this process's monkeypatches (it
is forked from a shared forkserver), so the server runs ``SmallGamesFamily``: the real family
with the test recipes swapped in and its games folder taken from a ``games_dir`` option.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from env_server.families import FAMILIES
from env_server.families.textworld import TextWorldFamily, games, recipes
from env_server.game import Game, GameOptions
from moria.clients import EnvClient
from moria.codecs import dict_from_struct, struct_from_dict, text_action
from moria.common.v1 import types_pb2
from moria.env.v1 import env_service_pb2 as env_pb
from moria.family_options import OptionSpec, text
from tests.support.servers import env_server

pytestmark = pytest.mark.filterwarnings("ignore:Game .* is not fully supported")

JOBS = (("coin_collector", 25, True), ("the_cooking_game", 0, False))


class SmallGamesFamily(TextWorldFamily):
    """``TextWorldFamily`` on the test recipes; ``kwargs["games_dir"]`` names the games folder
    (an option of this test family only: its schema is the real one plus ``games_dir``)."""

    def option_schema(self) -> tuple[Mapping[str, OptionSpec], Mapping[str, OptionSpec]]:
        schema, seats = super().option_schema()
        return {**schema, "games_dir": text("the test's games folder", max_chars=4096)}, seats

    def open(self, task: str, options: GameOptions) -> Game:
        """Swap the test recipes in, point this (worker) process at the folder, then open."""
        kwargs = dict(options.kwargs)
        os.environ[games.GAMES_ENV] = str(kwargs.pop("games_dir"))
        for name in games.GAME_FAMILIES:
            recipes.RECIPES[name] = recipes.small_recipe(name)
        return super().open(task, dataclasses.replace(options, kwargs=kwargs))


@pytest.fixture
def games_dir(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Build the two small games in-process (shared with the unit tests) and register
    ``SmallGamesFamily`` as ``textworld``."""
    for name in games.GAME_FAMILIES:
        monkeypatch.setitem(recipes.RECIPES, name, recipes.small_recipe(name))
    folder = tmp_path_factory.getbasetemp() / "textworld-small-games" / "textworld"
    monkeypatch.setenv(games.GAMES_ENV, str(folder))
    for task, seed, _ in JOBS:
        games.build_game(task, games.index_for_seed(seed))
    monkeypatch.setitem(FAMILIES, "textworld", f"{__name__}:SmallGamesFamily")
    return folder


def _alone(task: str, seed: int, keep: bool) -> list[str]:
    """The long-term texts of an oracle episode played in this process (test recipes and games
    folder from the fixture)."""
    game = TextWorldFamily().open(
        task, GameOptions(seed=seed, oracle=True, kwargs={"keep_objective": keep}))
    view = game.reset()["agent_0"]
    texts = [view.long_term_context]
    while True:
        result = game.step({"agent_0": view.info["expert_action"]})
        view = result.transitions["agent_0"].view
        texts.append(view.long_term_context)
        if result.done:
            game.close()
            return texts


async def _play(client: EnvClient, folder: Path, task: str, seed: int, keep: bool,
                ) -> tuple[list[str], env_pb.StepResponse]:
    session = client.session()
    opened = await session.open(env_pb.OpenRequest(
        task=f"textworld:{task}", seed=seed, oracle=True,
        options=struct_from_dict({"keep_objective": keep, "games_dir": str(folder)}),
        observation=env_pb.ObservationOptions(include_image=True)))
    assert opened.family == "textworld" and opened.max_steps == 80
    start = opened.agents["agent_0"]
    assert list(start.action_space.actions) == []
    assert start.action_space.default_action == "help"
    assert "at most 80 commands" in start.instruction
    obs = start.observation
    assert not obs.HasField("image")  # text-only game
    texts = [obs.text["long_term_context"]]
    for _ in range(opened.max_steps):
        hint = dict_from_struct(obs.info)["expert_action"]
        step = await session.step({"agent_0": text_action(hint)})
        result = step.agents["agent_0"].action_result
        assert result.valid and result.applied_action.text == hint
        obs = step.agents["agent_0"].observation
        texts.append(obs.text["long_term_context"])
        if step.HasField("episode_end"):
            break
        assert dict_from_struct(step.metrics)["progression"] == 0.0
    await session.close()
    return texts, step


async def test_concurrent_oracle_episodes_in_workers_match_solo_play(games_dir: Path) -> None:
    async with env_server(("textworld",)) as srv:
        client = EnvClient(srv.target)
        played = await asyncio.gather(*(_play(client, games_dir, *job) for job in JOBS))
    for job, (texts, last) in zip(JOBS, played, strict=True):
        assert texts == _alone(*job)
        end = last.episode_end
        assert end.reason == types_pb2.END_REASON_TERMINATED
        metrics = dict_from_struct(end.metrics)
        assert metrics["progression"] == 1.0 and metrics["won"] is True
        assert metrics["keep_objective"] is job[2]
        assert end.returns["agent_0"] == metrics["max_score"] == metrics["score"]
    coin_texts = played[0][0]
    assert "coin" in coin_texts[0].split("\n\n")[0]  # the kept objective comes first
