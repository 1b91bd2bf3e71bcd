"""Entry points: the ``moria`` commands and the OrchestratorService."""
