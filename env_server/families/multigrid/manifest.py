"""The multigrid family's manifest (``moria.families``): MOSAIC's Soccer 2v2 and Collect 2v2
(every registered variant is accepted as a task; ``moria tasks --env multigrid`` lists them)."""

from __future__ import annotations

from moria.families import FamilyManifest, SuiteEntry

MANIFESTS = [FamilyManifest(
    name="multigrid", entry_point="env_server.families.multigrid:MultigridFamily",
    suites={"mosaic": SuiteEntry(
        position=0, default_tasks=("MosaicMultiGrid-S-2v2-IndAgObs-v1",
                                   "MosaicMultiGrid-C-2v2-IndAgObs-v1"),
        episodes_per_task=10)},
    report_kind="team", extra="multigrid", image="multigrid", id_prefixes=("MosaicMultiGrid-",),
    options_help="coordination_level, observation_mode (for every seat)",
)]
