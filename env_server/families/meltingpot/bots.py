"""Melting Pot's background bots, run inside the env server for the scenarios.

A scenario (``meltingpot.configs.scenarios.ScenarioConfig``) fills each of its substrate's
player slots either with a focal player (a seat of the Moria game) or with a bot sampled from
the bots its config names for the slot's role. A bot (``meltingpot.configs.bots.BotConfig``) is
a TensorFlow saved model at ``saved_models/<substrate>/<model>`` inside Melting Pot's assets,
optionally driven by a puppeteer (which adds a ``GOAL`` observation). ``noop_bot`` plays action 0
(``NOOP``) without a model.

Reference behaviour (dm-meltingpot 2.4.1), rewritten here because ``meltingpot.scenario`` and
``meltingpot.utils.scenarios`` import chex/jax and reactivex, which the family avoids:

- which slots are bots, their roles and the candidate bots per role: the scenario config
  (``meltingpot/configs/scenarios/__init__.py``); no permutation of slots (2.4.1 has none);
- each episode, every bot slot samples, with replacement, one of the sorted names of its role
  (``Population._sample_names``, ``meltingpot/utils/scenarios/population.py``); Melting Pot
  uses Python's global ``random``, this module a ``random.Random`` seeded with the episode
  seed, so the sampled population follows the seed;
- a bot's timestep: its own reward, the step type, the discount and its observation, the
  substrate's individual observations (``RGB`` is the substrate's own window) plus the global
  ones and ``COLLECTIVE_REWARD`` (the sum of every player's reward), as
  ``meltingpot/utils/substrates/substrate.py`` builds them and ``scenario.py``
  (``_split_timestep``) passes them, unfiltered, to the bots;
- a saved-model bot: ``initial_state(key)`` with key ``[0, 32 random bits]`` and
  ``step(key, timestep, state) -> (key, ((action, _), state))`` through the package's
  ``PermissiveModel`` (``meltingpot/utils/policies/saved_model_policy.py``, the TF2 policy),
  observations cast to 32 bits first; the random bits come from the seeded generator here;
- a puppet bot: the puppeteer's ``step`` turns the timestep into the puppet's
  (``meltingpot/utils/policies/puppet_policy.py``); the puppeteers are the package's
  (``meltingpot/utils/puppeteers``; the matrix games' ones draw from Python's global
  ``random`` as in Melting Pot).

Bots act one after another in slot order (Melting Pot steps them in a thread pool); each
loaded model is shared, behind a lock, by every slot and game of the process that uses it
(Melting Pot shares one policy per bot name within a scenario).

Assets: ``Assets`` reads a tarball (``meltingpot-assets-<version>.tar.gz``, members under
``assets/saved_models/``) or an extracted folder (the ``assets`` folder, its parent, or the
``saved_models`` folder itself). From a tarball only the models a scenario needs are extracted,
once per process, into a temporary folder removed at exit.
"""

from __future__ import annotations

import atexit
import importlib
import os
import random
import re
import shutil
import tarfile
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

import dm_env
import numpy as np

from env_server.families.meltingpot import substrates
from env_server.families.meltingpot.package import modules
from env_server.families.meltingpot.substrates import crop_rgb

#: ``meltingpot.bot.NOOP_BOT_NAME``: the bot that always plays action ``NOOP_ACTION``
NOOP_BOT = "noop_bot"
NOOP_ACTION = 0
#: a saved model folder holds this file (TensorFlow's SavedModel format)
SAVED_MODEL_FILE = "saved_model.pb"
_SAVED_MODELS = re.compile(r"(?:^|/)saved_models/(.+)$")


class AssetsError(ValueError):
    """The assets cannot serve a scenario: unreadable, not in Melting Pot's layout, or a bot's
    saved model is missing (the message names the path looked at)."""


@dataclass(frozen=True)
class BotSpec:
    """One bot of ``meltingpot.configs.bots.BOT_CONFIGS``: ``model`` is its saved model's path
    relative to the assets' ``saved_models`` folder (``<substrate>/<model>``; "" for
    ``noop_bot``), ``puppeteer`` the config's puppeteer builder (None for a plain model)."""

    name: str
    model: str
    puppeteer: Callable[[], Any] | None = None


