"""The ``moria-mlp`` checkpoint format: a small multilayer perceptron policy in one ``.npz`` file.

The file is a NumPy ``.npz`` archive (plain or compressed; it never needs pickle) holding:

- ``layer{i}.weight``: float32 array of shape ``(out_i, in_i)``, for ``i = 0 .. L-1``;
- ``layer{i}.bias``: float32 array of shape ``(out_i,)``;
- ``metadata``: a uint8 array holding UTF-8 JSON (see ``CheckpointMetadata``).

Layers chain: ``in_0`` is the flattened observation size, ``in_{i+1} == out_i``, and
``out_{L-1}`` is the number of actions. Every layer but the last is followed by the activation;
the last layer's outputs are the action logits. The full description, with every metadata key,
is in ``docs/rl-checkpoints.md``.
"""

from __future__ import annotations

import json
import math
import os
import threading
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

#: The ``format`` value every checkpoint carries.
FORMAT = "moria-mlp"
#: The only ``version`` this code reads and writes.
VERSION = 1
#: Supported hidden-layer activations.
ACTIVATIONS = ("relu", "tanh")
#: Supported observation preprocessing operations.
PREPROCESS_OPS = ("flatten",)

_REQUIRED_KEYS = ("format", "version", "env", "tasks", "observation_key", "observation_shape",
                  "preprocess", "activation", "action_names", "trained_with")


class CheckpointError(ValueError):
    """A checkpoint file is missing, unreadable or inconsistent, or an observation does not fit
    it. The message names the file and what was expected."""


@dataclass(frozen=True)
class CheckpointMetadata:
    """The JSON ``metadata`` entry of a checkpoint.

    ``env``: the env family the policy plays (``"pettingzoo"``). ``tasks``: the tasks it was
    trained for (non-empty). ``observation_key``: the name of the env tensor it reads
    (``"observation"``). ``observation_shape``: that tensor's shape (connect four: ``[6, 7, 2]``).
    ``preprocess``: ``{"op": "flatten", "scale": s}``: the tensor is cast to float32, flattened
    in C order and multiplied by ``s``. ``activation``: ``"relu"`` or ``"tanh"`` after every
    hidden layer. ``action_names``: output index -> the env's action name (``"column 1"`` ..).
    ``trained_with``: free-form provenance (algorithm, episodes, opponent, seed, date, command).
    """

    env: str
    tasks: tuple[str, ...]
    observation_key: str
    observation_shape: tuple[int, ...]
    preprocess_scale: float
    activation: str
    action_names: tuple[str, ...]
    trained_with: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The metadata as the JSON object stored in the file (``format`` and ``version``
        included)."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "env": self.env,
            "tasks": list(self.tasks),
            "observation_key": self.observation_key,
            "observation_shape": list(self.observation_shape),
            "preprocess": {"op": "flatten", "scale": self.preprocess_scale},
            "activation": self.activation,
            "action_names": list(self.action_names),
            "trained_with": dict(self.trained_with),
        }


class MlpPolicy:
    """A loaded ``moria-mlp`` policy: a pure function from one observation to action logits.

    Args:
        weights: per layer, float32 ``(out, in)`` matrices that chain.
        biases: per layer, float32 ``(out,)`` vectors.
        metadata: the checkpoint's metadata.
        source: the file it came from (used in error messages).

    Raises:
        CheckpointError: the layers do not chain, or do not fit the metadata.
    """

    def __init__(self, weights: Sequence[np.ndarray], biases: Sequence[np.ndarray],
                 metadata: CheckpointMetadata, source: str = "<memory>") -> None:
        self.source = source
        self.metadata = metadata
        self.weights = [np.ascontiguousarray(w, dtype=np.float32) for w in weights]
        self.biases = [np.ascontiguousarray(b, dtype=np.float32) for b in biases]
        _check_layers(self.weights, self.biases, metadata, source)

    @property
    def input_size(self) -> int:
        """Flattened observation size (the first layer's ``in``)."""
        return int(self.weights[0].shape[1])

    @property
    def num_actions(self) -> int:
        """Number of logits (the last layer's ``out``)."""
        return int(self.weights[-1].shape[0])

    def preprocess(self, obs: np.ndarray) -> np.ndarray:
        """``obs`` (shape ``metadata.observation_shape``) -> float32 vector ``(input_size,)``.

        Raises:
            CheckpointError: the shape is not the checkpoint's ``observation_shape``.
        """
        arr = np.asarray(obs)
        expected = self.metadata.observation_shape
        if tuple(arr.shape) != expected:
            raise CheckpointError(
                f"{self.source}: observation {self.metadata.observation_key!r} has shape "
                f"{list(arr.shape)}, but the checkpoint expects {list(expected)}")
        return arr.astype(np.float32).reshape(-1) * np.float32(self.metadata.preprocess_scale)

    def logits(self, obs: np.ndarray) -> np.ndarray:
        """The action logits, float32 ``(num_actions,)``, in ``metadata.action_names`` order.
        Deterministic: equal observations give bitwise equal logits.

        Raises:
            CheckpointError: the observation shape does not fit the checkpoint.
        """
        h = self.preprocess(obs)
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            h = w @ h + b
            if i < last:
                h = np.maximum(h, np.float32(0.0)) if self.metadata.activation == "relu" \
                    else np.tanh(h)
        return h.astype(np.float32)


