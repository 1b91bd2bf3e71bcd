"""Melting Pot scenarios played with their background bots (``env_server/families/meltingpot/
bots.py``), over real gRPC on loopback and in-process.

Melting Pot's assets tarball (the bots' saved models) cannot be downloaded here, so each test
builds real TensorFlow saved models with the structure the package's ``SavedModelPolicy`` and
``PermissiveModel`` load (``initial_state(key)``, ``step(key, timestep, prev_state)`` returning
``(key, ((action, info), state))``, ``function_signatures()``, ``function_tables()``), places
them where a real scenario's bot configs point inside an ``assets/saved_models`` folder and
tars that folder as the real tarball is. The models take exactly the observations (names,
shapes, dtypes) the substrate gives a bot, so a wrong observation fails the call. Their action
is a fixed cycle of action indices kept in a variable of the model (plus the puppeteer's goal
index for puppet bots), with a step counter as recurrent state: the bots' action counts and
their turning in the engine show that the actions come from the models.

Needs tensorflow (the ``meltingpot-scenarios`` extra, which ``make install`` installs); it is
never skipped for its absence.
"""

from __future__ import annotations

import importlib.util
import random
import tarfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import grpc
import pytest

from env_server.families.meltingpot import package
from env_server.families.meltingpot.bots import bot_spec
from env_server.families.meltingpot.family import MeltingPotFamily
from env_server.families.meltingpot.package import scenario_configs
from env_server.families.meltingpot.scenarios import NOT_SERVED, scenario_specs
from env_server.families.meltingpot.substrates import SUBSTRATES, task_spec
from env_server.game import GameOptions, TaskUnavailableError
from moria.clients import EnvClient
from moria.codecs import dict_from_struct, text_action
from moria.common.v1 import types_pb2
from moria.env.v1 import env_service_pb2 as env_pb
from moria.server_files import ServerFiles
from tests.support.servers import env_server

HARVEST = "commons_harvest__open_0"  # 5 focal players, 2 bots (free_0, free_1: plain models)
DILEMMA = "prisoners_dilemma_in_the_matrix__repeated_0"  # 1 focal, 1 puppet bot
PUPPET_BASE = 3  # a puppet model plays action PUPPET_BASE + the index of its goal


def _tf() -> Any:
    try:
        import tensorflow as tf
    except ModuleNotFoundError as exc:  # pragma: no cover - make install installs it
        raise AssertionError("tensorflow is missing: install the meltingpot-scenarios extra "
                             "(make install does)") from exc
    return tf


def _observation_specs(substrate: str, names: Iterable[str]) -> dict[str, Any]:
    """TensorSpecs of the observations ``names`` as a bot of ``substrate`` gets them (after
    the policy's cast to 32 bits): RGB is the substrate's own window, 8 pixels a cell."""
    tf = _tf()
    view = task_spec(substrate).view
    height = (int(view["forward"]) + int(view["backward"]) + 1) * 8
    width = (int(view["left"]) + int(view["right"]) + 1) * 8
    known = {
        "RGB": tf.TensorSpec([height, width, 3], tf.uint8),
        "READY_TO_SHOOT": tf.TensorSpec([], tf.float32),
        "COLLECTIVE_REWARD": tf.TensorSpec([], tf.float32),
        "INVENTORY": tf.TensorSpec([2], tf.float32),
        "INTERACTION_INVENTORIES": tf.TensorSpec([2, 2], tf.float32),
        "GOAL": tf.TensorSpec([4], tf.int32),
    }
    return {name: known[name] for name in names}


