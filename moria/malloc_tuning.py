"""How Moria's servers ask the C allocator (glibc's malloc) to give large freed blocks back.

glibc serves an allocation above its mmap threshold with a fresh ``mmap`` and returns it to
the system on ``free``. The threshold is dynamic: each time such a block is freed, the
threshold rises to its size (up to 32 MiB on 64-bit). After the first large request, the
large buffers of later ones (gRPC's receive buffer, the Python ``bytes`` of the message, its
parsed strings) come from the heaps of the threads that allocated them, and a freed block in
the middle of a heap stays with the process. An env server answering Opens that name a 60 MB
task (NOT_FOUND) kept about 115 MB per request; in-process, 16 refused 30 MB Opens left
690 MB, of which ``malloc_trim`` gave back all but 241 MB: the memory was free, but held.

``pin_mmap_threshold`` fixes the threshold at ``MMAP_THRESHOLD_BYTES``, which also turns the
dynamic adjustment off (mallopt(3), ``M_MMAP_THRESHOLD``): every block above it is mapped and
unmapped on its own, so a large request's memory goes back to the system when the request is
done (the same 16 Opens: 161 MB; 20 Begins of 60 MB refused by a real agent server: 124 to
135 MB). Blocks below it (a step's messages) keep the heaps' reuse. The servers call it once at
start (``moria.server.server_main``). The other half of the fix is in ``moria.server``
(``_without_frames``): an aborted call's request is no longer held by a reference cycle until
the next garbage collection.

``MORIA_MALLOC=default`` in the environment leaves glibc's own settings; on a C library other
than glibc nothing is changed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
from collections.abc import Mapping

#: The environment variable that turns this off (value ``default``).
ENV_VAR = "MORIA_MALLOC"
#: mallopt(3)'s parameter number of the mmap threshold (glibc's ``M_MMAP_THRESHOLD``).
M_MMAP_THRESHOLD = -3
#: Blocks above this size are mapped on their own and returned to the system when freed.
MMAP_THRESHOLD_BYTES = 256 * 1024


def enabled(environ: Mapping[str, str] = os.environ) -> bool:
    """False when ``MORIA_MALLOC=default`` asks for glibc's own settings, or the C library
    is not glibc."""
    if environ.get(ENV_VAR, "").strip().lower() == "default":
        return False
    return platform.libc_ver()[0] == "glibc"


def pin_mmap_threshold(environ: Mapping[str, str] = os.environ) -> bool:
    """Fix glibc's mmap threshold at ``MMAP_THRESHOLD_BYTES`` (module docstring). Returns
    whether it was set (False: turned off, not glibc, or mallopt refused)."""
    if not enabled(environ):
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    libc = ctypes.CDLL(name)
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
