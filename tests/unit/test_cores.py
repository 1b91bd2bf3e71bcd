"""``moria.cores``: the cgroup CPU quota read from cgroup trees laid out as the kernel lays
them out (v2's ``cpu.max``, v1's ``cpu.cfs_quota_us``/``cpu.cfs_period_us``), inside a
container and on a host; the quota a real container gets is checked by ``make stack-test``
(its ``cpu quota`` stage runs the orchestrator image with ``--cpus 1.5``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from moria import cores


def _mountinfo(*mounts: tuple[str, Path, str, str]) -> str:
    """mountinfo lines for (root, mount point, fs type, super options)."""
    return "".join(
        f"{30 + i} 23 0:{28 + i} {root} {str(point).replace(' ', chr(92) + '040')} "
        f"rw,relatime - {fstype} {fstype} {options}\n"
        for i, (root, point, fstype, options) in enumerate(mounts))


def _write(folder: Path, **files: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name.replace("__", ".")).write_text(text + "\n")


def test_v2_inside_a_container_reads_its_own_cpu_max(tmp_path: Path) -> None:
    _write(tmp_path, cpu__max="150000 100000")
    mounts = _mountinfo(("/", tmp_path, "cgroup2", "rw"))
    assert cores.cgroup_cpu_limit("0::/\n", mounts) == 1.5


def test_v2_on_a_host_the_smallest_quota_on_the_way_up_wins(tmp_path: Path) -> None:
    _write(tmp_path, cpu__max="max 100000")
    _write(tmp_path / "batch.slice", cpu__max="200000 100000")
    _write(tmp_path / "batch.slice" / "job-7", cpu__max="max 100000")
    mounts = _mountinfo(("/", tmp_path, "cgroup2", "rw"))
    assert cores.cgroup_cpu_limit("0::/batch.slice/job-7\n", mounts) == 2.0
    assert cores.cgroup_cpu_limit("0::/\n", mounts) is None  # max everywhere: no quota


def test_v1_container_sees_its_cgroup_at_the_mount_point(tmp_path: Path) -> None:
    # podman and Docker on a cgroup v1 host: the mount's root is the container's cgroup
    point = tmp_path / "cpu,cpuacct"
    _write(point, cpu__cfs_quota_us="50000", cpu__cfs_period_us="100000")
    cgroup = "/libpod_parent/libpod-4ab5"
    text = f"4:memory:{cgroup}\n2:cpu,cpuacct:{cgroup}\n0::{cgroup}\n"
    mounts = _mountinfo((cgroup, point, "cgroup", "rw,cpu,cpuacct"),
                        (cgroup, tmp_path / "memory", "cgroup", "rw,memory"))
    assert cores.cgroup_cpu_limit(text, mounts) == 0.5


def test_v1_without_a_quota_and_unreadable_trees_give_none(tmp_path: Path) -> None:
    _write(tmp_path / "cpu", cpu__cfs_quota_us="-1", cpu__cfs_period_us="100000")
    mounts = _mountinfo(("/", tmp_path / "cpu", "cgroup", "rw,cpu"))
    assert cores.cgroup_cpu_limit("1:cpu:/\n", mounts) is None
    _write(tmp_path / "broken", cpu__cfs_quota_us="lots", cpu__cfs_period_us="100000")
    broken = _mountinfo(("/", tmp_path / "broken", "cgroup", "rw,cpu"))
    assert cores.cgroup_cpu_limit("1:cpu:/\n", broken) is None
    missing = _mountinfo(("/", tmp_path / "nowhere", "cgroup2", "rw"))
    assert cores.cgroup_cpu_limit("0::/\n", missing) is None
    assert cores.cgroup_cpu_limit("garbage\n", "garbage\n") is None


def test_a_cgroup_outside_the_mount_is_not_read_and_escapes_are_undone(tmp_path: Path) -> None:
    point = tmp_path / "cgroup v2"  # a space: mountinfo writes it as \040
    _write(point, cpu__max="300000 100000")
    mounts = _mountinfo(("/kubepods/pod-a", point, "cgroup2", "rw"))
    assert cores.cgroup_cpu_limit("0::/kubepods/pod-a\n", mounts) == 3.0
    assert cores.cgroup_cpu_limit("0::/kubepods/pod-b\n", mounts) is None


@pytest.mark.parametrize(("limit", "expected"), [(None, 2), (0.5, 1), (1.0, 1), (1.5, 2),
                                                 (64.0, 2)])
def test_available_cores_rounds_the_quota_up_and_never_passes_the_affinity(
        monkeypatch: pytest.MonkeyPatch, limit: float | None, expected: int) -> None:
    monkeypatch.setattr(cores, "affinity_cores", lambda: 2)
    monkeypatch.setattr(cores, "cgroup_cpu_limit", lambda: limit)
    assert cores.available_cores() == expected


def test_this_process_reads_its_own_cgroups_without_failing() -> None:
    limit = cores.cgroup_cpu_limit()
    assert limit is None or limit > 0
    assert 1 <= cores.available_cores() <= cores.affinity_cores()
