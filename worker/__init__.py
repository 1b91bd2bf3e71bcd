"""MOSAIC-style llm-worker / vlm-worker: one player over one env, autonomous or driven by
JSON lines on stdin/stdout."""

import moria  # noqa: F401  (first: applies moria.grpc_defaults before grpc is imported)
