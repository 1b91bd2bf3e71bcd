"""Trained-policy players: the ``moria-mlp`` checkpoint format (``checkpoint``). The numpy
trainers that produce the shipped examples sit above the services, in ``tools.rl``. See
docs/rl-checkpoints.md."""

from agent_server.rl.checkpoint import (
    FORMAT,
    VERSION,
    VERSIONS,
    CheckpointError,
    CheckpointMetadata,
    InputSpec,
    MlpPolicy,
    load_checkpoint,
    load_checkpoint_cached,
    save_checkpoint,
)

__all__ = [
    "FORMAT",
    "VERSION",
    "VERSIONS",
    "CheckpointError",
    "CheckpointMetadata",
    "InputSpec",
    "MlpPolicy",
    "load_checkpoint",
    "load_checkpoint_cached",
    "save_checkpoint",
]
