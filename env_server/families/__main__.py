"""``python -m env_server.families [--check]``: write (or check) ``moria/families.json`` from the
family folders' manifests (``env_server.families.manifest``)."""

import sys

from env_server.families.manifest import main

sys.exit(main())
