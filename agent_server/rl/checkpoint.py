"""The ``moria-mlp`` checkpoint format: a small multilayer perceptron policy in one ``.npz`` file.

The file is a NumPy ``.npz`` archive (plain or compressed; it never needs pickle) holding:

- ``layer{i}.weight``: float32 array of shape ``(out_i, in_i)``, for ``i = 0 .. L-1``;
- ``layer{i}.bias``: float32 array of shape ``(out_i,)``;
- ``metadata``: a uint8 array holding UTF-8 JSON (see ``CheckpointMetadata``).

Version 1 reads one env tensor (``observation_key``), flattened and scaled. Version 2 reads a
list of ``inputs`` (``InputSpec``: a tensor, optionally one channel of it, either flattened and
scaled or one-hot encoded), concatenated in order. Layers chain: ``in_0`` is the input size,
``in_{i+1} == out_i``, and ``out_{L-1}`` is the number of actions. Every layer but the last is
followed by the activation; the last layer's outputs are the action logits. The full
description, with every metadata key, is in ``docs/rl-checkpoints.md``.
"""

from __future__ import annotations

import json
import math
import os
import threading
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from moria.files import atomic_open

#: The ``format`` value every checkpoint carries.
FORMAT = "moria-mlp"
#: The newest ``version`` this code reads and writes (it reads every one of ``VERSIONS``).
VERSION = 2
#: The versions this code reads: 1 (one flattened tensor), 2 (a list of ``inputs``).
VERSIONS = (1, 2)
#: Supported hidden-layer activations.
ACTIVATIONS = ("relu", "tanh")
#: Supported observation preprocessing operations of version 1.
PREPROCESS_OPS = ("flatten",)
#: Supported input operations of version 2.
INPUT_OPS = ("flatten", "one_hot")

_REQUIRED_KEYS = ("format", "version", "env", "tasks", "observation_key", "observation_shape",
                  "preprocess", "activation", "action_names", "trained_with")
_REQUIRED_KEYS_V2 = ("format", "version", "env", "tasks", "inputs", "activation",
                     "action_names", "trained_with")


class CheckpointError(ValueError):
    """A checkpoint file is missing, unreadable or inconsistent, or an observation does not fit
    it. The message names the file and what was expected."""


