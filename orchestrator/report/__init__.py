"""Figures from a run's result files: summaries, tables, plots, accounting, ratings, verdict."""
