"""Trained-policy players: the ``moria-mlp`` checkpoint format (``checkpoint``) and the numpy
trainer that produces the shipped examples (``train``). See docs/rl-checkpoints.md."""

from agent_server.rl.checkpoint import (
    FORMAT,
    VERSION,
    CheckpointError,
    CheckpointMetadata,
    MlpPolicy,
    load_checkpoint,
    load_checkpoint_cached,
    save_checkpoint,
)

__all__ = [
    "FORMAT",
    "VERSION",
    "CheckpointError",
    "CheckpointMetadata",
    "MlpPolicy",
    "load_checkpoint",
    "load_checkpoint_cached",
    "save_checkpoint",
]
