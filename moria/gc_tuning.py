"""How Moria's long-running processes (the servers, ``moria eval``) run CPython's cyclic
garbage collector.

CPython collects its youngest generation each time container allocations minus deallocations
pass the first threshold (700 by default), and walks every tracked object on a full collection.
A step allocates many short-lived containers (the SDK's request options and headers, prompt
messages, protobuf wrappers), most of which reference counting frees at once, and the heap of a
server is mostly its imports (importing the openai SDK and Moria's backend for it adds 57,636
tracked objects to the Policy server's 48,810). On workload A (docs/performance.md, "Garbage
collection") the default settings cost the Policy server 2.21 s of its 18.7 s of CPU inside the
collector (1,149 young, 105 middle and 9 full collections); with the two settings below, 0.18 s
(97, 8 and 2, most of the young ones during its imports, before the settings apply).

- ``tune``: the first threshold is raised to ``GEN0_THRESHOLD``; the older thresholds stay
  CPython's.
- ``freeze``: once a process has imported what it serves with, one full collection frees the
  garbage of its start, then ``gc.freeze()`` moves every object still alive (modules, classes,
  functions, the SDK client) to the permanent generation, which no collection walks. Frozen
  objects are still freed by reference counting; only a reference cycle among them would never
  be collected, which for import-time objects that live as long as the process costs nothing.
  The Policy server's later freeze (after it builds a model backend) also freezes the objects of
  episodes in flight at that moment: a cycle among those is kept until the process ends, once
  per backend built. That freeze's full collection (0.12 s measured after importing a second
  provider SDK) runs on the event loop.

``MORIA_GC=default`` in the environment leaves CPython's collector as it is (to rule this out
when chasing a memory problem).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Mapping

#: The environment variable that turns this off (value ``default``).
ENV_VAR = "MORIA_GC"

#: Container allocations (net of deallocations) between two collections of the youngest
#: generation; CPython's default is 700.
GEN0_THRESHOLD = 10_000


def enabled(environ: Mapping[str, str] = os.environ) -> bool:
    """False when ``MORIA_GC=default`` asks for CPython's own collector settings."""
    return environ.get(ENV_VAR, "").strip().lower() != "default"


def tune(environ: Mapping[str, str] = os.environ) -> bool:
    """Raise the youngest generation's threshold to ``GEN0_THRESHOLD`` (the other two
    thresholds unchanged). Returns False, changing nothing, when ``enabled`` is False."""
    if not enabled(environ):
        return False
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, middle, oldest)
    return True


def freeze(environ: Mapping[str, str] = os.environ) -> bool:
    """Collect the garbage there is (one full collection), then move every object still
    tracked to the permanent generation (``gc.freeze``): call it once the process's imports are
    done, and again after a late import of a large package (the Policy server's first model
    backend). Returns False, changing nothing, when ``enabled`` is False."""
    if not enabled(environ):
        return False
    gc.collect()
    gc.freeze()
    return True
