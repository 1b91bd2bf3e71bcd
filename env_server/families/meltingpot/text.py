"""The text a Melting Pot player reads, decoded from the substrate's own observations.

Sources (all per player, from the env built by ``substrates.build_settings``):

- ``<i>.LAYER``: for every cell of a square of radius R around the player (always aligned north:
  row 0 is the northernmost, column 0 the westernmost) the sprite on each render layer,
  encoded ``4 * k + 1 + orientation`` for the k-th of the world's sorted sprite names
  (``substrates.sprite_names``);
- ``<i>.POSITION`` (x east, y south) and ``<i>.ORIENTATION`` (0 north .. 3 west);
- the substrate's scalar and vector observations (``READY_TO_SHOOT``, ``INVENTORY``, ...).

``describe`` writes, for the cells of the player's real view (the substrate's window, turned to
the player's facing: ``forward`` rows ahead, ``backward`` behind, ``left``/``right`` beside),
the same window the RGB image shows:

1. a grid, top row farthest ahead, one character per cell: ``@`` the player, a digit ``k`` the
   avatar of ``player_k`` (``*`` for players 10 and up), else the symbol of the topmost sprite
   (``legend``), ``.`` a cell with no sprite, ``#`` outside the map;
2. the players in view, with their offset (``ahead``/``behind``, ``left``/``right``) and facing;
3. the things in view by kind (every sprite not on a ground layer), with their count and the
   offsets of the nearest five.

``tests/unit/test_meltingpot_text.py`` checks the decoding against the engine's own text map
(``GLOBAL.TEXT``: the first letter of each cell's topmost sprite) and the avatar positions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

FACINGS = ("NORTH", "EAST", "SOUTH", "WEST")
#: layers whose sprites are ground: drawn in the grid, not listed as things
GROUND_LAYERS = frozenset({"logic", "alternateLogic", "background"})
#: sprites that are never told as things (the world's edges, the viewer's own avatar)
_HIDDEN = frozenset({"OutOfBounds", "OutOfView", "Self", "Other"})
#: the sprite some substrates draw every other player with (their identity is hidden)
ANONYMOUS = "Other"
_AVATAR = re.compile(r"^Avatar(\d+)$")
NEAREST = 5


def ego_to_map(ahead: int, right: int, orientation: int) -> tuple[int, int]:
    """Map offset (dx east, dy south) of the cell ``ahead`` cells forward and ``right`` cells
    to the right of a player facing ``orientation`` (0 north, 1 east, 2 south, 3 west)."""
    if orientation == 0:
        return right, -ahead
    if orientation == 1:
        return ahead, right
    if orientation == 2:
        return -right, ahead
    if orientation == 3:
        return -ahead, -right
    raise ValueError(f"orientation must be 0..3, got {orientation}")


def offset_words(ahead: int, right: int) -> str:
    """``"2 ahead, 1 left"``, ``"1 behind"``, ``"3 right"``."""
    parts = []
    if ahead:
        parts.append(f"{abs(ahead)} {'ahead' if ahead > 0 else 'behind'}")
    if right:
        parts.append(f"{abs(right)} {'right' if right > 0 else 'left'}")
    return ", ".join(parts) or "your cell"


def kind_of(sprite: str) -> str:
    """The kind a sprite is told as: ``water_1`` -> ``water``, ``CookingPot_empty_tomato_empty``
    stays whole, ``loading_bar_3`` -> ``loading_bar``."""
    return re.sub(r"_\d+$", "", sprite)


@dataclass
class SpriteTable:
    """A substrate's sprite names (dmlab2d order), the layer of each, the grid symbols."""

    names: list[str]
    layers: Mapping[str, str]
    symbols: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        taken = {"@", "#", ".", "*", *"0123456789"}
        for kind in sorted({kind_of(n) for n in self.names if n not in _HIDDEN
                            and not _AVATAR.match(n)}):
            for candidate in (kind[:1].upper(), kind[:1].lower(),
                              *"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz+=~^&$%"):
                if candidate and candidate not in taken:
                    self.symbols[kind] = candidate
                    taken.add(candidate)
                    break

    def sprite(self, value: int) -> tuple[str, int]:
        """(name, orientation) of a LAYER value > 0. Raises IndexError for an unknown id."""
        index, orientation = divmod(int(value) - 1, 4)
        return self.names[index], orientation

    def is_ground(self, name: str) -> bool:
        return self.layers.get(name, "") in GROUND_LAYERS

    def legend(self) -> str:
        items = [f"{symbol} {kind}" for kind, symbol in sorted(self.symbols.items(),
                                                               key=lambda kv: kv[1])]
        return ("@ you; 0-9 the player with that number (* for 10 and up, or a player the "
                "substrate does not name); "
                + "; ".join(items) + "; . nothing; # outside the map")


