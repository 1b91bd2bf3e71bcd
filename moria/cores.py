"""How many cores this process may use: its CPU affinity, capped by a cgroup CPU quota.

A container started with ``docker run --cpus 2`` (or a Kubernetes CPU limit) on a 64-core
host sees all 64 in its affinity and ``os.cpu_count()``; the kernel gives it two cores' worth
of time per period and throttles the rest. ``available_cores`` reads that quota, as the
kernel documents it (``Documentation/admin-guide/cgroup-v2.rst``, ``cpu.max``; cgroup v1's
``Documentation/scheduler/sched-bwc.rst``, ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``):

- the process's cgroup is read from ``/proc/self/cgroup`` (v2: the ``0::<path>`` line; v1: the
  line whose controllers include ``cpu``);
- the cgroup file system that holds it from ``/proc/self/mountinfo`` (v2: type ``cgroup2``; v1:
  type ``cgroup`` with the ``cpu`` option), whose mount root may be the cgroup itself (a
  container sees its own cgroup at the mount point);
- from the process's cgroup up to the mount point, each level's quota over its period; the
  smallest is the limit (a parent's quota bounds its children), rounded up to whole cores.

No quota anywhere (``max``, ``-1``), or files that cannot be read: the affinity alone.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

#: Where the kernel tells a process its cgroups and its mounts.
PROC_CGROUP = Path("/proc/self/cgroup")
PROC_MOUNTINFO = Path("/proc/self/mountinfo")


def affinity_cores() -> int:
    """The cores this process may run on (its CPU affinity; ``os.cpu_count()`` where the
    platform has none), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def available_cores() -> int:
    """``affinity_cores()``, capped by the cgroup CPU quota (``cgroup_cpu_limit``) rounded up
    to whole cores; at least 1."""
    cores = affinity_cores()
    limit = cgroup_cpu_limit()
    if limit is not None:
        cores = min(cores, max(1, math.ceil(limit)))
    return cores


def cgroup_cpu_limit(cgroup_text: str | None = None,
                     mountinfo_text: str | None = None) -> float | None:
    """The CPU time this process's cgroups allow, in cores (``1.5``: one and a half cores'
    worth per period), or None when no level sets a quota or nothing can be read.
    ``cgroup_text`` / ``mountinfo_text``: the contents of ``/proc/self/cgroup`` and
    ``/proc/self/mountinfo`` (read from there when not given); the quota files are read under
    the mount points they name."""
    try:
        if cgroup_text is None:
            cgroup_text = PROC_CGROUP.read_text()
        if mountinfo_text is None:
            mountinfo_text = PROC_MOUNTINFO.read_text()
    except OSError:
        return None
    limits = [limit for limit in (_limit(cgroup_text, mountinfo_text, v2=True),
                                  _limit(cgroup_text, mountinfo_text, v2=False))
              if limit is not None]
    return min(limits) if limits else None


def _cgroup_path(cgroup_text: str, v2: bool) -> str | None:
    """The process's cgroup path: v2's ``0::<path>`` line, or v1's line with ``cpu`` among
    its controllers."""
    for line in cgroup_text.splitlines():
        number, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if v2 and number == "0" and controllers == "":
            return path
        if not v2 and "cpu" in controllers.split(","):
            return path
    return None


def _mounts(mountinfo_text: str, v2: bool) -> list[tuple[str, Path]]:
    """(mount root, mount point) of each cgroup file system of the kind asked for."""
    mounts = []
    for line in mountinfo_text.splitlines():
        fields, sep, tail = line.partition(" - ")
        parts, extra = fields.split(), tail.split()
        if not sep or len(parts) < 5 or len(extra) < 3:
            continue
        fstype, options = extra[0], extra[2].split(",")
        if (fstype == "cgroup2") if v2 else (fstype == "cgroup" and "cpu" in options):
            mounts.append((_unescape(parts[3]), Path(_unescape(parts[4]))))
    return mounts


def _unescape(field: str) -> str:
    """A mountinfo path field: the kernel writes space, tab, newline and backslash as octal
    escapes (``\\040``)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def _levels(cgroup: str, root: str, point: Path) -> list[Path]:
    """The folders of ``cgroup`` and its parents within a mount of ``root`` at ``point``,
    deepest first; [] when the cgroup is outside the mount."""
    cgroup, root = cgroup.rstrip("/") or "/", root.rstrip("/") or "/"
    if root != "/" and cgroup != root and not cgroup.startswith(root + "/"):
        return []
    relative = cgroup[len(root):] if root != "/" else cgroup
    parts = [part for part in relative.split("/") if part]
    return [point.joinpath(*parts[:depth]) for depth in range(len(parts), -1, -1)]


def _v2_quota(level: Path) -> float | None:
    """``cpu.max`` of one cgroup v2 folder in cores (``max``: None)."""
    quota, _, period = (level / "cpu.max").read_text().strip().partition(" ")
    return float(quota) / float(period) if quota != "max" and float(period) > 0 else None


def _v1_quota(level: Path) -> float | None:
    """``cpu.cfs_quota_us`` over ``cpu.cfs_period_us`` of one cgroup v1 folder in cores
    (``-1``: None)."""
    quota = int((level / "cpu.cfs_quota_us").read_text())
    period = int((level / "cpu.cfs_period_us").read_text())
    return quota / period if quota > 0 and period > 0 else None


def _limit(cgroup_text: str, mountinfo_text: str, v2: bool) -> float | None:
    """The smallest quota over the levels of the process's v2 (or v1 ``cpu``) cgroup."""
    cgroup = _cgroup_path(cgroup_text, v2)
    if cgroup is None:
        return None
    quota_of = _v2_quota if v2 else _v1_quota
    limits = []
    for root, point in _mounts(mountinfo_text, v2):
        for level in _levels(cgroup, root, point):
            try:
                quota = quota_of(level)
            except (OSError, ValueError):
                continue
            if quota is not None:
                limits.append(quota)
    return min(limits) if limits else None
