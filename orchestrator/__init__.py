"""The orchestrator: plans runs, plays episodes over gRPC, keeps results, reports them.

Subpackages, each importing only those listed after it (``.importlinter``'s layers contract):

- ``apps``: the entry points (``moria`` CLI, the OrchestratorService, its client, tournaments,
  ``record-demos``, ``prepare``, ``protocol-check``, ``tasks``);
- ``core``: playing a run (the runner and its event stream, one episode, replicas, the local
  stack);
- ``report``: figures from result files (summaries, tables, plots, accounting, ratings, the
  run's verdict);
- ``store``: what is kept on disk (episode files, telemetry, the service's event log,
  demonstrations, protocol-check records, the episode records themselves);
- ``plan``: what a run is (the run spec, overrides, the BALROG worker config, episode seeds);
- ``suites``: the benchmark suites as data (BALROG's and MOSAIC's), and the price table.
"""

import moria  # noqa: F401  (first: applies moria.grpc_defaults before grpc is imported)
