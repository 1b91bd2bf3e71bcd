"""Requests written as bytes, for the attacks no client library would build: a Struct of a
million entries takes the Python protobuf runtime seconds to build, its wire form a moment."""

from __future__ import annotations

import struct

#: ``SessionRequest.open``, ``OpenRequest.task``, ``OpenRequest.options``,
#: ``Struct.fields`` entry's key and value, ``Value.number_value`` (protos/).
_OPEN, _TASK, _OPTIONS, _KEY, _VALUE = 1, 1, 5, 1, 2
_NUMBER_VALUE_TAG = b"\x11"  # field 2, wire type 1 (64-bit)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def open_with_option_keys(count: int, task: str) -> bytes:
    """A serialized ``SessionRequest`` whose Open of ``task`` carries ``count`` option keys
    (``k<i>``: <i>); 1.5M keys make 33 MB."""
    entries = b"".join(
        _field(1, _field(_KEY, f"k{i}".encode())
               + _field(_VALUE, _NUMBER_VALUE_TAG + struct.pack("<d", i)))
        for i in range(count))
    return _field(_OPEN, _field(_TASK, task.encode()) + _field(_OPTIONS, entries))