def bot_spec(name: str) -> BotSpec:
    """The ``BotSpec`` of a bot named by a scenario config. Raises KeyError for an unknown
    name. The config's ``model_path`` points into the installed package's (empty) assets; the
    part after its ``MODELS_ROOT`` is kept (``meltingpot/configs/bots/__init__.py``)."""
    if name == NOOP_BOT:
        return BotSpec(name=name, model="")
    modules()
    bots = importlib.import_module("meltingpot.configs.bots")
    config = bots.BOT_CONFIGS[name]
    model = os.path.relpath(config.model_path, bots.MODELS_ROOT).replace(os.sep, "/")
    return BotSpec(name=name, model=model, puppeteer=config.puppeteer_builder)


# -- assets ---------------------------------------------------------------------------------

_LOCK = threading.Lock()
_EXTRACTED: dict[tuple[str, int, int], tuple[Path, set[str]]] = {}
_SCRATCH: list[Path] = []


def _scratch() -> Path:
    """This process's folder for models extracted from tarballs (removed at exit)."""
    if not _SCRATCH:
        folder = Path(tempfile.mkdtemp(prefix="moria-meltingpot-assets-"))
        _SCRATCH.append(folder)
        atexit.register(shutil.rmtree, folder, True)
    return _SCRATCH[0]