@dataclass(frozen=True)
class Seen:
    """One cell of the player's view: its ego offset and the sprites on it (bottom to top)."""

    ahead: int
    right: int
    sprites: tuple[tuple[str, int], ...]
    outside: bool


@dataclass
class View:
    """The decoded view: ``cells`` by (ahead, right); ``on_grid`` False while the player's
    avatar is off the map (removed after being zapped)."""

    cells: dict[tuple[int, int], Seen]
    on_grid: bool
    me: int = -1


def decode_view(layer: np.ndarray, table: SpriteTable, orientation: int,
                window: Mapping[str, int], me: int) -> View:
    """The cells of player ``me``'s window from its north-aligned LAYER (module doc). Its own
    avatar is drawn as ``Self`` or, in substrates without that sprite, as ``Avatar<me+1>``."""
    size = layer.shape[0]
    radius = size // 2
    centre = [table.sprite(v)[0] for v in layer[radius, radius] if v]
    on_grid = bool({"Self", f"Avatar{me + 1}"} & set(centre))
    cells: dict[tuple[int, int], Seen] = {}
    for ahead in range(-int(window["backward"]), int(window["forward"]) + 1):
        for right in range(-int(window["left"]), int(window["right"]) + 1):
            dx, dy = ego_to_map(ahead, right, orientation)
            values = [int(v) for v in layer[radius + dy, radius + dx] if v]
            sprites = tuple(table.sprite(v) for v in values)
            outside = bool(sprites) and all(s[0] == "OutOfBounds" for s in sprites)
            cells[(ahead, right)] = Seen(ahead, right, sprites, outside)
    return View(cells, on_grid, me)


def _player_of(name: str) -> int | None:
    match = _AVATAR.match(name)
    return int(match.group(1)) - 1 if match else None


def cell_symbol(seen: Seen, table: SpriteTable, me: int = -1) -> str:
    if seen.outside:
        return "#"
    for name, _ in reversed(seen.sprites):
        player = _player_of(name)
        if name == "Self" or (player == me and (seen.ahead, seen.right) == (0, 0)):
            return "@"
        if player is not None:
            return str(player) if player < 10 else "*"
        if name == ANONYMOUS:
            return "*"
        if name in ("OutOfBounds", "OutOfView"):
            return "#"
        return table.symbols.get(kind_of(name), "?")
    return "."


def grid_lines(view: View, table: SpriteTable, window: Mapping[str, int]) -> list[str]:
    """The view as rows of symbols, farthest ahead first, left to right."""
    rows = []
    for ahead in range(int(window["forward"]), -int(window["backward"]) - 1, -1):
        rows.append("".join(cell_symbol(view.cells[(ahead, right)], table, view.me)
                            for right in range(-int(window["left"]), int(window["right"]) + 1)))
    return rows


def players_in_view(view: View, me: int) -> list[tuple[int, int, int, int]]:
    """(player index, ahead, right, facing relative to the map 0..3) of every other avatar in
    the view, nearest first; the index is -1 for a player drawn anonymously (``Other``)."""
    found = []
    for (ahead, right), seen in view.cells.items():
        for name, orientation in seen.sprites:
            player = -1 if name == ANONYMOUS else _player_of(name)
            if player is not None and player != me:
                found.append((abs(ahead) + abs(right), player, ahead, right, orientation))
    found.sort()
    return [(p, a, r, o) for _, p, a, r, o in found]


