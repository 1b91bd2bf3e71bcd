"""LevelSource: generated pools (with the file cache) and official level checkouts."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from env_server.families.nethack.boxoban import source as source_mod
from env_server.families.nethack.boxoban.generator import GENERATOR_VERSION, generate_level
from env_server.families.nethack.boxoban.levels import parse_level, write_level_file
from env_server.families.nethack.boxoban.source import LevelSource, default_cache_dir
from tests.support.users import as_user


def _room(player_col: int) -> str:
    rows = [
        "##########",
        "#        #",
        "#  $  .  #",
        "#        #",
        "#  $  .  #",
        "#        #",
        "#  $  .  #",
        "#        #",
        "#  $  .  #",
        "##########",
    ]
    rows[3] = rows[3][:player_col] + "@" + rows[3][player_col + 1 :]
    return "\n".join(rows)


def test_generated_pool_is_seed_mod_size(tmp_path) -> None:
    source = LevelSource.generated(cache_dir=None, pool_size=10)
    text, sid = source.level_for("medium", 13)
    assert sid == f"generated/v{GENERATOR_VERSION}/medium/3"
    assert text == generate_level("medium", 3)
    assert source.level_for("medium", 3) == (text, sid)
    assert source.level_for("medium", -7) == (text, sid)
    hard, hard_sid = source.level_for("hard", 13)
    assert hard_sid.endswith("/hard/3") and hard != text
    parse_level(hard)


def test_generated_cache_files(tmp_path) -> None:
    source = LevelSource.generated(cache_dir=tmp_path, pool_size=1000)
    text, sid = source.level_for("hard", 1234)
    assert sid == f"generated/v{GENERATOR_VERSION}/hard/234"
    cached = tmp_path / f"v{GENERATOR_VERSION}" / "hard" / "000234.txt"
    assert cached.read_text() == text + "\n"
    # a later source reads the file instead of generating: prove it with a doctored file
    other = _room(2)
    cached.write_text(other + "\n")
    assert LevelSource.generated(cache_dir=tmp_path).level_for("hard", 234)[0] == other
    # a corrupt file is regenerated
    cached.write_text("garbage")
    assert LevelSource.generated(cache_dir=tmp_path).level_for("hard", 234)[0] == text
    assert cached.read_text() == text + "\n"
    assert sorted(p.name for p in cached.parent.iterdir()) == ["000234.txt"]  # no lock file


def test_default_cache_dir_follows_env(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("MORIA_CACHE_DIR", str(tmp_path))
    assert default_cache_dir() == tmp_path / "boxoban"
    source = LevelSource.generated()
    assert source.cache_dir == tmp_path / "boxoban"
    source.level_for("medium", 1)
    assert (tmp_path / "boxoban" / f"v{GENERATOR_VERSION}" / "medium" / "000001.txt").exists()
    monkeypatch.delenv("MORIA_CACHE_DIR")
    assert default_cache_dir() == Path.home() / ".cache" / "moria" / "boxoban"


def test_unwritable_cache_falls_back(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    source = LevelSource.generated(cache_dir=blocker)
    assert source.level_for("medium", 4)[0] == generate_level("medium", 4)


def _forbid(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    def forbidden(*_: object, **__: object) -> None:
        raise AssertionError("the read path must not lock, write or generate")

    for name in names:
        monkeypatch.setattr(source_mod, name, forbidden)


def test_a_cached_level_is_read_with_no_lock_and_no_write(tmp_path, monkeypatch) -> None:
    built = LevelSource.generated(cache_dir=tmp_path)
    expected = {seed: built.level_for("medium", seed)[0] for seed in (3, 4)}
    _forbid(monkeypatch, "file_lock", "atomic_write_text", "make_dirs", "generate_level")
    source = LevelSource.generated(cache_dir=tmp_path)
    for seed, text in expected.items():
        assert source.is_cached("medium", seed)
        assert source.level_for("medium", seed)[0] == text
    assert not source.is_cached("medium", 5)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")
def test_levels_built_by_root_are_read_by_another_user_from_a_read_only_cache(
    monkeypatch, caplog
) -> None:
    # the container image: levels built by root (under a strict umask, to prove the explicit
    # modes), folders then made read-only; the server runs as UID 10001
    top = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        top.chmod(0o755)
        old = os.umask(0o077)
        try:
            built = LevelSource.generated(cache_dir=top / "boxoban")
            expected = built.level_for("hard", 7)[0]
        finally:
            os.umask(old)
        for folder in [top / "boxoban", *(top / "boxoban").rglob("*")]:
            if folder.is_dir():
                folder.chmod(0o555)
        _forbid(monkeypatch, "generate_level")
        source = LevelSource.generated(cache_dir=top / "boxoban")
        assert as_user(
            10001,
            lambda: (
                source.is_cached("hard", 7)
                and source.level_for("hard", 7)[0] == expected
                and not caplog.records
            ),
        )
        files = [p.name for p in (top / "boxoban").rglob("*") if p.is_file()]
        assert files == ["000007.txt"]
    finally:
        for folder in [top, *top.rglob("*")]:
            if folder.is_dir():
                folder.chmod(0o755)
        shutil.rmtree(top)


def _official(tmp_path: Path) -> Path:
    root = tmp_path / "boxoban-levels"
    (root / "medium" / "train").mkdir(parents=True)
    (root / "hard").mkdir()
    write_level_file(root / "medium" / "train" / "000.txt", [_room(1), _room(2), _room(3)])
    write_level_file(root / "medium" / "train" / "001.txt", [_room(4), _room(5)])
    write_level_file(root / "hard" / "000.txt", [_room(6)])
    return root


def test_official_layout_picks_file_then_level(tmp_path) -> None:
    source = LevelSource.official(_official(tmp_path))
    # 2 medium files: file = seed % 2, level = (seed // 2) % n_levels
    assert source.level_for("medium", 0) == (_room(1), "official/medium/train/000.txt#0")
    assert source.level_for("medium", 1) == (_room(4), "official/medium/train/001.txt#0")
    assert source.level_for("medium", 2) == (_room(2), "official/medium/train/000.txt#1")
    assert source.level_for("medium", 3) == (_room(5), "official/medium/train/001.txt#1")
    assert source.level_for("medium", 7) == (_room(5), "official/medium/train/001.txt#1")
    assert source.level_for("medium", 4) == (_room(3), "official/medium/train/000.txt#2")
    assert source.level_for("medium", 6) == (_room(1), "official/medium/train/000.txt#0")
    assert source.level_for("hard", 99) == (_room(6), "official/hard/000.txt#0")
    assert LevelSource.official(tmp_path / "boxoban-levels").level_for("medium", 5) == (
        source.level_for("medium", 5)
    )


def test_official_errors_name_the_expected_layout(tmp_path, monkeypatch) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        LevelSource.official(tmp_path / "missing")
    empty = tmp_path / "empty"
    (empty / "medium" / "train").mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match=r"medium/train/ and .*hard/"):
        LevelSource.official(empty)
    only_medium = _official(tmp_path)
    for f in (only_medium / "hard").iterdir():
        f.unlink()
    source = LevelSource.official(only_medium)
    with pytest.raises(FileNotFoundError, match=r"no hard Boxoban levels.*hard/"):
        source.level_for("hard", 0)
    with pytest.raises(ValueError, match="unknown Boxoban difficulty"):
        source.level_for("easy", 0)
    monkeypatch.setenv("MORIA_BOXOBAN_LEVELS", str(only_medium))
    assert LevelSource.from_env().kind == "official"
    monkeypatch.delenv("MORIA_BOXOBAN_LEVELS")
    assert LevelSource.from_env().kind == "generated"