class Assets:
    """Melting Pot's assets at ``path`` (a tarball or a folder; module doc).

    Raises AssetsError when the path is neither a readable tar archive nor a folder holding
    a ``saved_models`` folder."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path).expanduser().resolve()
        self.tarball = self.path.is_file()
        if self.tarball:
            try:
                readable = tarfile.is_tarfile(self.path)
            except OSError as exc:
                raise AssetsError(f"cannot read the assets tarball {self.path}: {exc}") from None
            if not readable:
                raise AssetsError(f"the assets {self.path} are not a tar archive (expected "
                                  "Melting Pot's meltingpot-assets-<version>.tar.gz or its "
                                  "extracted folder)")
        elif not self.path.is_dir():
            raise AssetsError(f"the assets {self.path} are neither a tarball nor a folder")
        else:
            for root in (self.path / "saved_models", self.path / "assets" / "saved_models",
                         self.path):
                if root.name == "saved_models" and root.is_dir():
                    self._root = root
                    break
            else:
                raise AssetsError(f"the assets folder {self.path} holds no saved_models folder "
                                  f"(expected {self.path / 'saved_models'} or "
                                  f"{self.path / 'assets' / 'saved_models'}, the layout of "
                                  "Melting Pot's assets)")

    def where(self, model: str) -> str:
        """Where ``model`` (``<substrate>/<model>``) is looked for, for messages."""
        if self.tarball:
            return f"{self.path} (member assets/saved_models/{model}/{SAVED_MODEL_FILE})"
        return str(self._root / model / SAVED_MODEL_FILE)

    def model_dirs(self, bots: Iterable[BotSpec]) -> dict[str, Path]:
        """bot name -> the folder of its saved model, extracting it from a tarball first.

        Raises AssetsError naming the bot and the path looked at when a model is missing (no
        ``saved_model.pb``), or when the tarball cannot be read."""
        wanted = {b.name: b.model for b in bots if b.model}
        root = self._extract(set(wanted.values())) if self.tarball else self._root
        found = {}
        for name, model in sorted(wanted.items()):
            folder = root / model
            if not (folder / SAVED_MODEL_FILE).is_file():
                raise AssetsError(f"bot {name}: its saved model is missing from the assets: "
                                  f"no {self.where(model)}")
            found[name] = folder
        return found

    def _extract(self, models: set[str]) -> Path:
        """Extract the members of ``models`` (once per tarball version and process) and return
        the ``saved_models`` folder they are in."""
        stat = self.path.stat()
        key = (str(self.path), stat.st_size, stat.st_mtime_ns)
        with _LOCK:
            if key not in _EXTRACTED:
                folder = Path(tempfile.mkdtemp(prefix="assets-", dir=_scratch()))
                _EXTRACTED[key] = (folder / "saved_models", set())
            root, done = _EXTRACTED[key]
            todo = models - done
            if not todo:
                return root
            try:
                with tarfile.open(self.path, "r:*") as tar:
                    for member in tar:
                        match = _SAVED_MODELS.search(member.name)
                        if not match or not member.isfile():
                            continue
                        relative = PurePosixPath(match.group(1))
                        if ".." in relative.parts or not any(
                                str(relative).startswith(m + "/") for m in todo):
                            continue
                        target = root.joinpath(*relative.parts)
                        target.parent.mkdir(parents=True, exist_ok=True)
                        source = tar.extractfile(member)
                        assert source is not None  # a regular file
                        with source, open(target, "wb") as out:
                            shutil.copyfileobj(source, out)
            except (tarfile.TarError, OSError, EOFError) as exc:
                raise AssetsError(f"cannot read the assets tarball {self.path}: {exc}") from None
            done.update(todo)
            return root


# -- policies -------------------------------------------------------------------------------


class Policy(Protocol):
    """What a bot does (``meltingpot/utils/policies/policy.py``, with the random key of the
    initial state given)."""

    def initial_state(self, key: int) -> Any: ...

    def step(self, timestep: Any, state: Any) -> tuple[int, Any]: ...


def _downcast(value: Any) -> Any:
    """64-bit floats and ints to 32 bits, as ``saved_model_policy._downcast``."""
    if isinstance(value, np.ndarray):
        if value.dtype == np.float64:
            return value.astype(np.float32)
        if value.dtype == np.int64:
            return value.astype(np.int32)
    return value


class SavedModelBot:
    """A saved model (``TF2SavedModelPolicy`` of ``saved_model_policy.py``): loaded on the CPU
    and called through the package's ``PermissiveModel``, which drops the observations the
    model does not take. Thread-safe (one lock per model)."""

    def __init__(self, folder: Path):
        tf = importlib.import_module("tensorflow")
        modules()
        permissive = importlib.import_module("meltingpot.utils.policies.permissive_model")
        with tf.device("/cpu:0"):
            self._model = permissive.PermissiveModel(tf.saved_model.load(str(folder)))
        self._lock = threading.Lock()

    def initial_state(self, key: int) -> Any:
        """``(key, state)`` of the model's ``initial_state([0, key])``."""
        with self._lock:
            next_key, state = self._model.initial_state(np.array([0, key], dtype=np.uint32))
        return next_key, state

    def step(self, timestep: Any, state: Any) -> tuple[int, Any]:
        """The model's action (an index into the substrate's action set) and next state."""
        key, inner = state
        timestep = timestep._replace(
            step_type=int(timestep.step_type),
            observation={k: _downcast(v) for k, v in timestep.observation.items()})
        with self._lock:
            next_key, outputs = self._model.step(key, timestep, inner)
        (action, _), next_state = outputs
        return int(np.asarray(action)), (next_key, next_state)


class PuppetBot:
    """A puppeteer driving a model (``puppet_policy.PuppetPolicy``)."""

    def __init__(self, puppeteer: Any, puppet: Policy):
        self._puppeteer = puppeteer
        self._puppet = puppet

    def initial_state(self, key: int) -> Any:
        return self._puppeteer.initial_state(), self._puppet.initial_state(key)

    def step(self, timestep: Any, state: Any) -> tuple[int, Any]:
        puppeteer_state, puppet_state = state
        timestep, puppeteer_state = self._puppeteer.step(timestep, puppeteer_state)
        action, puppet_state = self._puppet.step(timestep, puppet_state)
        return action, (puppeteer_state, puppet_state)


class FixedBot:
    """``noop_bot``: always the same action (``fixed_action_policy.FixedActionPolicy``)."""

    def __init__(self, action: int = NOOP_ACTION):
        self._action = action

    def initial_state(self, key: int) -> Any:
        return ()

    def step(self, timestep: Any, state: Any) -> tuple[int, Any]:
        return self._action, state


_MODELS: dict[str, SavedModelBot] = {}
_LOAD_LOCK = threading.Lock()


def load_model(folder: Path) -> SavedModelBot:
    """The saved model in ``folder``, loaded once per process."""
    key = str(folder.resolve())
    with _LOAD_LOCK:
        if key not in _MODELS:
            _MODELS[key] = SavedModelBot(folder)
        return _MODELS[key]


