"""The crafter family's manifest (``moria.families``): BALROG's Crafter suite entry."""

from __future__ import annotations

from env_server.families.crafter.vocab import LISTABLE_ITEMS
from moria.families import BalrogReference, FamilyManifest, SuiteEntry
from moria.family_options import boolean, choice, fixed, integer, names, pair, server_path

#: The observation text formats: ``legacy`` (behind BALROG's published numbers) and
#: ``current`` (BALROG after its PR #55); ``text.py`` writes both.
TEXT_FORMATS: tuple[str, ...] = ("legacy", "current")
#: The episode's step limit unless ``GameOptions.max_steps`` sets one (crafter's and BALROG's).
DEFAULT_MAX_STEPS = 2000
#: The crafter constructor's defaults, as BALROG's config gives them.
DEFAULT_SIZE = (256, 256)
DEFAULT_AREA = (64, 64)
#: The only view the text window is built for.
VIEW = (9, 9)

OPTIONS = {
    "text_format": choice("the observation text: legacy (default; BALROG's published numbers) "
                          "or current (BALROG after its PR #55)", None, TEXT_FORMATS),
    "unique_items": boolean("current format: list each kind of item once", None),
    "precise_location": boolean("current format: exact offsets instead of directions", None),
    "skip_items": names("current format: items never listed", LISTABLE_ITEMS),
    "edge_only_items": names("current format: items listed only at the view's edge",
                             LISTABLE_ITEMS),
    "size": pair("rendered frame [width, height] in pixels (also fixes the night noise's "
                 "random draws, so part of the episode's definition)", DEFAULT_SIZE, 16, 1024),
    "area": pair("world [width, height] in cells", DEFAULT_AREA, 16, 256),
    "view": fixed("the local view in cells (the text window is built for 9x9)", VIEW),
    "reward": fixed("crafter's reward (always reported)", True),
    "seed": fixed("crafter's own seed (the world comes from the episode seed)", None),
    "max_episode_steps": integer("the step limit (GameOptions.max_steps wins over it)",
                                 DEFAULT_MAX_STEPS, 1, 1_000_000),
    "balrog_source": server_path("a BALROG checkout whose own code writes the text (set by "
                                 "the orchestrator under agent.protocol=balrog)",
                                 "balrog_source"),
}

MANIFESTS = [FamilyManifest(
    name="crafter", entry_point="env_server.families.crafter:CrafterFamily",
    balrog=BalrogReference(env="crafter", package="crafter", check_task="default"),
    suites={"balrog": SuiteEntry(position=1, default_tasks=("default",), episodes_per_task=10)},
    extra="crafter", image="crafter", balrog_text=True,
    options_help=("text_format: legacy|current, BALROG's unique_items, precise_location, "
                  "skip_items, edge_only_items, size, ..."),
    options=OPTIONS,
)]
