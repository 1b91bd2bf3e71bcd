"""Trained-policy players: the ``moria-mlp`` checkpoint format (``checkpoint``) and the numpy
trainers that produce the shipped examples (``train``: PettingZoo classic by REINFORCE;
``train_soccer``: multigrid Soccer 2v2 by behaviour cloning). See docs/rl-checkpoints.md."""

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
