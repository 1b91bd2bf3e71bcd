"""``python -m agent_server.strategies [--check]``: write (or check) ``moria/strategies.json``
from the strategy classes' declared facts (``agent_server.strategies.table``)."""

import sys

from agent_server.strategies.table import main

sys.exit(main())
