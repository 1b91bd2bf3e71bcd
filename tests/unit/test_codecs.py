"""moria.codecs: tensors and images round-trip; malformed input is rejected clearly."""

from __future__ import annotations

import numpy as np
import pytest
from google.protobuf import json_format, struct_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from moria.codecs import (
    CodecError,
    array_from_tensor,
    dict_from_struct,
    image_from_rgb,
    png_bytes,
    rgb_from_image,
    struct_from_dict,
    tensor_from_array,
)
from moria.common.v1 import types_pb2

DTYPES = [np.bool_, np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32, np.uint64,
          np.int64, np.float16, np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_round_trip(dtype: type) -> None:
    array = (np.arange(24).reshape(2, 3, 4) % 7).astype(dtype)
    tensor = tensor_from_array(array)
    assert list(tensor.shape) == [2, 3, 4]
    assert len(tensor.data) == array.nbytes
    back = array_from_tensor(types_pb2.Tensor.FromString(tensor.SerializeToString()))
    assert back.dtype == array.dtype and np.array_equal(back, array)


def test_tensor_bytes_are_little_endian() -> None:
    tensor = tensor_from_array(np.array([1], dtype=">i4"))
    assert tensor.data == b"\x01\x00\x00\x00"
    assert tensor.dtype == types_pb2.DATA_TYPE_INT32


def test_scalar_and_empty_tensors() -> None:
    assert array_from_tensor(tensor_from_array(np.float32(2.5))).shape == ()
    assert array_from_tensor(tensor_from_array(np.zeros((0, 3), np.int64))).shape == (0, 3)


@pytest.mark.parametrize("tensor, message", [
    (types_pb2.Tensor(shape=[1], data=b"\x00"), "not set"),
    (types_pb2.Tensor(dtype=types_pb2.DATA_TYPE_INT32, shape=[2], data=b"\x00" * 7), "needs 8"),
    (types_pb2.Tensor(dtype=types_pb2.DATA_TYPE_UINT8, shape=[-1], data=b""), "negative"),
])
def test_malformed_tensors_are_rejected(tensor: types_pb2.Tensor, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        array_from_tensor(tensor)


def test_unsupported_dtype_lists_the_allowed_ones() -> None:
    with pytest.raises(CodecError, match="float32"):
        tensor_from_array(np.array(["a"]))


def test_png_and_raw_images_round_trip() -> None:
    rng = np.random.default_rng(0)
    frame = rng.integers(0, 255, size=(5, 7, 3), dtype=np.uint8)
    png = image_from_rgb(frame)
    assert png.encoding == types_pb2.IMAGE_ENCODING_PNG and png.data[:4] == b"\x89PNG"
    assert (png.width, png.height) == (7, 5)
    assert np.array_equal(rgb_from_image(png), frame)
    raw = image_from_rgb(frame, types_pb2.IMAGE_ENCODING_RAW_RGB)
    assert raw.data == frame.tobytes()
    assert np.array_equal(rgb_from_image(raw), frame)
    assert png_bytes(raw)[:4] == b"\x89PNG"


def test_bad_images_are_rejected() -> None:
    with pytest.raises(CodecError, match="H, W, 3"):
        image_from_rgb(np.zeros((4, 4), np.uint8))
    with pytest.raises(CodecError, match="needs 48"):
        rgb_from_image(types_pb2.Image(encoding=types_pb2.IMAGE_ENCODING_RAW_RGB, width=4,
                                       height=4, data=b"\x00"))
    with pytest.raises(CodecError, match="PNG"):
        rgb_from_image(types_pb2.Image(encoding=types_pb2.IMAGE_ENCODING_PNG, data=b"junk"))


def test_struct_round_trip_with_numpy_values() -> None:
    data = {"progression": np.float64(0.5), "steps": np.int64(3), "names": ("a", "b"),
            "nested": {"ok": True}}
    assert dict_from_struct(struct_from_dict(data)) == {
        "progression": 0.5, "steps": 3.0, "names": ["a", "b"], "nested": {"ok": True}}


#: JSON-like values as metrics and infos hold them: scalars, nested dicts and lists, numpy
#: scalars and arrays (``Struct.update`` takes the same after ``.item()`` / ``.tolist()``).
_SCALARS = (st.none() | st.booleans() | st.integers(-2**53, 2**53)
            | st.floats(allow_nan=False) | st.text(max_size=20)
            | st.integers(-1000, 1000).map(np.int64) | st.floats(-1e6, 1e6).map(np.float32)
            | st.booleans().map(np.bool_))
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (st.lists(inner, max_size=4) | st.tuples(inner, inner)
                   | st.dictionaries(st.text(max_size=8), inner, max_size=4)
                   | st.lists(st.integers(-9, 9), max_size=4).map(np.array)),
    max_leaves=12)


def _reference(value: object) -> object:
    """``value`` as ``Struct.update`` takes it (numpy converted, tuples as lists)."""
    if isinstance(value, dict):
        return {str(k): _reference(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_reference(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8) | st.integers(0, 9), _VALUES, max_size=6))
@pytest.mark.slow
def test_struct_from_dict_builds_what_struct_update_builds(data: dict) -> None:
    expected = struct_pb2.Struct()
    expected.update(_reference(data))
    assert struct_from_dict(data) == expected


def test_struct_from_dict_keeps_empty_containers_and_refuses_other_types() -> None:
    built = struct_from_dict({"d": {}, "l": [], "n": None})
    assert built.fields["d"].WhichOneof("kind") == "struct_value"
    assert built.fields["l"].WhichOneof("kind") == "list_value"
    assert built.fields["n"].WhichOneof("kind") == "null_value"
    with pytest.raises(ValueError, match="Unexpected type object"):
        struct_from_dict({"x": object()})


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8), _VALUES | st.floats(), max_size=6))
@pytest.mark.slow
def test_dict_from_struct_reads_what_message_to_dict_reads(data: dict) -> None:
    struct = struct_pb2.Struct()
    struct.update(_reference(data))
    try:
        expected = json_format.MessageToDict(struct)
    except ValueError:  # a non-finite number: no JSON form
        with pytest.raises(ValueError, match="no JSON form"):
            dict_from_struct(struct)
        return
    assert dict_from_struct(struct) == expected
