"""The meltingpot observation text against the substrate's own arrays.

For every listed substrate, a few steps of play: each cell of each player's decoded view is
mapped to the map (the player's POSITION and ORIENTATION) and its topmost sprite must start with
the letter the engine's own text map (``GLOBAL.TEXT``: the first letter of each cell's topmost
sprite) has there; every player the text lists in view must stand where its POSITION says; the
image must have the shape of the substrate's RGB observation.
"""

from __future__ import annotations

import numpy as np
import pytest

from env_server.families import load_family
from env_server.families.meltingpot.substrates import SUBSTRATES
from env_server.families.meltingpot.text import (
    ego_to_map,
    offset_words,
    players_in_view,
)
from env_server.game import GameOptions

STEPS = 12


def _check_views(game, names_checked: list[int]) -> None:
    obs = game._obs
    text_map = obs["GLOBAL.TEXT"].item().decode().split("\n")
    height = len([row for row in text_map if row])
    width = len(text_map[0])
    for index in range(len(game.agents)):
        view = game.decoded(index)
        if not view.on_grid:
            continue
        x, y = (int(v) for v in obs[f"{index + 1}.POSITION"])
        orientation = int(obs[f"{index + 1}.ORIENTATION"])
        for (ahead, right), seen in view.cells.items():
            dx, dy = ego_to_map(ahead, right, orientation)
            cx, cy = x + dx, y + dy
            inside = 0 <= cx < width and 0 <= cy < height
            assert seen.outside == (not inside) or not seen.sprites, (ahead, right, seen)
            if not inside or not seen.sprites:
                continue
            top = seen.sprites[-1][0]
            if top in ("Self", f"Avatar{index + 1}") and (ahead, right) == (0, 0):
                continue
            if top == "Other":  # the substrate draws other players anonymously
                assert text_map[cy][cx] == "A"  # their world sprite is Avatar<k>
                continue
            if top == "Self":
                assert (ahead, right) == (0, 0)
                continue
            assert top[0] == text_map[cy][cx], (
                f"{game._spec.name} player_{index} cell {ahead} ahead {right} right = map "
                f"({cx}, {cy}): decoded {seen.sprites}, engine text {text_map[cy][cx]!r}")
            names_checked[0] += 1
        for other, ahead, right, _ in players_in_view(view, index):
            if other < 0:
                continue
            dx, dy = ego_to_map(ahead, right, orientation)
            assert [int(v) for v in obs[f"{other + 1}.POSITION"]] == [x + dx, y + dy]


@pytest.mark.parametrize("task", SUBSTRATES)
@pytest.mark.slow
def test_decoded_view_matches_the_engine_text_map(task: str) -> None:
    family = load_family("meltingpot")
    game = family.open(task, GameOptions(seed=5, oracle=True, render_image=True))
    try:
        views = game.reset(5)
        checked = [0]
        rgb_shape = game._spec.view
        for _ in range(STEPS):
            _check_views(game, checked)
            for agent, view in views.items():
                window = rgb_shape
                rows = int(window["forward"]) + int(window["backward"]) + 1
                cols = int(window["left"]) + int(window["right"]) + 1
                assert view.image is not None
                assert view.image.shape[0] * cols == view.image.shape[1] * rows
                assert view.long_term_context.startswith(f"You are {agent} ")
            result = game.step({a: v.info["expert_action"] for a, v in views.items()})
            views = {a: t.view for a, t in result.transitions.items()}
            if result.done:
                break
        assert checked[0] > 0
    finally:
        game.close()


def test_offsets_and_directions() -> None:
    assert ego_to_map(2, 1, 0) == (1, -2)
    assert ego_to_map(2, 1, 1) == (2, 1)
    assert ego_to_map(2, 1, 2) == (-1, 2)
    assert ego_to_map(2, 1, 3) == (-2, -1)
    assert offset_words(2, -1) == "2 ahead, 1 left"
    assert offset_words(-1, 0) == "1 behind"
    assert offset_words(0, 0) == "your cell"
    with pytest.raises(ValueError):
        ego_to_map(1, 1, 4)


def test_image_is_the_substrates_rgb_window() -> None:
    """The cut image has the substrate's RGB shape (its config's spec). Its pixels are not
    compared with an unmodified build (the engine does not replay a seed; see substrates.py)."""
    from env_server.families.meltingpot.package import modules

    family = load_family("meltingpot")
    game = family.open("prisoners_dilemma_in_the_matrix__repeated",
                       GameOptions(seed=3, render_image=True))
    try:
        views = game.reset(3)
        spec_shape = modules().configs.get_config(
            "prisoners_dilemma_in_the_matrix__repeated").timestep_spec.observation["RGB"].shape
        for view in views.values():
            assert view.image is not None and view.image.shape == tuple(spec_shape)
            assert view.image.dtype == np.uint8
    finally:
        game.close()
