"""Wire codecs: numpy arrays <-> ``Tensor``, RGB frames <-> ``Image``, dicts <-> ``Struct``.

Tensors travel as raw little-endian, row-major bytes plus dtype and shape (never repeated
floats). Images travel as PNG by default, or raw RGB (H x W x 3 uint8) when asked.
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np
from google.protobuf import struct_pb2

from moria.common.v1 import types_pb2

_TO_WIRE: dict[np.dtype, Any] = {
    np.dtype(np.bool_): types_pb2.DATA_TYPE_BOOL,
    np.dtype(np.uint8): types_pb2.DATA_TYPE_UINT8,
    np.dtype(np.int8): types_pb2.DATA_TYPE_INT8,
    np.dtype(np.uint16): types_pb2.DATA_TYPE_UINT16,
    np.dtype(np.int16): types_pb2.DATA_TYPE_INT16,
    np.dtype(np.uint32): types_pb2.DATA_TYPE_UINT32,
    np.dtype(np.int32): types_pb2.DATA_TYPE_INT32,
    np.dtype(np.uint64): types_pb2.DATA_TYPE_UINT64,
    np.dtype(np.int64): types_pb2.DATA_TYPE_INT64,
    np.dtype(np.float16): types_pb2.DATA_TYPE_FLOAT16,
    np.dtype(np.float32): types_pb2.DATA_TYPE_FLOAT32,
    np.dtype(np.float64): types_pb2.DATA_TYPE_FLOAT64,
}
_FROM_WIRE: dict[Any, np.dtype] = {v: k.newbyteorder("<") for k, v in _TO_WIRE.items()}


class CodecError(ValueError):
    """A wire message cannot be decoded (servers map it to INVALID_ARGUMENT)."""


def tensor_from_array(array: np.ndarray) -> types_pb2.Tensor:
    """Encode an ndarray of a supported dtype (bool, (u)int8..64, float16/32/64).

    Raises CodecError for other dtypes (object, complex, strings).
    """
    arr = np.asarray(array)
    wire = _TO_WIRE.get(arr.dtype.newbyteorder("="))
    if wire is None:
        raise CodecError(f"unsupported tensor dtype {arr.dtype}; allowed: "
                         + ", ".join(sorted(str(d) for d in _TO_WIRE)))
    data = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()
    return types_pb2.Tensor(dtype=wire, shape=list(arr.shape), data=data)


def array_from_tensor(tensor: types_pb2.Tensor) -> np.ndarray:
    """Decode a Tensor into a read-only ndarray (native byte order view where possible).

    Raises CodecError when the dtype is unspecified/unknown, a dimension is negative, or the
    byte length differs from product(shape) * itemsize.
    """
    dtype = _FROM_WIRE.get(tensor.dtype)
    if dtype is None:
        raise CodecError(f"tensor dtype {tensor.dtype} is not set or unknown")
    shape = tuple(int(d) for d in tensor.shape)
    if any(d < 0 for d in shape):
        raise CodecError(f"tensor shape {shape} has a negative dimension")
    expected = math.prod(shape) * dtype.itemsize
    if len(tensor.data) != expected:
        raise CodecError(f"tensor data is {len(tensor.data)} bytes; dtype {dtype.name} with "
                         f"shape {shape} needs {expected}")
    return np.frombuffer(tensor.data, dtype=dtype).reshape(shape)


def image_from_rgb(frame: np.ndarray, encoding: Any = types_pb2.IMAGE_ENCODING_PNG,
                   ) -> types_pb2.Image:
    """Encode an (H, W, 3) uint8 RGB frame as PNG (default) or raw RGB bytes."""
    arr = np.asarray(frame)
    if arr.ndim != 3 or arr.shape[2] != 3 or arr.dtype != np.uint8:
        raise CodecError(f"an RGB frame must be (H, W, 3) uint8, got {arr.shape} {arr.dtype}")
    height, width = int(arr.shape[0]), int(arr.shape[1])
    if encoding == types_pb2.IMAGE_ENCODING_RAW_RGB:
        return types_pb2.Image(encoding=encoding, width=width, height=height,
                               data=np.ascontiguousarray(arr).tobytes())
    from PIL import Image as PILImage

    buf = io.BytesIO()
    PILImage.fromarray(arr, mode="RGB").save(buf, format="PNG", compress_level=1)
    return types_pb2.Image(encoding=types_pb2.IMAGE_ENCODING_PNG, width=width, height=height,
                           data=buf.getvalue())


def rgb_from_image(image: types_pb2.Image) -> np.ndarray:
    """Decode an Image into an (H, W, 3) uint8 array. Raises CodecError on bad data."""
    if image.encoding == types_pb2.IMAGE_ENCODING_RAW_RGB:
        expected = image.width * image.height * 3
        if len(image.data) != expected or image.width <= 0 or image.height <= 0:
            raise CodecError(f"raw RGB image of {image.width}x{image.height} needs {expected} "
                             f"bytes, got {len(image.data)}")
        return np.frombuffer(image.data, dtype=np.uint8).reshape(image.height, image.width, 3)
    from PIL import Image as PILImage

    try:
        with PILImage.open(io.BytesIO(image.data)) as img:
            return np.asarray(img.convert("RGB"))
    except Exception as exc:
        raise CodecError(f"image data is not a decodable PNG: {exc}") from exc


#: The 8 bytes every PNG file starts with.
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_bytes(image: types_pb2.Image) -> bytes:
    """The image as PNG bytes.

    A RAW_RGB frame (exactly ``height * width * 3`` bytes) is re-encoded: CPU time grows with
    the frame (tens of ms for 2048x2048), so servers call this off their event loop. PNG data
    (``IMAGE_ENCODING_PNG`` or unspecified) is returned as is once its header is checked: the
    PNG signature, an IHDR chunk first, and the IHDR size equal to ``width`` x ``height`` when
    those are set. Pixel data is not decoded.

    Raises CodecError for raw bytes that disagree with the size, an unknown encoding, or PNG
    data without a PNG header (or of another size than the message says).
    """
    if image.encoding == types_pb2.IMAGE_ENCODING_RAW_RGB:
        return image_from_rgb(rgb_from_image(image)).data
    if image.encoding not in (types_pb2.IMAGE_ENCODING_PNG,
                              types_pb2.IMAGE_ENCODING_UNSPECIFIED):
        raise CodecError(f"image encoding {int(image.encoding)} is unknown; expected PNG or "
                         "RAW_RGB")
    data = bytes(image.data)
    if not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR" or len(data) < 24:
        raise CodecError(f"image data ({len(data)} bytes) is not a PNG: no PNG signature and "
                         "IHDR header")
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if image.width > 0 and image.height > 0 and (width, height) != (image.width, image.height):
        raise CodecError(f"PNG is {width}x{height} but the image says "
                         f"{image.width}x{image.height}")
    return data


def struct_from_dict(data: dict[str, Any] | None) -> struct_pb2.Struct:
    """A JSON-able dict as a protobuf Struct (numpy scalars and arrays are converted; keys
    become strings). The same message as ``Struct.update`` builds, written field by field: a
    per-step metrics dict costs about a quarter of ``update``'s time. Raises ValueError for a
    value JSON has no form for (as ``update`` does)."""
    out = struct_pb2.Struct()
    if data:
        _set_fields(out, data)
    return out


def _set_fields(struct: struct_pb2.Struct, data: dict[Any, Any]) -> None:
    if not all(type(key) is str for key in data):
        data = {str(key): value for key, value in data.items()}  # 5 then "5": the later wins
    fields = struct.fields
    for key, value in data.items():
        _set_value(fields[key], value)


def _set_value(target: struct_pb2.Value, value: Any) -> None:
    """Write ``value`` into the empty ``target`` Value (the cases ``Struct.update`` takes)."""
    kind = type(value)
    if kind is str:
        target.string_value = value
    elif kind is bool:
        target.bool_value = value
    elif kind is float or kind is int:
        target.number_value = value
    elif value is None:
        target.null_value = struct_pb2.NULL_VALUE
    elif isinstance(value, dict):
        target.struct_value.SetInParent()  # an empty dict is still a struct_value
        _set_fields(target.struct_value, value)
    elif isinstance(value, list | tuple):
        values = target.list_value
        values.SetInParent()
        for item in value:
            _set_value(values.values.add(), item)
    elif isinstance(value, np.ndarray):
        _set_value(target, value.tolist())
    elif isinstance(value, np.generic):
        _set_value(target, value.item())
    elif isinstance(value, str):
        target.string_value = value
    elif isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int | float):
        target.number_value = value
    else:
        raise ValueError(f"Unexpected type {type(value).__name__} in a Struct")


def dict_from_struct(struct: struct_pb2.Struct) -> dict[str, Any]:
    """A protobuf Struct as a plain dict (numbers come back as float, as JSON has them): what
    ``json_format.MessageToDict`` gives, read field by field (a few times faster). Raises
    ValueError for a non-finite number (JSON has no form for it), as ``MessageToDict`` does."""
    return {key: _python_value(value) for key, value in struct.fields.items()}


def _python_value(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        number = value.number_value
        if not math.isfinite(number):
            raise ValueError(f"a Struct number with no JSON form: {number}")
        return number
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        return dict_from_struct(value.struct_value)
    if kind == "list_value":
        return [_python_value(item) for item in value.list_value.values]
    return None  # null_value, or a Value with no kind set


def text_action(text: str) -> types_pb2.Action:
    """An Action carrying text."""
    return types_pb2.Action(text=text)


def action_text(action: types_pb2.Action) -> str:
    """The text of an Action (index and tensor actions give '')."""
    return action.text if action.WhichOneof("kind") == "text" else ""
