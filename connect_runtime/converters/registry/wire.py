"""Confluent's wire format: magic byte 0, the schema id as 4 big-endian bytes, the
payload; a Protobuf payload is preceded by the message indexes (zig-zag varints)."""

from __future__ import annotations

import struct

MAGIC = 0
_HEADER = struct.Struct(">bI")


def header(schema_id: int) -> bytes:
    """The 5 bytes before every payload."""
    return _HEADER.pack(MAGIC, schema_id)


def read_header(data: bytes) -> tuple[int, bytes]:
    """(schema id, payload) of framed ``data``; ValueError if it is not framed."""
    if len(data) < 5 or data[0] != MAGIC:
        raise ValueError("not Confluent's wire format (magic byte 0 and a 4-byte id)")
    return _HEADER.unpack_from(data)[1], data[5:]
