"""BabaIsAI family (BALROG's ``babaisai``): ``BabaIsAIFamily`` lists and opens the 40 puzzles.

Moria's own implementation of the Baba Is You rule engine (the reference package is not used);
importing this package is cheap, the engine modules load when a task is opened.
"""

from env_server.families.babaisai.family import BabaIsAIFamily

__all__ = ["BabaIsAIFamily"]