def save_checkpoint(path: str | os.PathLike[str], weights: Sequence[np.ndarray],
                    biases: Sequence[np.ndarray], metadata: CheckpointMetadata) -> Path:
    """Write a compressed ``moria-mlp`` checkpoint to ``path`` (atomically: a temporary file
    beside it is renamed into place) and return the path.

    Raises:
        CheckpointError: the layers do not chain or do not fit ``metadata`` (nothing written).
    """
    target = Path(path)
    policy = MlpPolicy(weights, biases, metadata, source=str(target))  # validates
    arrays: dict[str, np.ndarray] = {}
    for i, (w, b) in enumerate(zip(policy.weights, policy.biases, strict=True)):
        arrays[f"layer{i}.weight"] = w
        arrays[f"layer{i}.bias"] = b
    blob = json.dumps(metadata.to_json(), sort_keys=True).encode("utf-8")
    arrays["metadata"] = np.frombuffer(blob, dtype=np.uint8)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    with open(tmp, "wb") as fh:
        np.savez_compressed(fh, **arrays)  # type: ignore[arg-type]
    os.replace(tmp, target)
    return target


def load_checkpoint(path: str | os.PathLike[str]) -> MlpPolicy:
    """Read and validate a ``moria-mlp`` checkpoint.

    Raises:
        CheckpointError: the file is missing, is not an ``.npz`` archive, has no or unreadable
            ``metadata``, an unknown ``format``/``version``, a missing or ill-typed metadata key,
            missing layer arrays, layers that do not chain, or a last layer whose size differs
            from the number of ``action_names``. Each message names the file.
    """
    source = str(path)
    p = Path(path)
    if not p.is_file():
        raise CheckpointError(f"{source}: checkpoint file not found (expected a moria-mlp .npz "
                              "file, see docs/rl-checkpoints.md)")
    try:
        with np.load(p, allow_pickle=False) as archive:
            arrays = {name: np.array(archive[name]) for name in archive.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        detail = f"{type(exc).__name__}: {exc}"[:200]
        raise CheckpointError(f"{source}: not a NumPy .npz archive of plain arrays ({detail}); "
                              "expected a moria-mlp checkpoint") from None
    if "metadata" not in arrays:
        raise CheckpointError(f"{source}: no 'metadata' entry; expected UTF-8 JSON with "
                              f"format {FORMAT!r}")
    metadata = _parse_metadata(arrays.pop("metadata"), source)
    weights: list[np.ndarray] = []
    biases: list[np.ndarray] = []
    i = 0
    while f"layer{i}.weight" in arrays or f"layer{i}.bias" in arrays:
        for kind in ("weight", "bias"):
            if f"layer{i}.{kind}" not in arrays:
                raise CheckpointError(f"{source}: layer{i}.{kind} is missing")
        weights.append(arrays.pop(f"layer{i}.weight"))
        biases.append(arrays.pop(f"layer{i}.bias"))
        i += 1
    if not weights:
        raise CheckpointError(f"{source}: no layers; expected arrays layer0.weight, "
                              "layer0.bias, ...")
    if arrays:
        raise CheckpointError(f"{source}: unexpected entries {sorted(arrays)}; expected only "
                              f"layer0..layer{i - 1} weights/biases and metadata")
    for idx, (w, b) in enumerate(zip(weights, biases, strict=True)):
        for name, arr in ((f"layer{idx}.weight", w), (f"layer{idx}.bias", b)):
            if not np.issubdtype(arr.dtype, np.floating):
                raise CheckpointError(f"{source}: {name} has dtype {arr.dtype}; expected "
                                      "float32")
            if not np.all(np.isfinite(arr)):
                raise CheckpointError(f"{source}: {name} holds NaN or infinite values")
    return MlpPolicy(weights, biases, metadata, source=source)


_CACHE: dict[tuple[str, int, int], MlpPolicy] = {}
_CACHE_LOCK = threading.Lock()


def load_checkpoint_cached(path: str | os.PathLike[str]) -> MlpPolicy:
    """``load_checkpoint`` memoised on (resolved path, mtime, size): a rewritten file is read
    again. The policy is immutable, so sharing it between episodes leaks no episode state.

    Raises:
        CheckpointError: as ``load_checkpoint``.
    """
    p = Path(path)
    try:
        st = p.resolve().stat()
    except OSError:
        return load_checkpoint(path)  # raises the clear "not found" error
    key = (str(p.resolve()), st.st_mtime_ns, st.st_size)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
    if hit is not None:
        return hit
    policy = load_checkpoint(path)
    with _CACHE_LOCK:
        for old in [k for k in _CACHE if k[0] == key[0]]:
            del _CACHE[old]
        _CACHE[key] = policy
    return policy


# -- validation ---------------------------------------------------------------------------------


def _parse_metadata(raw: np.ndarray, source: str) -> CheckpointMetadata:
    if raw.dtype != np.uint8 or raw.ndim != 1:
        raise CheckpointError(f"{source}: 'metadata' must be a 1-D uint8 array of UTF-8 JSON; "
                              f"got dtype {raw.dtype}, shape {list(raw.shape)}")
    try:
        meta = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{source}: 'metadata' is not UTF-8 JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise CheckpointError(f"{source}: 'metadata' must be a JSON object")
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"{source}: unknown checkpoint format {meta.get('format')!r}; "
                              f"expected {FORMAT!r}")
    if meta.get("version") != VERSION:
        raise CheckpointError(f"{source}: unsupported {FORMAT} version {meta.get('version')!r}; "
                              f"this reader knows version {VERSION}")
    missing = [k for k in _REQUIRED_KEYS if k not in meta]
    if missing:
        raise CheckpointError(f"{source}: metadata lacks {missing}; required keys: "
                              f"{list(_REQUIRED_KEYS)}")

    def bad(key: str, expected: str) -> CheckpointError:
        return CheckpointError(f"{source}: metadata {key!r} = {meta[key]!r}; expected {expected}")

    if not isinstance(meta["env"], str) or not meta["env"]:
        raise bad("env", "a non-empty env family name")
    tasks = meta["tasks"]
    if not isinstance(tasks, list) or not tasks or not all(isinstance(t, str) for t in tasks):
        raise bad("tasks", "a non-empty list of task names")
    if not isinstance(meta["observation_key"], str) or not meta["observation_key"]:
        raise bad("observation_key", "the name of an env tensor")
    shape = meta["observation_shape"]
    if (not isinstance(shape, list) or not shape
            or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape)):
        raise bad("observation_shape", "a non-empty list of positive integers")
    pre = meta["preprocess"]
    if not isinstance(pre, dict) or pre.get("op") not in PREPROCESS_OPS:
        raise bad("preprocess", f"an object with op in {list(PREPROCESS_OPS)} and a float scale")
    scale = pre.get("scale", 1.0)
    if (not isinstance(scale, int | float) or isinstance(scale, bool)
            or not math.isfinite(float(scale))):
        raise bad("preprocess", "a finite number as preprocess.scale")
    if meta["activation"] not in ACTIVATIONS:
        raise bad("activation", f"one of {list(ACTIVATIONS)}")
    names = meta["action_names"]
    if (not isinstance(names, list) or not names
            or not all(isinstance(n, str) and n for n in names) or len(set(names)) != len(names)):
        raise bad("action_names", "a non-empty list of distinct action names")
    trained = meta["trained_with"]
    if isinstance(trained, str):
        trained = {"notes": trained}
    if not isinstance(trained, dict):
        raise bad("trained_with", "an object (or a text) describing how it was trained")
    return CheckpointMetadata(
        env=meta["env"], tasks=tuple(tasks), observation_key=meta["observation_key"],
        observation_shape=tuple(shape), preprocess_scale=float(scale),
        activation=meta["activation"], action_names=tuple(names), trained_with=trained)


