"""One Melting Pot substrate episode: every player acts at once, every step.

Agents are ``player_0`` .. ``player_{n-1}``: ``player_i`` is the substrate's player ``i`` (Lua
index ``i + 1``). ``step`` takes one action per player, by name or index into the substrate's
action set (an invalid answer becomes ``NOOP``, ``valid=False``), and sends the dmlab2d action
of each to the env (``<i>.move``, ``<i>.turn``, ``<i>.fireZap``, ...), as the package's
multi-player wrappers do.

Views: ``long_term_context`` is ``text.describe`` (the decoded view, the players and things in
it, position, facing, rewards, the permitted scalar observations); the short-term text is empty.
``image`` (when asked): the player's own ``RGB`` observation, cut back to the substrate's window
(``crop_rgb``). Tensors: the permitted scalar/vector observations (``READY_TO_SHOOT``,
``INVENTORY``, ...) and ``POSITION``/``ORIENTATION``. Info: ``position``, ``orientation``,
``on_map`` and, with ``oracle``, ``expert_action`` (``oracle.expert_action``).

Rewards: the substrate's ``<i>.REWARD`` each step. Metrics (running and final): ``returns``
(per player), ``collective_return`` (their sum), ``per_capita_return``, ``events`` (the
substrate's event counts: ``edible_consumed``, ``zap``, ``player_cleaned``, ...), ``steps``,
``end_reason`` (``substrate`` when the substrate ended the episode, ``step_limit``, or "") and
``progression``: the share of players whose return is above 0.

Scenarios (``scenario`` and ``background`` given, ``family.open``): the seats are the
scenario's focal players, still named after their substrate slot (``player_<i>``); the other
slots are played by ``bots.Population`` inside the game, which picks their actions from the
current observation before each step. A seat then sees only Melting Pot's permitted scenario
observations (``SCENARIO_PERMITTED``, ``meltingpot/scenario.py``) and ``COLLECTIVE_REWARD`` (the
sum of every player's reward, bots included); its text says no absolute position and its
tensors/info carry no ``POSITION``/``ORIENTATION``. ``returns``, ``collective_return``,
``per_capita_return`` and ``progression`` are the focal players' (Melting Pot scores a
scenario by the focal per-capita return); the bots' are under ``background``.

Determinism: the dmlab2d seeds come from the episode seed, but Melting Pot's Lua engine does not
replay an episode from its seed (two envs built with the same seed diverge, within one process
too): see docs/families/meltingpot.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from env_server.families.meltingpot import oracle, substrates
from env_server.families.meltingpot.instruction import build_instruction
from env_server.families.meltingpot.package import modules
from env_server.families.meltingpot.substrates import crop_rgb
from env_server.families.meltingpot.text import SpriteTable, View, decode_view, describe
from env_server.game import AgentTransition, AgentView, GameOptions, StepResult, SubmittedAction
from env_server.simultaneous import SimultaneousGame

if TYPE_CHECKING:
    from env_server.families.meltingpot.bots import Population
    from env_server.families.meltingpot.scenarios import ScenarioSpec

DEFAULT_ACTION = "NOOP"
#: the observations a player may use (Melting Pot's scenario rules); RGB is the image
PERMITTED = ("INVENTORY", "READY_TO_SHOOT", "HUNGER", "MY_OFFER", "OFFERS", "STAMINA", "VOTING",
             "COLLECTIVE_REWARD", "NUM_OTHERS_WHO_CLEANED_THIS_STEP")
#: the observations a focal player of a scenario gets (``PERMITTED_OBSERVATIONS`` of
#: dm-meltingpot 2.4.1's ``meltingpot/scenario.py``); RGB is the image
SCENARIO_PERMITTED = ("INVENTORY", "READY_TO_SHOOT", "HUNGER", "MY_OFFER", "OFFERS", "STAMINA",
                      "VOTING", "COLLECTIVE_REWARD")
_MAX_SEED = 2**32 - 1


def agent_id(index: int) -> str:
    return f"player_{index}"


class MeltingPotGame(SimultaneousGame):
    """A substrate game, or a scenario's (module doc), built by ``MeltingPotFamily.open``; not
    reset yet. ``roles``: one per substrate slot; ``scenario``/``background``: the scenario and
    its bots (both or neither)."""

    def __init__(self, spec: substrates.TaskSpec, options: GameOptions, roles: tuple[str, ...],
                 scenario: ScenarioSpec | None = None, background: Population | None = None):
        self._spec = spec
        self._options = options
        self._roles = roles
        self._scenario = scenario
        self._background = background
        self._settings = substrates.build_settings(spec.name, roles)
        self._table = SpriteTable(substrates.sprite_names(self._settings),
                                  substrates.sprite_layers(self._settings))
        bots = set(background.slots) if background is not None else set()
        #: the substrate slots the seats play, in order
        self._seats = [i for i in range(len(roles)) if i not in bots]
        self._agents = [agent_id(i) for i in self._seats]
        self._actions = list(spec.actions)
        cap = int(options.max_steps) if options.max_steps else spec.max_steps
        self._max_steps = min(cap, spec.max_steps) if spec.max_steps else cap
        self._instructions = {}
        for i, a in zip(self._seats, self._agents, strict=True):
            text = build_instruction(spec, i, len(roles), self._table, self._max_steps)
            if scenario is not None:
                text += "\n\n" + scenario_note(scenario, i, sorted(bots))
            self._instructions[a] = text
        self._env: Any = None
        self._closed = False
        self._obs: Mapping[str, Any] | None = None
        self._done = False
        self._steps = 0
        self._returns = [0.0] * len(roles)
        self._last = [0.0] * len(roles)
        self._events: Counter[str] = Counter()
        self._end_reason = ""

    # -- static facts -------------------------------------------------------------------------

    @property
    def max_steps(self) -> int:
        return self._max_steps

    # -- episode ------------------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> dict[str, AgentView]:
        """Build the substrate afresh with dmlab2d seeds from ``seed`` and start an episode."""
        if self._closed:
            raise RuntimeError("the game is closed")
        seed = self._options.seed if seed is None else seed
        if seed < 0:
            raise ValueError(f"seed must be >= 0, got {seed}")
        if self._env is not None:
            self._env.close()
        self._env = modules().builder.builder(self._settings,
                                              env_seed=int(seed) % _MAX_SEED + 1)
        timestep = self._env.reset()
        self._env.events()  # the avatars' start events are not the episode's
        self._obs = timestep.observation
        self._done = False
        self._steps = 0
        self._events = Counter()
        self._end_reason = ""
        self._returns = [0.0] * len(self._roles)
        self._last = [0.0] * len(self._roles)
        if self._background is not None:
            self._background.reset(int(seed))
        return {a: self._view(i) for i, a in zip(self._seats, self._agents, strict=True)}

    def step(self, actions: Mapping[str, SubmittedAction]) -> StepResult:
        if self._closed:
            raise RuntimeError("the game is closed")
        choices = self._choose_all(actions, started=self._obs is not None)
        assert self._obs is not None  # _choose_all raised otherwise
        names = [a.name for a in self._actions]
        lab2d: dict[str, int] = {}
        chosen: dict[int, int] = {}
        for i, agent in zip(self._seats, self._agents, strict=True):
            chosen[i] = names.index(choices[agent].applied)
        if self._background is not None:
            chosen.update(self._background.act(self._obs, self._steps == 0, self._last, names))
        for i, index in chosen.items():
            for key, value in self._spec.table[index].items():
                lab2d[f"{i + 1}.{key}"] = int(value)
        timestep = self._env.step(lab2d)
        self._obs = timestep.observation
        self._steps += 1
        for name, _ in self._env.events():
            self._events[str(name)] += 1
        for i in range(len(self._roles)):
            reward = float(self._obs[f"{i + 1}.REWARD"])
            self._last[i] = reward
            self._returns[i] += reward
        truncated = self._steps >= self._max_steps
        terminated = bool(timestep.last()) and not truncated
        self._done = terminated or truncated
        if self._done:
            self._end_reason = "step_limit" if truncated else "substrate"
        transitions: dict[str, AgentTransition] = {
            agent: choices[agent].transition(self._view(i), self._last[i],
                                             terminated=terminated, truncated=truncated)
            for i, agent in zip(self._seats, self._agents, strict=True)}
        return self._step_result(transitions)

    def metrics(self) -> dict[str, Any]:
        """The episode's figures (module doc): the seats' returns; for a scenario, also
        ``scenario`` and ``background`` (per bot slot: the sampled bot, its role, its return
        and how often it played each action)."""
        focal = [self._returns[i] for i in self._seats]
        n = len(focal)
        total = float(sum(focal))
        found: dict[str, Any] = {
            "progression": sum(1 for r in focal if r > 0) / n if n else 0.0,
            "substrate": self._spec.name,
            "steps": self._steps,
            "returns": {a: float(self._returns[i])
                        for i, a in zip(self._seats, self._agents, strict=True)},
            "collective_return": total,
            "per_capita_return": total / n if n else 0.0,
            "events": dict(sorted(self._events.items())),
            "roles": {a: self._roles[i] for i, a in zip(self._seats, self._agents, strict=True)},
            "end_reason": self._end_reason,
        }
        if self._scenario is not None and self._background is not None:
            found["scenario"] = self._scenario.name
            found["background"] = {
                agent_id(i): {"bot": self._background.sampled.get(i, ""),
                              "role": self._roles[i], "return": float(self._returns[i]),
                              "actions": dict(sorted(self._background.actions.get(i, {})
                                                     .items()))}
                for i in self._background.slots}
        return found

    def render(self) -> np.ndarray:
        if self._obs is None:
            self.reset()
        assert self._obs is not None
        return np.ascontiguousarray(self._obs["WORLD.RGB"], dtype=np.uint8)

    def close(self) -> None:
        self._closed = True
        env, self._env = self._env, None
        if env is not None:
            env.close()

    # -- helpers ------------------------------------------------------------------------------

    def _default_name(self) -> str:
        return DEFAULT_ACTION

    def decoded(self, index: int) -> View:
        """Player ``index``'s decoded view (also used by the tests)."""
        assert self._obs is not None
        obs = self._obs
        return decode_view(np.asarray(obs[f"{index + 1}.LAYER"]), self._table,
                           int(obs[f"{index + 1}.ORIENTATION"]), self._spec.view, index)

    def _scalars(self, index: int) -> dict[str, np.ndarray]:
        assert self._obs is not None
        permitted = PERMITTED if self._scenario is None else SCENARIO_PERMITTED
        found = {}
        for name in self._spec.observations:
            key = f"{index + 1}.{name}"
            if name in permitted and key in self._obs:
                found[name] = np.asarray(self._obs[key])
        if self._scenario is not None:
            found["COLLECTIVE_REWARD"] = np.asarray(sum(self._last), dtype=np.float64)
        return found

    def _view(self, index: int) -> AgentView:
        assert self._obs is not None
        obs = self._obs
        position = np.asarray(obs[f"{index + 1}.POSITION"], dtype=np.int64)
        orientation = int(obs[f"{index + 1}.ORIENTATION"])
        view = self.decoded(index)
        scalars = self._scalars(index)
        text = describe(player=index, num_players=len(self._roles), step=self._steps,
                        max_steps=self._max_steps, reward=self._last[index],
                        total=self._returns[index], position=[int(p) for p in position],
                        orientation=orientation, view=view, table=self._table,
                        window=self._spec.view, scalars=scalars,
                        show_position=self._scenario is None)
        image = None
        if self._options.render_image:
            image = crop_rgb(np.asarray(obs[f"{index + 1}.RGB"]), self._spec.radius,
                             self._spec.view)
        tensors: dict[str, np.ndarray] = {name: np.asarray(value, dtype=np.float64)
                                          for name, value in scalars.items()}
        info: dict[str, Any] = {"on_map": view.on_grid}
        if self._scenario is None:
            tensors["POSITION"] = position
            tensors["ORIENTATION"] = np.array(orientation, dtype=np.int64)
            info.update(position=[int(position[0]), int(position[1])], orientation=orientation)
        if self._options.oracle:
            seed = self._steps + 7 * int(position[0]) + 13 * int(position[1])
            info["expert_action"] = oracle.expert_action(self._spec, view, self._table, index,
                                                         scalars, seed)
        return AgentView(long_term_context=text, image=image, tensors=tensors, info=info)


def scenario_note(scenario: ScenarioSpec, index: int, bots: list[int]) -> str:
    """The instruction's paragraph on a scenario: what it is and which players are bots."""
    others = ", ".join(agent_id(i) for i in bots) or "none"
    return (f"This is the Melting Pot scenario {scenario.name}: {scenario.summary}. You "
            f"(player_{index}) are one of its {scenario.num_focal} focal players; background "
            f"bots play the other slots ({others}).")
