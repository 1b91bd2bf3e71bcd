"""The built Qwen model in the cache: a content-keyed marker, and use with no lock or write.

The real 491 MB join is tested in test_backend_local.py; here the chunks are small fakes."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import traceback
from pathlib import Path

import pytest

from agent_server.backends import models as models_mod
from agent_server.backends.base import BackendError
from agent_server.backends.models import QWEN_FILE, qwen_is_built, qwen_path
from tests.support.users import as_user


@pytest.fixture
def fake_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> bytes:
    """Three small chunks standing in for the six PyPI ones; returns the joined bytes."""
    chunks = [os.urandom(300_000), os.urandom(123_457), os.urandom(5)]
    parts = []
    for i, chunk in enumerate(chunks):
        parts.append(tmp_path / f"part{i}.bin")
        parts[-1].write_bytes(chunk)
    joined = b"".join(chunks)
    monkeypatch.setattr(models_mod, "qwen_part_paths", lambda: parts)
    monkeypatch.setattr(models_mod, "QWEN_SIZE", len(joined))
    monkeypatch.setattr(models_mod, "QWEN_SHA256", hashlib.sha256(joined).hexdigest())
    return joined


def _forbid_building(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*_: object, **__: object) -> None:
        raise AssertionError("using a built model must not lock, write, join or rehash")

    for name in ("file_lock", "make_dirs", "atomic_write_text", "_join_parts", "_sha256_of"):
        monkeypatch.setattr(models_mod, name, forbidden)


def test_the_marker_survives_mtimes_cut_to_whole_seconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_parts: bytes
) -> None:
    monkeypatch.setenv("MORIA_CACHE_DIR", str(tmp_path / "cache"))
    target = qwen_path()
    folder = target.parent
    assert target.read_bytes() == fake_parts
    assert sorted(p.name for p in folder.iterdir()) == [QWEN_FILE, QWEN_FILE + ".verified"]
    # what an image layer does: mtimes truncated to whole seconds (a sub-second one first, so
    # the truncation really changes it); a reproducible build may even rewrite them
    os.utime(target, ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))
    assert qwen_is_built()
    for seconds in (1_700_000_000, 315_532_800):
        os.utime(target, ns=(seconds * 10**9, seconds * 10**9))
        _forbid_building(monkeypatch)
        assert qwen_is_built()
        assert qwen_path() == target


def test_a_changed_model_file_is_not_taken_as_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_parts: bytes
) -> None:
    monkeypatch.setenv("MORIA_CACHE_DIR", str(tmp_path / "cache"))
    target = qwen_path()
    stat = target.stat()
    changed = bytearray(fake_parts)
    changed[len(changed) // 2] ^= 0xFF  # same size, same mtime, one byte in the middle
    target.write_bytes(bytes(changed))
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert not qwen_is_built()
    assert qwen_path() == target and target.read_bytes() == fake_parts  # rebuilt
    target.write_bytes(fake_parts[:-1])
    assert not qwen_is_built()


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")
def test_a_model_built_by_root_is_used_by_another_user_from_a_read_only_cache(
    monkeypatch: pytest.MonkeyPatch, fake_parts: bytes
) -> None:
    # the container image: built by root (under a strict umask, to prove the explicit modes),
    # the folder then read-only, mtimes cut to whole seconds; the server runs as UID 10001
    top = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        top.chmod(0o755)
        monkeypatch.setenv("MORIA_CACHE_DIR", str(top))
        old = os.umask(0o077)
        try:
            target = qwen_path()
        finally:
            os.umask(old)
        for path in target.parent.iterdir():
            seconds = path.stat().st_mtime_ns // 10**9 * 10**9
            os.utime(path, ns=(seconds, seconds))
        target.parent.chmod(0o555)

        def use() -> bool:
            try:
                return qwen_is_built() and qwen_path().read_bytes() == fake_parts
            except BackendError:
                traceback.print_exc()
                return False

        assert as_user(10001, use)
        assert sorted(p.name for p in target.parent.iterdir()) == [
            QWEN_FILE,
            QWEN_FILE + ".verified",
        ]
    finally:
        for folder in [top, *top.rglob("*")]:
            if folder.is_dir():
                folder.chmod(0o755)
        shutil.rmtree(top)
