"""DeepMind Melting Pot substrates (dm-meltingpot 2.4.1 on dmlab2d): ``MeltingPotFamily``.

Importing this package is cheap; the substrate code loads when tasks are listed or a game opens
(``package.py`` explains how, without tensorflow).
"""

from env_server.families.meltingpot.family import MeltingPotFamily

__all__ = ["MeltingPotFamily"]
