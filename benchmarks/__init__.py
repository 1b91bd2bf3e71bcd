"""Moria's performance suite (``make bench``; ``benchmarks/run.py``)."""

import moria  # noqa: F401  (first: applies moria.grpc_defaults before grpc is imported)
