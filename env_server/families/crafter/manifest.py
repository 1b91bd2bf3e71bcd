"""The crafter family's manifest (``moria.families``): BALROG's Crafter suite entry."""

from __future__ import annotations

from moria.families import BalrogReference, FamilyManifest, SuiteEntry

MANIFESTS = [FamilyManifest(
    name="crafter", entry_point="env_server.families.crafter:CrafterFamily",
    balrog=BalrogReference(env="crafter", package="crafter", check_task="default"),
    suites={"balrog": SuiteEntry(position=1, default_tasks=("default",), episodes_per_task=10)},
    extra="crafter", image="crafter", balrog_text=True,
    options_help=("text_format: legacy|current, BALROG's unique_items, precise_location, "
                  "skip_items, edge_only_items, size, ..."),
)]
