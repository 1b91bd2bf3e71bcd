"""The numpy trainers that produce the shipped ``moria-mlp`` checkpoints (``train``:
PettingZoo classic by REINFORCE; ``train_soccer``: multigrid Soccer 2v2 by behaviour cloning of
the scripted bots). The checkpoint format and the player that loads it are the policy server's
(``agent_server.rl``, ``agent_server.strategies.rl``). See docs/rl-checkpoints.md."""
