"""mosaic-multigrid family (MOSAIC's Soccer and Collect): ``MultigridFamily``.

Importing this package is cheap; mosaic-multigrid loads when tasks are listed or a game opens.
"""

from env_server.families.multigrid.family import MultigridFamily

__all__ = ["MultigridFamily"]