def build_model(folder: Path, cycle: Sequence[int], observations: dict[str, Any]) -> None:
    """Save a bot model to ``folder``: it plays ``cycle[t % len(cycle)]`` at its step ``t``
    (plus argmax ``GOAL`` when it takes a puppeteer's goal) and reads every observation."""
    import dm_env
    import numpy as np

    tf = _tf()
    module = tf.Module()
    module.cycle = tf.Variable(np.asarray(cycle, dtype=np.int32))
    key = tf.TensorSpec([2], tf.uint32)
    state = tf.TensorSpec([], tf.int32)
    timestep = dm_env.TimeStep(step_type=tf.TensorSpec([], tf.int32),
                               reward=tf.TensorSpec([], tf.float64),
                               discount=tf.TensorSpec([], tf.float32),
                               observation=dict(observations))

    @tf.function(input_signature=[key])
    def initial_state(key: Any) -> Any:
        return key, tf.constant(0, tf.int32)

    @tf.function(input_signature=[key, timestep, state])
    def step(key: Any, timestep: Any, prev_state: Any) -> Any:
        action = tf.gather(module.cycle, tf.math.floormod(prev_state, tf.size(module.cycle)))
        if "GOAL" in timestep.observation:
            action += tf.cast(tf.argmax(timestep.observation["GOAL"]), tf.int32)
        for value in timestep.observation.values():  # every observation reaches the model
            action += tf.cast(tf.reduce_max(tf.cast(value, tf.float32)) * 0.0, tf.int32)
        return key, ((action, {"step": prev_state}), prev_state + 1)

    def params(*names: str) -> list[tuple[Any, Any]]:
        return [(tf.constant(name.encode()), tf.constant(1)) for name in names]  # positional

    @tf.function(input_signature=[])
    def function_signatures() -> Any:
        return {"initial_state": params("key"), "step": params("key", "timestep", "prev_state")}

    @tf.function(input_signature=[])
    def function_tables() -> Any:
        return {}

    module.initial_state = initial_state
    module.step = step
    module.function_signatures = function_signatures
    module.function_tables = function_tables
    tf.saved_model.save(module, str(folder))


def _actions(substrate: str) -> list[str]:
    return [a.name for a in task_spec(substrate).actions]


def harvest_assets(root: Path, skip: Iterable[str] = ()) -> dict[str, str]:
    """``root/assets/saved_models`` with the models of HARVEST's bots: free_0 turns right,
    free_1 turns left. Returns bot name -> its action name."""
    names = _actions("commons_harvest__open")
    plays = {"commons_harvest__open__free_0": "TURN_RIGHT",
             "commons_harvest__open__free_1": "TURN_LEFT"}
    assert set(scenario_configs()[HARVEST].bots_by_role["default"]) == set(plays)
    specs = _observation_specs("commons_harvest__open",
                               ("RGB", "READY_TO_SHOOT", "COLLECTIVE_REWARD"))
    for bot, action in plays.items():
        if bot not in skip:
            build_model(root / "assets" / "saved_models" / bot_spec(bot).model,
                        [names.index(action)], specs)
    return plays


def dilemma_assets(root: Path) -> None:
    """The one model of DILEMMA's four puppet bots (puppet_1), taking the puppeteer's GOAL."""
    bots = scenario_configs()[DILEMMA].bots_by_role["default"]
    models = {bot_spec(b).model for b in bots}
    assert models == {"prisoners_dilemma_in_the_matrix__repeated/puppet_1"}
    build_model(root / "assets" / "saved_models" / models.pop(), [PUPPET_BASE],
                _observation_specs("prisoners_dilemma_in_the_matrix__repeated",
                                   ("RGB", "INVENTORY", "READY_TO_SHOOT",
                                    "INTERACTION_INVENTORIES", "GOAL")))


def tarball(root: Path) -> Path:
    """Tar ``root/assets`` as Melting Pot's assets tarball (members under ``assets/``)."""
    path = root / "meltingpot-assets-2.3.0.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        tar.add(root / "assets", arcname="assets")
    return path


def expected_bots(scenario: str, seed: int) -> dict[str, str]:
    """The bots the family samples for ``seed``: per bot slot in order, one of the sorted
    names of its role, from ``random.Random(seed)`` (bots.py)."""
    config = scenario_configs()[scenario]
    rng = random.Random(seed)
    found = {}
    for i, focal in enumerate(config.is_focal):
        if not focal:
            found[f"player_{i}"] = rng.choice(sorted(config.bots_by_role[config.roles[i]]))
    return found


