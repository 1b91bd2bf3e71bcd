"""Hypothesis fuzzing of the bidirectional Env ``Session`` and Policy ``Play`` streams."""