def _check_layers(weights: Sequence[np.ndarray], biases: Sequence[np.ndarray],
                  metadata: CheckpointMetadata, source: str) -> None:
    if not weights or len(weights) != len(biases):
        raise CheckpointError(f"{source}: expected as many biases as weights (at least one "
                              f"layer); got {len(weights)} weights and {len(biases)} biases")
    expected_in = math.prod(metadata.observation_shape)
    for i, (w, b) in enumerate(zip(weights, biases, strict=True)):
        if w.ndim != 2:
            raise CheckpointError(f"{source}: layer{i}.weight has shape {list(w.shape)}; "
                                  "expected a 2-D (out, in) matrix")
        if w.shape[1] != expected_in:
            what = ("the flattened observation size (product of observation_shape "
                    f"{list(metadata.observation_shape)})") if i == 0 \
                else f"layer{i - 1}'s output size"
            raise CheckpointError(f"{source}: layer{i}.weight has shape {list(w.shape)}; its "
                                  f"input size must be {expected_in}, {what}: the layers "
                                  "do not chain")
        if b.shape != (w.shape[0],):
            raise CheckpointError(f"{source}: layer{i}.bias has shape {list(b.shape)}; "
                                  f"expected [{w.shape[0]}] to match layer{i}.weight")
        expected_in = int(w.shape[0])
    if expected_in != len(metadata.action_names):
        raise CheckpointError(f"{source}: the last layer has {expected_in} outputs but "
                              f"metadata lists {len(metadata.action_names)} action_names; "
                              "they must be equal")