@pytest.fixture(scope="module")
def harvest_tarball(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("harvest")
    plays = harvest_assets(root)
    return tarball(root), plays


# -- over gRPC ------------------------------------------------------------------------------


async def test_scenario_episodes_over_grpc_with_the_bots_of_the_tarball(
        harvest_tarball: tuple[Path, dict[str, str]]) -> None:
    path, plays = harvest_tarball
    seeds = (0, 1, 2, 5)
    sampled = {seed: expected_bots(HARVEST, seed) for seed in seeds}
    # the seeds cover both bots (with replacement: a slot pair may repeat a bot)
    assert {b for bots in sampled.values() for b in bots.values()} == set(plays)
    # the server offers the folder holding the tarball (--meltingpot-assets); Opens name it
    offered = ServerFiles({"meltingpot_assets": path.parent})
    async with env_server(("meltingpot",), files=offered) as srv:
        client = EnvClient(srv.target)
        listed = {t.task: t for t in await client.list_tasks("meltingpot")}
        assert listed[HARVEST].unavailable == package.NEEDS_ASSETS  # no server-wide assets
        for seed in seeds:
            session = client.session()
            request = env_pb.OpenRequest(task=f"meltingpot:{HARVEST}", seed=seed, max_steps=6,
                                         observation=env_pb.ObservationOptions(
                                             include_tensors=True))
            request.options.update({"assets": path.name})
            opened = await session.open(request)
            seats = [f"player_{i}" for i in range(5)]
            assert sorted(opened.agents) == seats and opened.max_steps == 6
            start = opened.agents["player_0"]
            assert "commons_harvest__open_0" in start.instruction
            assert "background bots play the other slots (player_5, player_6)" in \
                start.instruction
            text = start.observation.text["long_term_context"]
            assert text.startswith("You are player_0 (7 players).") and "x=" not in text
            assert set(start.observation.tensors) == {"READY_TO_SHOOT", "COLLECTIVE_REWARD"}
            names = [a.name for a in start.action_space.actions]
            rng = random.Random(seed)  # random focal seats
            steps = 0
            while True:
                step = await session.step({a: text_action(rng.choice(names)) for a in seats})
                steps += 1
                if step.HasField("episode_end"):
                    break
            end = step.episode_end
            assert steps == end.num_steps == 6
            assert end.reason == types_pb2.END_REASON_TRUNCATED
            assert sorted(end.returns) == seats
            metrics = dict_from_struct(end.metrics)
            assert metrics["scenario"] == HARVEST and sorted(metrics["returns"]) == seats
            assert metrics["per_capita_return"] == pytest.approx(
                sum(metrics["returns"].values()) / 5)
            background = metrics["background"]
            assert {k: v["bot"] for k, v in background.items()} == sampled[seed], seed
            for slot, bot in sampled[seed].items():
                # every step, the model's action: 6 of them, all its one action
                assert background[slot]["actions"] == {plays[bot]: 6}, (seed, slot)
                assert background[slot]["role"] == "default"
            await session.close()


async def test_a_missing_model_and_unreadable_assets_refuse_the_open_naming_the_path(
        tmp_path: Path) -> None:
    harvest_assets(tmp_path, skip=("commons_harvest__open__free_1",))
    path = tarball(tmp_path)
    bad = tmp_path / "meltingpot-assets-broken.tar.gz"
    bad.write_bytes(b"not a tarball")
    async with env_server(("meltingpot",), files=ServerFiles({"meltingpot_assets": tmp_path}),
                          ) as srv:
        client = EnvClient(srv.target)
        for assets, words in (
                (path, f"bot commons_harvest__open__free_1: its saved model is missing from "
                       f"the assets: no {path.resolve()} (member assets/saved_models/"
                       "commons_harvest__open/free_1/saved_model.pb)"),
                (tmp_path / "assets", "bot commons_harvest__open__free_1: its saved model is "
                 "missing from the assets: no "
                 f"{(tmp_path / 'assets/saved_models/commons_harvest__open/free_1').resolve()}"
                 "/saved_model.pb"),
                (bad, f"the assets {bad.resolve()} are not a tar archive")):
            request = env_pb.OpenRequest(task=HARVEST, seed=1)
            request.options.update({"assets": assets.name})
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await client.session().open(request)
            assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert words in err.value.details(), err.value.details()


# -- in-process -----------------------------------------------------------------------------


def test_the_bots_turn_in_the_engine_as_their_model_says(tmp_path: Path) -> None:
    """Focal players stay still (NOOP): every bot turns right (free_0) or left (free_1) one
    quarter each step, read from the engine's own ORIENTATION of the bot's avatar. The assets
    are the extracted folder here (its parent also works)."""
    plays = harvest_assets(tmp_path)
    family = MeltingPotFamily()
    for assets in (tmp_path / "assets", tmp_path):
        game = family.open(HARVEST, GameOptions(seed=3, max_steps=8,
                                                kwargs={"assets": str(assets)}))
        try:
            game.reset()
            bots = expected_bots(HARVEST, 3)
            turn = {"TURN_RIGHT": 1, "TURN_LEFT": -1}

            def facing(slot: str, game: Any = game) -> int:  # the engine's, of its avatar
                engine = game._obs
                return int(engine[f"{int(slot.split('_')[1]) + 1}.ORIENTATION"])

            before = {slot: facing(slot) for slot in bots}
            for _ in range(8):
                result = game.step({a: "NOOP" for a in game.agents})
                for slot, bot in bots.items():
                    assert facing(slot) == (before[slot] + turn[plays[bot]]) % 4, (slot, bot)
                    before[slot] = facing(slot)
            assert result.done and result.metrics["background"]["player_5"]["bot"] == \
                bots["player_5"]
        finally:
            game.close()


def test_puppet_bots_play_their_puppeteers_goal(tmp_path: Path) -> None:
    """The prisoner's dilemma scenario's bots are one model driven by puppeteers (cooperator
    or defector specialists): the model adds the goal index to its action, so a cooperator
    (collect goal 0) plays action PUPPET_BASE and a defector PUPPET_BASE + 1 while it
    collects."""
    dilemma_assets(tmp_path)
    path = tarball(tmp_path)
    names = _actions("prisoners_dilemma_in_the_matrix__repeated")
    family = MeltingPotFamily()
    seen = set()
    for seed in range(4):
        game = family.open(DILEMMA, GameOptions(seed=seed, max_steps=4,
                                                kwargs={"assets": str(path)}))
        try:
            assert game.agents == ["player_0"]
            game.reset()
            for _ in range(4):
                result = game.step({"player_0": "NOOP"})
            bot = expected_bots(DILEMMA, seed)["player_1"]
            played = result.metrics["background"]["player_1"]
            assert played["bot"] == bot
            goal = 0 if "cooperator" in bot else 1
            assert played["actions"] == {names[PUPPET_BASE + goal]: 4}, (seed, bot, played)
            seen.add(goal)
            assert list(result.metrics["returns"]) == ["player_0"]
        finally:
            game.close()
    assert seen == {0, 1}


def test_the_reasons_without_tensorflow_or_assets(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    monkeypatch.delenv(package.ASSETS_ENV, raising=False)
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "tensorflow" else real(name, *a))
    family = MeltingPotFamily()
    listed = {t.task: t.unavailable for t in family.list_tasks()}
    assert listed[HARVEST] == package.NEEDS_ASSETS_AND_TENSORFLOW
    with pytest.raises(TaskUnavailableError) as err:
        family.open(HARVEST, GameOptions(seed=0, kwargs={"assets": str(tmp_path)}))
    assert err.value.reason == package.NEEDS_TENSORFLOW
    assert "meltingpot-scenarios" in package.NEEDS_TENSORFLOW

    monkeypatch.setattr(importlib.util, "find_spec", real)  # tensorflow, no assets
    family = MeltingPotFamily()
    listed = {t.task: t.unavailable for t in family.list_tasks()}
    served = [s.name for s in scenario_specs().values() if s.served]
    assert {listed[name] for name in served} == {package.NEEDS_ASSETS}
    assert "meltingpot_kwargs.assets=PATH" in package.NEEDS_ASSETS
    assert package.ASSETS_ENV in package.NEEDS_ASSETS
    with pytest.raises(TaskUnavailableError) as err:
        family.open(HARVEST, GameOptions(seed=0))
    assert err.value.reason == package.NEEDS_ASSETS
    folder = tmp_path / "empty"
    folder.mkdir()
    with pytest.raises(TaskUnavailableError) as err:
        family.open(HARVEST, GameOptions(seed=0, kwargs={"assets": str(folder)}))
    assert err.value.reason.startswith(f"the assets folder {folder.resolve()} holds no "
                                       "saved_models folder")


def test_server_wide_assets_list_the_served_scenarios_as_available(
        monkeypatch: pytest.MonkeyPatch, harvest_tarball: tuple[Path, dict[str, str]]) -> None:
    path, _ = harvest_tarball
    monkeypatch.setenv(package.ASSETS_ENV, str(path))
    family = MeltingPotFamily()
    listed = {t.task: t for t in family.list_tasks()}
    served = [s for s in scenario_specs().values() if s.substrate in SUBSTRATES]
    others = [s for s in scenario_specs().values() if s.substrate not in SUBSTRATES]
    assert len(served) == 194 and len(others) == 118
    assert all(listed[s.name].unavailable == "" for s in served)
    assert all(listed[s.name].unavailable == NOT_SERVED for s in others)
    game = family.open(HARVEST, GameOptions(seed=2, max_steps=2))  # the server's assets
    try:
        game.reset()
        result = game.step({a: "NOOP" for a in game.agents})
        assert set(result.metrics["background"]) == {"player_5", "player_6"}
    finally:
        game.close()
    with pytest.raises(TaskUnavailableError) as err:
        family.open("territory__rooms_0", GameOptions(seed=0))
    assert err.value.reason == NOT_SERVED


async def test_moria_eval_plays_a_scenario_on_a_server_with_the_assets(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        harvest_tarball: tuple[Path, dict[str, str]]) -> None:
    """The documented run: the env server knows the assets (MORIA_MELTINGPOT_ASSETS), so its
    ListTasks offers the scenario, the preflight passes, and random focal seats play it."""
    import json

    from tests.integration.test_run_outcomes import moria
    from tests.support.servers import policy_server

    path, plays = harvest_tarball
    monkeypatch.setenv(package.ASSETS_ENV, str(path))
    async with env_server(("meltingpot",)) as env, policy_server() as pol:
        code, _, err = await moria(
            "eval", "agent.type=random", "envs.names=meltingpot",
            f"tasks.meltingpot_tasks=[{HARVEST}]", "eval.num_episodes.meltingpot=2",
            "eval.max_steps_per_episode=3", "eval.output_dir=out",
            f"endpoints.env.meltingpot=[{env.target}]", f"endpoints.policy=[{pol.target}]",
            "--no-progress", cwd=tmp_path, timeout=300)
    assert code == 0, err[-3000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["episodes_played"] == 2, summary
    found = [json.loads(p.read_text()) for p in (tmp_path / "out").rglob("*.json")]
    texts = [json.dumps(f) for f in found]
    assert sum('"background"' in t for t in texts) >= 2, [p.name for p in
                                                         (tmp_path / "out").rglob("*.json")]
    assert any(f'"{plays["commons_harvest__open__free_0"]}": 3' in t
               or f'"{plays["commons_harvest__open__free_1"]}": 3' in t for t in texts)


async def test_moria_eval_with_the_assets_option_starts_its_env_server_with_them(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        harvest_tarball: tuple[Path, dict[str, str]]) -> None:
    """The issue's form: only ``envs.meltingpot_kwargs.assets=PATH`` on the command line, no
    variable set and no endpoints: ``moria eval`` starts its own env server with
    ``MORIA_MELTINGPOT_ASSETS`` (the manifest's ``server_env``), so the preflight passes."""
    import json

    from tests.integration.test_run_outcomes import moria

    path, _ = harvest_tarball
    monkeypatch.delenv(package.ASSETS_ENV, raising=False)
    code, _, err = await moria(
        "eval", "agent.type=random", "envs.names=meltingpot",
        f"tasks.meltingpot_tasks=[{HARVEST}]", "eval.num_episodes.meltingpot=1",
        "eval.max_steps_per_episode=2", "eval.output_dir=out",
        f"envs.meltingpot_kwargs.assets={path}", "--no-progress", cwd=tmp_path, timeout=300)
    assert code == 0, err[-3000:]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["episodes_played"] == 1, summary
