"""What each TextWorld game family is generated from (docs/families/textworld.md), and its seeds.

BALROG plays 25 pre-generated games per family. Its generator calls, restated as data:

- ``treasure_hunter``: challenge ``tw-treasure_hunter --level 30`` with the objective naming only
  the last quest action (BALROG's customised tw-make sets ``only_last_action``), keeping only games
  whose walkthrough is exactly 20 commands;
- ``coin_collector``: ``tw-coin_collector --level 220``, objective naming only the last action;
- ``the_cooking_game``: stock ``tw-make tw-cooking --recipe 5 --take 5 --go 12 --open --cook --cut
  --split test`` (``drop`` off and ``recipe_seed`` 0 are tw-make's defaults).

BALROG compiled coin_collector and treasure_hunter as Glulx (``.ulx``), which TextWorld 1.7
refuses, so every family is compiled as ``.z8`` here: same recipes, our own recorded seeds.

Seeds: game ``index`` of a family is the first *candidate* that the recipe accepts, trying
``candidate_seed(index, attempt)`` for ``attempt = 0, 1, ...``. The candidate seed is TextWorld's
global generation seed (tw-make's ``--seed``), from which it derives the map, object, quest and
grammar seeds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

#: Candidate seeds of game ``index`` are ``SEED_STRIDE * index + attempt``.
SEED_STRIDE = 1000
#: Attempts per game before giving up (an attempt is rejected when the quest cannot be generated,
#: exceeds the search budget, or fails the walkthrough filter).
MAX_ATTEMPTS = SEED_STRIDE


@dataclass(frozen=True)
class Recipe:
    """How the games of one family are generated.

    Attributes:
        family: the task name (``treasure_hunter``, ...).
        challenge: the TextWorld challenge id, a key of ``textworld.challenges.CHALLENGES``.
        settings: the challenge settings, exactly as tw-make passes its parsed arguments.
        only_last_action: the objective text names only the quest's last action.
        walkthrough_length: keep only games whose walkthrough has this many commands (None: any).
        cli: the generator call in tw-make syntax, for messages and metadata.
    """

    family: str
    challenge: str
    settings: Mapping[str, Any]
    only_last_action: bool
    walkthrough_length: int | None
    cli: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))

    def describe(self) -> str:
        """One line: the generator call, the objective mode and the acceptance filter."""
        parts = [self.cli, ".z8"]
        if self.only_last_action:
            parts.append("objective names only the last action")
        if self.walkthrough_length is not None:
            parts.append(f"kept only if the walkthrough is {self.walkthrough_length} commands")
        return "; ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form, stored in each game's metadata file."""
        return {
            "challenge": self.challenge,
            "settings": dict(self.settings),
            "only_last_action": self.only_last_action,
            "walkthrough_length": self.walkthrough_length,
            "description": self.describe(),
        }


_COOKING_SETTINGS = {
    "recipe": 5, "take": 5, "go": 12, "open": True, "cook": True, "cut": True, "drop": False,
    "recipe_seed": 0, "split": "test",
}

RECIPES: dict[str, Recipe] = {
    "treasure_hunter": Recipe(
        family="treasure_hunter",
        challenge="tw-treasure_hunter",
        settings={"level": 30},
        only_last_action=True,
        walkthrough_length=20,
        cli="tw-make tw-treasure_hunter --level 30",
    ),
    "the_cooking_game": Recipe(
        family="the_cooking_game",
        challenge="tw-cooking",
        settings=_COOKING_SETTINGS,
        only_last_action=False,
        walkthrough_length=None,
        cli="tw-make tw-cooking --recipe 5 --take 5 --go 12 --open --cook --cut --split test",
    ),
    "coin_collector": Recipe(
        family="coin_collector",
        challenge="tw-coin_collector",
        settings={"level": 220},
        only_last_action=True,
        walkthrough_length=None,
        cli="tw-make tw-coin_collector --level 220",
    ),
}


def candidate_seed(index: int, attempt: int) -> int:
    """TextWorld generation seed of candidate ``attempt`` (0-based) for game ``index``.

    ``SEED_STRIDE * index + attempt``: game 3's candidates are 3000, 3001, ... The same for every
    family (each family is a different generator). Raises ValueError outside
    ``0 <= attempt < MAX_ATTEMPTS`` or for a negative index.
    """
    if index < 0 or not 0 <= attempt < MAX_ATTEMPTS:
        raise ValueError(f"bad candidate (index {index}, attempt {attempt})")
    return SEED_STRIDE * index + attempt


def small_recipe(family: str) -> Recipe:
    """A cheap variant of a family's recipe, for tests only (not BALROG's games).

    treasure_hunter level 1 (5 rooms, one-command quest), coin_collector level 5 (5 rooms),
    cooking with 2 ingredients in 6 rooms; each builds in about a second. Tests swap it into
    ``RECIPES``; ``games.is_built`` then treats games of the full recipe as not built.
    """
    small: dict[str, dict[str, Any]] = {
        "treasure_hunter": {"level": 1},
        "coin_collector": {"level": 5},
        "the_cooking_game": {**_COOKING_SETTINGS, "recipe": 2, "take": 2, "go": 6},
    }
    full = RECIPES[family]
    settings = small[family]
    flags = " ".join(f"--{k} {v}" for k, v in settings.items() if not isinstance(v, bool))
    return Recipe(
        family=family,
        challenge=full.challenge,
        settings=settings,
        only_last_action=full.only_last_action,
        walkthrough_length=None,
        cli=f"tw-make {full.challenge} {flags} (test variant)",
    )