def things_in_view(view: View, table: SpriteTable) -> dict[str, list[tuple[int, int]]]:
    """kind -> the (ahead, right) offsets of its cells, nearest first (ground and avatars
    excepted)."""
    things: dict[str, list[tuple[int, int, int]]] = {}
    for (ahead, right), seen in view.cells.items():
        kinds = set()
        for name, _ in seen.sprites:
            if name in _HIDDEN or _player_of(name) is not None or table.is_ground(name):
                continue
            kinds.add(kind_of(name))
        for kind in kinds:
            things.setdefault(kind, []).append((abs(ahead) + abs(right), -ahead, right))
    return {kind: [(-a, r) for _, a, r in sorted(cells)] for kind, cells in sorted(things.items())}


def _value_text(value: Any) -> str:
    array = np.asarray(value)
    if array.ndim == 0:
        number = float(array)
        return str(int(number)) if number.is_integer() else f"{number:.3g}"
    return "[" + ", ".join(_value_text(v) for v in array.reshape(-1)) + "]"


OBSERVATION_NOTES = {
    "READY_TO_SHOOT": "1 when your beam can fire again",
    "INVENTORY": "how many of each resource you hold",
    "NUM_OTHERS_WHO_CLEANED_THIS_STEP": "players other than you who cleaned this step",
}


def describe(*, player: int, num_players: int, step: int, max_steps: int, reward: float,
             total: float, position: Sequence[int], orientation: int, view: View,
             table: SpriteTable, window: Mapping[str, int],
             scalars: Mapping[str, Any], show_position: bool = True) -> str:
    """The long-term text of one player (module doc). ``show_position`` False (a scenario's
    focal player, who gets no absolute position in Melting Pot) says the facing only."""
    lines = [f"You are player_{player} ({num_players} players). Step {step} of {max_steps}.",
             f"Reward last step: {_value_text(reward)}; your total: {_value_text(total)}."]
    if not view.on_grid:
        lines.append("You are not on the map right now (you were zapped out); you will "
                     "reappear at a spawn point.")
    elif show_position:
        lines.append(f"You are at x={int(position[0])}, y={int(position[1])} (x grows east, "
                     f"y grows south), facing {FACINGS[orientation]}.")
    else:
        lines.append(f"You are facing {FACINGS[orientation]}.")
    for name, value in scalars.items():
        note = OBSERVATION_NOTES.get(name)
        lines.append(f"{name}: {_value_text(value)}" + (f" ({note})" if note else ""))
    if not view.on_grid:
        return "\n".join(lines)
    lines.append(f"Your view ({int(window['forward'])} rows ahead, {int(window['backward'])} "
                 f"behind, {int(window['left'])} columns left and {int(window['right'])} "
                 "right; top row farthest ahead):")
    lines += grid_lines(view, table, window)
    lines.append("Legend: " + table.legend())
    others = players_in_view(view, player)
    if others:
        lines.append("Players in view:")
        lines += [f"- {f'player_{p}' if p >= 0 else 'a player (the substrate hides who)'}: "
                  f"{offset_words(a, r)}; facing {FACINGS[o]}" for p, a, r, o in others]
    else:
        lines.append("Players in view: none.")
    things = things_in_view(view, table)
    if things:
        lines.append("Things in view (nearest first):")
        for kind, cells in things.items():
            shown = "; ".join(offset_words(a, r) for a, r in cells[:NEAREST])
            more = f" (+{len(cells) - NEAREST} more)" if len(cells) > NEAREST else ""
            lines.append(f"- {kind} x{len(cells)}: {shown}{more}")
    else:
        lines.append("Things in view: none.")
    return "\n".join(lines)