# -- the background population ---------------------------------------------------------------


class Population:
    """The bots of one scenario game: the slots that are not focal, their roles, and the bots
    each role samples from (module doc).

    ``config``: the scenario's ``ScenarioConfig``; ``spec``: its substrate's ``TaskSpec``;
    ``assets``: the assets path. Loads (or reuses) every candidate bot's model now. Raises
    AssetsError (bad assets, a missing model naming its path) and ModuleNotFoundError (no
    tensorflow)."""

    def __init__(self, config: Any, spec: substrates.TaskSpec, assets: str):
        self.slots = [i for i, focal in enumerate(config.is_focal) if not focal]
        self.roles = {i: str(config.roles[i]) for i in self.slots}
        self._names = {role: tuple(sorted(config.bots_by_role[role]))
                       for role in sorted(set(self.roles.values()))}
        specs = {n: bot_spec(n) for names in self._names.values() for n in names}
        folders = Assets(assets).model_dirs(specs.values()) if any(
            s.model for s in specs.values()) else {}
        self._spec = spec
        self._global = tuple(modules().configs.get_config(spec.name).global_observation_names)
        self._models = {name: load_model(folder) for name, folder in folders.items()}
        self._puppeteers = {name: s.puppeteer for name, s in specs.items()}
        self._policies: dict[int, Policy] = {}
        self._states: dict[int, Any] = {}
        self.sampled: dict[int, str] = {}
        self.actions: dict[int, Counter[str]] = {}

    def _policy(self, name: str) -> Policy:
        if name == NOOP_BOT:
            return FixedBot()
        builder = self._puppeteers[name]
        model = self._models[name]
        return PuppetBot(builder(), model) if builder else model

    def reset(self, seed: int) -> None:
        """Sample each slot's bot and its initial state from ``seed`` (module doc)."""
        rng = random.Random(seed)
        self.sampled = {i: rng.choice(self._names[self.roles[i]]) for i in self.slots}
        self._policies = {i: self._policy(name) for i, name in self.sampled.items()}
        self._states = {i: policy.initial_state(rng.getrandbits(32))
                        for i, policy in self._policies.items()}
        self.actions = {i: Counter() for i in self.slots}

    def observation(self, obs: Mapping[str, Any], index: int,
                    rewards: Sequence[float]) -> dict[str, Any]:
        """Bot ``index``'s observation (module doc): the substrate's individual observations
        (``RGB`` cut back to the substrate's window), the global ones, ``COLLECTIVE_REWARD``."""
        found: dict[str, Any] = {}
        for name in self._spec.observations:
            key = f"{index + 1}.{name}"
            if name == "RGB":
                found[name] = crop_rgb(np.asarray(obs[key]), self._spec.radius, self._spec.view)
            elif key in obs:
                found[name] = np.asarray(obs[key])
        for name in self._global:
            found[name] = np.asarray(obs[name])
        found["COLLECTIVE_REWARD"] = np.asarray(sum(rewards), dtype=np.float64)
        return found

    def act(self, obs: Mapping[str, Any], first: bool, rewards: Sequence[float],
            action_names: Sequence[str]) -> dict[int, int]:
        """Every bot's action (player index -> index into the action set) for the timestep
        ``obs`` (``first``: the episode's first timestep, dm_env's ``FIRST``, else ``MID``);
        ``rewards``: every player's reward of the last step."""
        chosen = {}
        for index, policy in self._policies.items():
            timestep = dm_env.TimeStep(
                step_type=dm_env.StepType.FIRST if first else dm_env.StepType.MID,
                reward=np.asarray(rewards[index], dtype=np.float64),
                discount=0.0 if first else 1.0,
                observation=self.observation(obs, index, rewards))
            action, self._states[index] = policy.step(timestep, self._states[index])
            if not 0 <= action < len(action_names):
                raise RuntimeError(f"bot {self.sampled[index]} (player_{index}) chose action "
                                   f"{action}; the substrate has {len(action_names)}")
            chosen[index] = action
            self.actions[index][action_names[action]] += 1
        return chosen
