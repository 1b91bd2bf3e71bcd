"""TextWorld family (BALROG's ``textworld``): ``TextWorldFamily`` lists and opens the tasks.

Modules: ``family`` (tasks, options), ``game`` (one game), ``games`` (game files: paths, the
build-once lock, generation), ``recipes`` (BALROG's generator settings and our seeds),
``quest_search`` (faster, bounded quest generation), ``text`` (observation text), ``instruction``
(prompts), ``render`` (text drawn as an image); ``python -m env_server.families.textworld``
builds games from the command line.

Importing this package is cheap: textworld is imported when a game is opened or built.
"""

from env_server.families.textworld.family import TextWorldFamily

__all__ = ["TextWorldFamily"]