@dataclass(frozen=True)
class InputSpec:
    """One part of a version-2 policy input.

    ``key``: the env tensor read (``"image"``). ``shape``: that tensor's shape (``[3, 3, 3]``;
    ``()`` for a scalar).
    ``channel``: when set, only ``tensor[..., channel]`` is used (shape ``shape[:-1]``).
    ``op``: ``"flatten"``: cast to float32, flatten in C order, multiply by ``scale``
    (``prod(shape)`` values); ``"one_hot"``: every element (C order), an integer in
    ``0 .. size-1``, becomes ``size`` values, 1.0 at its value and 0.0 elsewhere
    (``prod(shape) * size`` values).
    """

    key: str
    shape: tuple[int, ...]
    op: str = "flatten"
    scale: float = 1.0
    size: int = 0
    channel: int | None = None

    @property
    def used_shape(self) -> tuple[int, ...]:
        """The shape after channel selection."""
        return self.shape[:-1] if self.channel is not None else self.shape

    @property
    def width(self) -> int:
        """How many values this part contributes to the policy input."""
        n = math.prod(self.used_shape)
        return n * self.size if self.op == "one_hot" else n

    def to_json(self) -> dict[str, Any]:
        """The JSON object stored in a version-2 ``inputs`` list."""
        out: dict[str, Any] = {"key": self.key, "shape": list(self.shape), "op": self.op}
        if self.op == "flatten":
            out["scale"] = self.scale
        else:
            out["size"] = self.size
        if self.channel is not None:
            out["channel"] = self.channel
        return out

    def encode(self, tensor: np.ndarray, source: str) -> np.ndarray:
        """``tensor`` (shape ``shape``) -> float32 ``(width,)``.

        Raises:
            CheckpointError: the shape differs, or (one_hot) a value is not an integer in
                ``0 .. size-1``.
        """
        arr = np.asarray(tensor)
        if tuple(arr.shape) != self.shape:
            raise CheckpointError(
                f"{source}: observation {self.key!r} has shape {list(arr.shape)}, but the "
                f"checkpoint expects {list(self.shape)}")
        if self.channel is not None:
            arr = arr[..., self.channel]
        if self.op == "flatten":
            return arr.astype(np.float32).reshape(-1) * np.float32(self.scale)
        flat = arr.reshape(-1)
        if np.issubdtype(flat.dtype, np.integer):
            values = flat.astype(np.int64)
        else:
            values = np.asarray(np.floor(flat), dtype=np.int64)
            if not np.all(values == flat):
                raise CheckpointError(f"{source}: one_hot input {self.key!r} holds "
                                      "non-integer values")
        bad = (values < 0) | (values >= self.size)
        if bad.any():
            raise CheckpointError(
                f"{source}: one_hot input {self.key!r}"
                f"{'' if self.channel is None else f' channel {self.channel}'} holds "
                f"{int(values[bad][0])}; expected integers 0..{self.size - 1}")
        out = np.zeros((values.size, self.size), dtype=np.float32)
        out[np.arange(values.size), values] = 1.0
        return out.reshape(-1)


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

    Version 2: ``inputs`` (non-empty) lists the parts of the input (``InputSpec``), concatenated
    in order; ``observation_key``, ``observation_shape`` and ``preprocess_scale`` are then
    unused (leave them at their defaults). With no ``inputs`` the metadata is version 1.
    """

    env: str
    tasks: tuple[str, ...]
    observation_key: str = ""
    observation_shape: tuple[int, ...] = ()
    preprocess_scale: float = 1.0
    activation: str = "relu"
    action_names: tuple[str, ...] = ()
    trained_with: dict[str, Any] = field(default_factory=dict)
    inputs: tuple[InputSpec, ...] = ()

    @property
    def version(self) -> int:
        """2 when ``inputs`` is set, else 1."""
        return 2 if self.inputs else 1

    @property
    def input_specs(self) -> tuple[InputSpec, ...]:
        """The input parts, in order (version 1: the one flattened ``observation_key``)."""
        if self.inputs:
            return self.inputs
        return (InputSpec(self.observation_key, tuple(self.observation_shape), "flatten",
                          self.preprocess_scale),)

    @property
    def input_size(self) -> int:
        """The total input width (the first layer's ``in``)."""
        return sum(spec.width for spec in self.input_specs)

    def to_json(self) -> dict[str, Any]:
        """The metadata as the JSON object stored in the file (``format`` and ``version``
        included)."""
        if self.inputs:
            return {
                "format": FORMAT,
                "version": 2,
                "env": self.env,
                "tasks": list(self.tasks),
                "inputs": [spec.to_json() for spec in self.inputs],
                "activation": self.activation,
                "action_names": list(self.action_names),
                "trained_with": dict(self.trained_with),
            }
        return {
            "format": FORMAT,
            "version": 1,
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

    @property
    def input_keys(self) -> tuple[str, ...]:
        """The env tensors the policy reads, without repeats, in first-use order."""
        return tuple(dict.fromkeys(spec.key for spec in self.metadata.input_specs))

    def preprocess(self, obs: np.ndarray | Mapping[str, np.ndarray]) -> np.ndarray:
        """The observation -> float32 vector ``(input_size,)``: every input part encoded
        (``InputSpec.encode``) and concatenated in order.

        ``obs`` is a mapping from tensor name to array, or, for a policy reading a single
        tensor (every version-1 file), that array alone.

        Raises:
            CheckpointError: a tensor is missing, has another shape than the checkpoint's, or
                holds a value its one_hot part cannot encode.
        """
        specs = self.metadata.input_specs
        if not isinstance(obs, Mapping):  # a bare array: the policy's only tensor
            if len(self.input_keys) != 1:
                raise CheckpointError(f"{self.source}: the policy reads tensors "
                                      f"{list(self.input_keys)}; pass a mapping of them")
            obs = {self.input_keys[0]: obs}
        missing = [k for k in self.input_keys if k not in obs]
        if missing:
            raise CheckpointError(f"{self.source}: the observation lacks tensors {missing}; "
                                  f"the policy reads {list(self.input_keys)}")
        parts = [spec.encode(obs[spec.key], self.source) for spec in specs]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def logits(self, obs: np.ndarray | Mapping[str, np.ndarray]) -> np.ndarray:
        """The action logits, float32 ``(num_actions,)``, in ``metadata.action_names`` order.
        Deterministic: equal observations give bitwise equal logits. ``obs`` as in
        ``preprocess``.

        Raises:
            CheckpointError: the observation does not fit the checkpoint.
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
    with atomic_open(target) as fh:  # a handle: np.savez would add .npz to a path
        np.savez_compressed(fh, **arrays)  # type: ignore[arg-type]
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
    version = meta.get("version")
    if isinstance(version, bool) or version not in VERSIONS:
        raise CheckpointError(f"{source}: unsupported {FORMAT} version {version!r}; "
                              f"this reader knows versions {list(VERSIONS)}")
    if version == 2:
        return _parse_metadata_v2(meta, source)
    missing = [k for k in _REQUIRED_KEYS if k not in meta]
    if missing:
        raise CheckpointError(f"{source}: metadata lacks {missing}; required keys: "
                              f"{list(_REQUIRED_KEYS)}")

    tasks, names, trained = _common_fields(meta, source)

    def bad(key: str, expected: str) -> CheckpointError:
        return CheckpointError(f"{source}: metadata {key!r} = {meta[key]!r}; expected {expected}")

    if not isinstance(meta["observation_key"], str) or not meta["observation_key"]:
        raise bad("observation_key", "the name of an env tensor")
    shape = meta["observation_shape"]
    if not isinstance(shape, list) or not shape or not all(_is_int(d) and d > 0 for d in shape):
        raise bad("observation_shape", "a non-empty list of positive integers")
    pre = meta["preprocess"]
    if not isinstance(pre, dict) or pre.get("op") not in PREPROCESS_OPS:
        raise bad("preprocess", f"an object with op in {list(PREPROCESS_OPS)} and a float scale")
    scale = pre.get("scale", 1.0)
    if (not isinstance(scale, int | float) or isinstance(scale, bool)
            or not math.isfinite(float(scale))):
        raise bad("preprocess", "a finite number as preprocess.scale")
    return CheckpointMetadata(
        env=meta["env"], tasks=tasks, observation_key=meta["observation_key"],
        observation_shape=tuple(shape), preprocess_scale=float(scale),
        activation=meta["activation"], action_names=names, trained_with=trained)


def _common_fields(meta: dict[str, Any], source: str) -> tuple[tuple[str, ...],
                                                               tuple[str, ...], dict[str, Any]]:
    """Validate ``env``, ``tasks``, ``activation``, ``action_names``, ``trained_with``."""

    def bad(key: str, expected: str) -> CheckpointError:
        return CheckpointError(f"{source}: metadata {key!r} = {meta[key]!r}; expected {expected}")

    if not isinstance(meta["env"], str) or not meta["env"]:
        raise bad("env", "a non-empty env family name")
    tasks = meta["tasks"]
    if not isinstance(tasks, list) or not tasks or not all(isinstance(t, str) for t in tasks):
        raise bad("tasks", "a non-empty list of task names")
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
    return tuple(tasks), tuple(names), trained


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_input_spec(raw: Any, where: str) -> InputSpec:
    """One entry of a version-2 ``inputs`` list -> ``InputSpec``.

    Raises:
        CheckpointError: the entry is not an object with a non-empty ``key``, a ``shape`` of
            positive integers, an ``op`` in ``INPUT_OPS`` (``flatten`` with a finite ``scale``,
            default 1; ``one_hot`` with an integer ``size`` >= 2), and an optional integer
            ``channel`` within the last axis. ``where`` prefixes the message.
    """
    def bad(expected: str) -> CheckpointError:
        return CheckpointError(f"{where} = {raw!r}; expected {expected}")

    if not isinstance(raw, dict):
        raise bad("an object {key, shape, op, ...}")
    key, shape, op = raw.get("key"), raw.get("shape"), raw.get("op")
    if not isinstance(key, str) or not key:
        raise bad("a non-empty 'key' (the env tensor name)")
    if not isinstance(shape, list) or not all(_is_int(d) and d > 0 for d in shape):
        raise bad("'shape': a list of positive integers ([] for a scalar)")
    if op not in INPUT_OPS:
        raise bad(f"'op' in {list(INPUT_OPS)}")
    channel = raw.get("channel")
    if channel is not None and (len(shape) < 2 or not _is_int(channel)
                                or not 0 <= channel < shape[-1]):
        raise bad("'channel': an integer index into the last axis of a tensor with at least "
                  "2 dimensions")
    if op == "flatten":
        scale = raw.get("scale", 1.0)
        if not isinstance(scale, int | float) or isinstance(scale, bool) \
                or not math.isfinite(float(scale)):
            raise bad("a finite number as 'scale' for op flatten")
        return InputSpec(key, tuple(shape), op, scale=float(scale), channel=channel)
    size = raw.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 2:
        raise bad("an integer 'size' >= 2 for op one_hot")
    return InputSpec(key, tuple(shape), op, size=int(size), channel=channel)


def _parse_metadata_v2(meta: dict[str, Any], source: str) -> CheckpointMetadata:
    missing = [k for k in _REQUIRED_KEYS_V2 if k not in meta]
    if missing:
        raise CheckpointError(f"{source}: metadata lacks {missing}; required keys (version 2): "
                              f"{list(_REQUIRED_KEYS_V2)}")
    tasks, names, trained = _common_fields(meta, source)
    raw_inputs = meta["inputs"]
    if not isinstance(raw_inputs, list) or not raw_inputs:
        raise CheckpointError(f"{source}: metadata 'inputs' = {raw_inputs!r}; expected a "
                              "non-empty list of input objects")
    inputs = tuple(parse_input_spec(item, f"{source}: metadata inputs[{i}]")
                   for i, item in enumerate(raw_inputs))
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in inputs:
        if shapes.setdefault(spec.key, spec.shape) != spec.shape:
            raise CheckpointError(f"{source}: metadata inputs give tensor {spec.key!r} two "
                                  f"shapes, {list(shapes[spec.key])} and {list(spec.shape)}")
    return CheckpointMetadata(env=meta["env"], tasks=tasks, activation=meta["activation"],
                              action_names=names, trained_with=trained, inputs=inputs)


def _check_layers(weights: Sequence[np.ndarray], biases: Sequence[np.ndarray],
                  metadata: CheckpointMetadata, source: str) -> None:
    if not weights or len(weights) != len(biases):
        raise CheckpointError(f"{source}: expected as many biases as weights (at least one "
                              f"layer); got {len(weights)} weights and {len(biases)} biases")
    expected_in = metadata.input_size
    for i, (w, b) in enumerate(zip(weights, biases, strict=True)):
        if w.ndim != 2:
            raise CheckpointError(f"{source}: layer{i}.weight has shape {list(w.shape)}; "
                                  "expected a 2-D (out, in) matrix")
        if w.shape[1] != expected_in:
            what = (("the flattened observation size (product of observation_shape "
                     f"{list(metadata.observation_shape)})") if not metadata.inputs else
                    "the total width of the inputs") if i == 0 \
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
