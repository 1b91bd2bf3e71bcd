"""MOSAIC-style llm-worker / vlm-worker: one player over one env, autonomous or driven by
JSON lines on stdin/stdout."""
