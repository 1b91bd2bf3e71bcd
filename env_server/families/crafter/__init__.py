"""Crafter family (BALROG's ``crafter``): ``CrafterFamily`` lists and opens the task.

Importing this package is cheap; crafter is imported when a game is opened.

Modules: ``family`` (tasks, open), ``config`` (kwargs validation), ``game`` (one episode),
``world`` (seeded worlds, warm-up), ``window`` (the 9x7 local window), ``text`` (observation
text, legacy and current formats), ``vocab`` (actions, achievements, names), ``instruction``.
"""

from env_server.families.crafter.family import CrafterFamily

__all__ = ["CrafterFamily"]
