"""Unit tests of moria.files: atomic writes, the temp-path helper, stale temp-file clean-up."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from moria.files import (
    TEMP_GLOB,
    atomic_open,
    atomic_path,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    remove_stale_temp_files,
    replace_file,
)


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_write_text_creates_parents_and_replaces_content(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "file.json"
    assert atomic_write_text(target, "old") == target
    assert atomic_write_text(str(target), "new\r\nline é") == target  # str paths too
    assert target.read_bytes() == "new\r\nline é".encode()  # UTF-8, newlines untranslated
    assert names(target.parent) == ["file.json"]


def test_write_bytes_and_json(tmp_path: Path) -> None:
    blob = tmp_path / "blob.bin"
    atomic_write_bytes(blob, b"\x00\xff")
    atomic_write_bytes(blob, b"\x01")
    assert blob.read_bytes() == b"\x01"
    doc = tmp_path / "doc.json"
    atomic_write_json(doc, {"b": 1, "a": "ü"}, indent=2, sort_keys=True, ensure_ascii=False)
    assert doc.read_text(encoding="utf-8") == json.dumps(
        {"a": "ü", "b": 1}, indent=2, ensure_ascii=False)
    assert names(tmp_path) == ["blob.bin", "doc.json"]


def test_unserialisable_json_keeps_old_file(tmp_path: Path) -> None:
    target = tmp_path / "doc.json"
    atomic_write_json(target, {"ok": True})
    with pytest.raises(TypeError):
        atomic_write_json(target, {"bad": object()})
    with pytest.raises(ValueError):
        atomic_write_json(target, {"nan": float("nan")}, allow_nan=False)
    assert json.loads(target.read_text()) == {"ok": True}
    assert names(tmp_path) == ["doc.json"]


def test_writer_failing_mid_write_keeps_old_file_and_removes_temp(tmp_path: Path) -> None:
    target = tmp_path / "file.txt"
    atomic_write_text(target, "old")
    seen: list[Path] = []
    with pytest.raises(RuntimeError, match="writer died"), atomic_open(target) as handle:
        handle.write(b"half of the new")
        handle.flush()
        seen.extend(p for p in tmp_path.iterdir() if p.name != "file.txt")
        raise RuntimeError("writer died")
    assert len(seen) == 1 and seen[0].name.startswith(".file.txt.")  # the temp file existed
    assert seen[0].name.endswith(".tmp") and seen[0].match(TEMP_GLOB)
    assert target.read_text() == "old"
    assert names(tmp_path) == ["file.txt"]


def test_interrupt_mid_write_also_cleans_up(tmp_path: Path) -> None:
    target = tmp_path / "file.txt"
    with pytest.raises(KeyboardInterrupt), atomic_open(target) as handle:
        handle.write(b"x")
        raise KeyboardInterrupt
    assert names(tmp_path) == []  # no target was created, no temp left


def test_rename_failure_keeps_old_file_and_removes_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "file.txt"
    atomic_write_text(target, "old")

    def boom(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("os.replace", boom)
    with pytest.raises(OSError, match="disk full"):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert names(tmp_path) == ["file.txt"]


def test_unwritable_directory_raises_oserror(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with pytest.raises(OSError):
        atomic_write_text(blocker / "file.txt", "x")


def test_writes_fsync_the_data_before_renaming(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append("fsync")
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        events.append("replace")
        real_replace(src, dst)

    monkeypatch.setattr("os.fsync", fsync)
    monkeypatch.setattr("os.replace", replace)
    atomic_write_text(tmp_path / "f", "x")
    assert events[:2] == ["fsync", "replace"]


def test_atomic_path_renames_on_success(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "picture.png"
    target.parent.mkdir()
    target.write_bytes(b"old")
    with atomic_path(target) as tmp:
        assert tmp.parent == target.parent and tmp.name.startswith(".picture.png.")
        assert tmp.match(TEMP_GLOB) and tmp.exists()
        tmp.write_bytes(b"new picture")  # what a library writing to a path would do
        assert target.read_bytes() == b"old"  # not yet visible
    assert target.read_bytes() == b"new picture"
    assert names(target.parent) == ["picture.png"]


def test_atomic_path_cleans_up_on_exception(tmp_path: Path) -> None:
    target = tmp_path / "picture.png"
    target.write_bytes(b"old")
    with pytest.raises(ValueError, match="cannot draw"), atomic_path(target) as tmp:
        tmp.write_bytes(b"half")
        raise ValueError("cannot draw")
    assert target.read_bytes() == b"old"
    assert names(tmp_path) == ["picture.png"]


def test_atomic_path_fails_when_the_api_removed_its_file(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    with pytest.raises(FileNotFoundError), atomic_path(target) as tmp:
        tmp.unlink()
    assert names(tmp_path) == []


def test_replace_file_moves_a_finished_file(tmp_path: Path) -> None:
    scratch = tmp_path / ".scratch"
    scratch.mkdir()
    (scratch / "game.z8").write_bytes(b"story")
    (tmp_path / "game.z8").write_bytes(b"old")
    assert replace_file(scratch / "game.z8", tmp_path / "game.z8") == tmp_path / "game.z8"
    assert (tmp_path / "game.z8").read_bytes() == b"story" and names(scratch) == []
    with pytest.raises(FileNotFoundError):
        replace_file(scratch / "missing", tmp_path / "game.z8")
    assert (tmp_path / "game.z8").read_bytes() == b"story"


def test_remove_stale_temp_files_removes_only_leftovers(tmp_path: Path) -> None:
    atomic_write_text(tmp_path / "a" / "ep.json", "{}")
    stale = tmp_path / "a" / ".ep.json.x1y2.tmp"
    stale.write_text("{half")
    (tmp_path / ".hidden.tmp.d").mkdir()  # not a temp file of ours
    (tmp_path / "visible.tmp").write_text("kept")  # not hidden: not ours
    assert remove_stale_temp_files(tmp_path) == [stale]
    assert (tmp_path / "a" / "ep.json").read_text() == "{}"
    assert (tmp_path / "visible.tmp").exists()


def test_leftover_of_a_killed_writer_is_matched(tmp_path: Path) -> None:
    """The temp names the writers use are exactly what remove_stale_temp_files deletes."""
    used: list[str] = []
    with atomic_path(tmp_path / "plot.png") as tmp:
        used.append(tmp.name)
    with atomic_open(tmp_path / "deep" / "summary.json"):
        used.extend(names(tmp_path / "deep"))
    # a killed process cleans nothing up: recreate its temp files where it left them
    leftovers = [tmp_path / used[0], tmp_path / "deep" / used[1]]
    for leftover in leftovers:
        leftover.write_bytes(b"half")
    assert sorted(remove_stale_temp_files(tmp_path)) == sorted(leftovers)
    assert names(tmp_path) == ["deep", "plot.png"] and names(tmp_path / "deep") == ["summary.json"]


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_get_the_mode_a_plain_open_would(tmp_path: Path, umask: int,
                                                       mode: int) -> None:
    """mkstemp's 0600 is not kept: result files and prepared data are readable by other users
    (a container server running as another user than the one that built the data) exactly as
    the umask allows."""
    previous = os.umask(umask)
    try:
        text_file = atomic_write_text(tmp_path / "a.json", "{}")
        with atomic_open(tmp_path / "b.bin") as handle:
            handle.write(b"x")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(text_file.stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "b.bin").stat().st_mode) == mode
