"""The Melting Pot substrates this family serves, and the settings it builds them with.

A task is a substrate name (``commons_harvest__open``). The family lists the substrates whose
observation text it can decode (``SUBSTRATES``: the social dilemmas first); every one of them is
checked by ``tests/unit/test_meltingpot_text.py``. ``TaskSpec`` holds what the config says: the
players (the substrate's default roles), the step limit (``maxEpisodeLengthFrames``), the named
actions and the player's view window.

``build_settings`` returns the substrate's own lab2d settings with two additions, both made of
the package's own Lua components and options:

- each avatar gets a ``LocationObserver`` (the component the configs add in debug mode), so
  the env reports ``<i>.POSITION`` (x, y) and ``<i>.ORIENTATION`` (0 N, 1 E, 2 S, 3 W);
- each avatar's view is widened to a square of radius ``R = max(left, right, forward,
  backward)`` centred on it. The substrate's ``<i>.LAYER`` observation (the sprite of every
  layer of every cell in the view, always aligned north) then covers the player's real view
  whatever its facing, and the family cuts the player's ``<i>.RGB`` back to the substrate's
  own window (``crop_rgb``); ``tests/unit/test_meltingpot_text.py`` checks that the cut image
  has the shape of the substrate's own ``RGB`` spec. (Its pixels are not compared with an
  unmodified build's: the engine does not replay a seed, and spawn points differ between
  builds.)

Sprite names: the ``LAYER`` observation holds ``4 * k + 1 + orientation`` for the ``k``-th of
the world's sprite names in sorted order (dmlab2d's ``World`` sorts and deduplicates them; 0 is
an empty layer). Those names are every state's sprite, the custom sprites, the beams' hit
sprites and ``OutOfBounds``/``OutOfView`` (``sprite_names``); the beams are added by Lua
components (``HIT_SPRITES``).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

from env_server.families.meltingpot.package import modules
from env_server.game import ActionInfo

#: The substrates listed, in order: the social dilemmas MOSAIC names first (the suite's default
#: tasks), then their variants. Each one's text decoding is checked by the tests.
HEADLINE: tuple[str, ...] = (
    "commons_harvest__open",
    "prisoners_dilemma_in_the_matrix__repeated",
    "stag_hunt_in_the_matrix__repeated",
    "collaborative_cooking__asymmetric",
    "clean_up",
)
SUBSTRATES: tuple[str, ...] = (
    *HEADLINE,
    "commons_harvest__closed",
    "commons_harvest__partnership",
    "chicken_in_the_matrix__repeated",
    "pure_coordination_in_the_matrix__repeated",
    "rationalizable_coordination_in_the_matrix__repeated",
    "bach_or_stravinsky_in_the_matrix__repeated",
    "running_with_scissors_in_the_matrix__repeated",
    "running_with_scissors_in_the_matrix__one_shot",
    "prisoners_dilemma_in_the_matrix__arena",
    "stag_hunt_in_the_matrix__arena",
    "chicken_in_the_matrix__arena",
    "pure_coordination_in_the_matrix__arena",
    "rationalizable_coordination_in_the_matrix__arena",
    "bach_or_stravinsky_in_the_matrix__arena",
    "running_with_scissors_in_the_matrix__arena",
    "collaborative_cooking__circuit",
    "collaborative_cooking__cramped",
    "collaborative_cooking__crowded",
    "collaborative_cooking__figure_eight",
    "collaborative_cooking__forced",
    "collaborative_cooking__ring",
    "coins",
)

#: Sprites that Lua components add to the world as the sprite of a beam's hit, by component
#: name (a function of the component's kwargs and its game object's initial state).
HIT_SPRITES: dict[str, Any] = {
    "Zapper": lambda kwargs, state: ["BeamZap"],
    "AvatarDirectionIndicator": lambda kwargs, state: ["DirectionSprite"],
    "Cleaner": lambda kwargs, state: ["BeamClean"],
    "GameInteractionZapper": lambda kwargs, state: ["BeamInteraction"],
    "InteractBeam": lambda kwargs, state: [f"interact_{state}"],
    "MineBeam": lambda kwargs, state: ["beamMine"],
    "GiftBeam": lambda kwargs, state: ["beamGift"],
}
#: The world's fixed sprites (``base_simulation.lua``)
WORLD_SPRITES = ("OutOfBounds", "OutOfView")

#: action-table key -> what setting it to the value does, for the action descriptions
_MOVES = {1: "step forward one cell", 2: "step one cell to your right (keeping your facing)",
          3: "step back one cell", 4: "step one cell to your left (keeping your facing)"}
_TURNS = {-1: "turn 90 degrees to the left", 1: "turn 90 degrees to the right"}
_FIRE = {
    "fireZap": "fire your zapping beam ahead: a player it hits is frozen (and after two hits "
               "removed for a while)",
    "fireClean": "fire your cleaning beam ahead: it removes pollution from the river",
    "interact": "fire your interaction beam ahead: hitting another player plays one round of "
                "the matrix game with the resources both of you hold",
}


@dataclass(frozen=True)
class TaskSpec:
    """One substrate as the family serves it.

    ``roles``: one role per player (the substrate's defaults); ``max_steps``: its
    ``maxEpisodeLengthFrames``; ``actions``: the named actions in the substrate's action-set
    order, with ``table`` the dmlab2d action of each; ``view``: the Avatar view window
    (``left``, ``right``, ``forward``, ``backward``); ``observations``: the substrate's
    individual observation names (``RGB`` first)."""

    name: str
    roles: tuple[str, ...]
    max_steps: int
    actions: tuple[ActionInfo, ...]
    table: tuple[Mapping[str, int], ...]
    view: Mapping[str, int]
    observations: tuple[str, ...]
    description: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def num_players(self) -> int:
        return len(self.roles)

    @property
    def radius(self) -> int:
        """The radius of the widened, centred view (``build_settings``)."""
        return max(int(self.view[k]) for k in ("left", "right", "forward", "backward"))


def _config_module(name: str) -> list[Any]:
    """The substrate's config module and the config modules it imports (its base)."""
    import importlib

    module = importlib.import_module(f"{modules().configs.__name__}.{name}")
    found = [module]
    for value in vars(module).values():
        if inspect.ismodule(value) and value.__name__.startswith(modules().configs.__name__):
            found.append(value)
    return found


def action_names(name: str, table: Iterable[Mapping[str, int]]) -> list[str]:
    """The name of each action of the substrate's action set: the upper-case constant of its
    config module (or of the base config it imports) equal to it (``NOOP``, ``FORWARD``,
    ``FIRE_ZAP``, ...); an action with no such constant is named ``ACTION_<i>``."""
    constants: dict[tuple[tuple[str, int], ...], str] = {}
    for module in _config_module(name):
        for key, value in vars(module).items():
            if key.isupper() and isinstance(value, Mapping) and value and all(
                    isinstance(v, int) for v in value.values()):
                constants.setdefault(tuple(sorted(value.items())), key)
    names = []
    for i, action in enumerate(table):
        names.append(constants.get(tuple(sorted(action.items())), f"ACTION_{i}"))
    if len(set(names)) != len(names):
        names = [f"{n}_{i}" if names.count(n) > 1 else n for i, n in enumerate(names)]
    return names


def describe_action(action: Mapping[str, int]) -> str:
    """One line on what an action-table entry does."""
    parts = []
    for key, value in action.items():
        if not value:
            continue
        if key == "move":
            parts.append(_MOVES.get(int(value), f"move {value}"))
        elif key == "turn":
            parts.append(_TURNS.get(int(value), f"turn {value}"))
        else:
            parts.append(_FIRE.get(key, f"use {key}"))
    return "; ".join(parts) or "do nothing this step"


def _avatar_view(settings: Any) -> dict[str, int]:
    for obj in avatar_objects(settings):
        for component in obj["components"]:
            if component["component"] == "Avatar":
                return dict(component["kwargs"]["view"])
    raise ValueError("no avatar with a view in the substrate settings")


def raw_settings(name: str, roles: Iterable[str] | None = None) -> Any:
    """The substrate's lab2d settings (a writable ConfigDict) for ``roles`` (default: the
    substrate's default roles), with the avatars built (the builder would build them from the
    ``avatar`` prefab; they are built here so that they can be changed)."""
    from ml_collections import config_dict

    mods = modules()
    config = mods.configs.get_config(name)
    chosen = tuple(roles) if roles is not None else tuple(config.default_player_roles)
    built = config.lab2d_settings_builder(roles=chosen, config=config)
    settings = config_dict.ConfigDict(copy.deepcopy(built)).unlock()
    mods.builder.maybe_build_and_add_avatar_objects(settings)
    prefabs = settings.simulation.get("prefabs")
    if prefabs is not None and "avatar" in prefabs:
        del prefabs["avatar"]  # built above: the builder must not add them twice
    return settings


def avatar_objects(settings: Any) -> list[Any]:
    """The game objects with an ``Avatar`` component, in player order (Lua index 1..n)."""
    found = []
    for obj in settings["simulation"].get("gameObjects", []):
        for component in obj["components"]:
            if component["component"] == "Avatar":
                found.append((int(component["kwargs"]["index"]), obj))
    return [obj for _, obj in sorted(found, key=lambda item: item[0])]


def build_settings(name: str, roles: Iterable[str] | None = None) -> Any:
    """The settings the family plays: the substrate's own plus a ``LocationObserver`` and a
    widened centred view on every avatar (module doc)."""
    settings = raw_settings(name, roles)
    view = _avatar_view(settings)
    radius = max(int(view[k]) for k in ("left", "right", "forward", "backward"))
    for obj in avatar_objects(settings):
        for component in obj["components"]:
            if component["component"] == "Avatar":
                component["kwargs"]["view"] = {"left": radius, "right": radius,
                                               "forward": radius, "backward": radius,
                                               "centered": True}
        obj["components"].append({"component": "LocationObserver",
                                  "kwargs": {"objectIsAvatar": True,
                                             "alsoReportOrientation": True}})
    return settings


def _walk(value: Any, out: set[str]) -> None:
    """Collect sprite names: ``sprite`` strings, ``spriteNames`` and ``customSpriteNames``."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if key == "sprite" and isinstance(item, str):
                out.add(item)
            elif key in ("spriteNames", "customSpriteNames") and isinstance(item, list | tuple):
                out.update(str(s) for s in item)
            else:
                _walk(item, out)
    elif isinstance(value, list | tuple):
        for item in value:
            _walk(item, out)


def _plain(settings: Any) -> Any:
    """Plain dicts and lists for a ConfigDict (which is no Mapping)."""
    return settings.to_dict() if hasattr(settings, "to_dict") else settings


def _initial_state(obj: Mapping[str, Any]) -> str:
    for component in obj.get("components", []):
        if component["component"] == "StateManager":
            return str(component["kwargs"].get("initialState", ""))
    return ""


def sprite_names(settings: Any) -> list[str]:
    """The world's sprite names in dmlab2d's order (sorted, unique; module doc)."""
    names: set[str] = set(WORLD_SPRITES)
    simulation = _plain(settings)["simulation"]
    _walk(simulation.get("gameObjects", []), names)
    _walk(simulation.get("prefabs", {}), names)
    _walk(simulation.get("scene", {}), names)
    objects = list(simulation.get("gameObjects", [])) + list(simulation.get("prefabs", {})
                                                             .values())
    if simulation.get("scene"):
        objects.append(simulation["scene"])
    for obj in objects:
        state = _initial_state(obj)
        for component in obj.get("components", []):
            hits = HIT_SPRITES.get(component["component"])
            if hits is not None:
                names.update(hits(component.get("kwargs", {}), state))
    return sorted(names)


def sprite_layers(settings: Any) -> dict[str, str]:
    """sprite name -> the layer its state draws it on (from the StateManager configs)."""
    layers: dict[str, str] = {}

    def visit(value: Any) -> None:
        if isinstance(value, Mapping):
            if value.get("component") == "StateManager":
                for state in value.get("kwargs", {}).get("stateConfigs", []):
                    if state.get("sprite") and state.get("layer"):
                        layers.setdefault(str(state["sprite"]), str(state["layer"]))
            for item in value.values():
                visit(item)
        elif isinstance(value, list | tuple):
            for item in value:
                visit(item)

    visit(_plain(settings)["simulation"])
    return layers


@cache
def task_spec(name: str) -> TaskSpec:
    """The ``TaskSpec`` of a listed substrate. Raises KeyError for another name."""
    if name not in SUBSTRATES:
        raise KeyError(name)
    config = modules().configs.get_config(name)
    table = tuple(dict(a) for a in config.action_set)
    names = action_names(name, table)
    actions = tuple(ActionInfo(n, describe_action(a)) for n, a in zip(names, table, strict=True))
    settings = raw_settings(name)
    roles = tuple(config.default_player_roles)
    return TaskSpec(
        name=name, roles=roles, max_steps=int(settings.get("maxEpisodeLengthFrames", 0) or 0),
        actions=actions, table=table, view=_avatar_view(settings),
        observations=tuple(config.individual_observation_names),
        description=f"Melting Pot substrate, {len(roles)} players")


def crop_rgb(rgb: np.ndarray, radius: int, window: Mapping[str, int]) -> np.ndarray:
    """The substrate's own view out of the widened, centred one: ``forward`` rows above the
    player's row and ``backward`` below, ``left``/``right`` columns beside it."""
    size = rgb.shape[0] // (2 * radius + 1)
    top = (radius - int(window["forward"])) * size
    bottom = (radius + int(window["backward"]) + 1) * size
    left = (radius - int(window["left"])) * size
    right = (radius + int(window["right"]) + 1) * size
    return np.ascontiguousarray(rgb[top:bottom, left:right], dtype=np.uint8)
