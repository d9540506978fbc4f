"""Reading what the report tools (tools/report.py, tools/campaign_report.py) write."""

from __future__ import annotations

import struct
import zlib


def png_text_chunks(data: bytes) -> dict[str, str]:
    """The text chunks (tEXt, iTXt) of a PNG by keyword, and its size as "_size"; every chunk's CRC checked."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, offset = {}, 8
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset : offset + 8])
        body = data[offset + 8 : offset + 8 + length]
        assert zlib.crc32(kind + body) == struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])[0]
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            chunks[key.decode()] = value.decode("latin-1")
        if kind == b"iTXt":  # keyword, flag, method, language, translated keyword, UTF-8 text
            key, _, rest = body.partition(b"\0")
            compressed, rest = rest[0], rest[2:]
            _, _, rest = rest.partition(b"\0")
            _, _, text = rest.partition(b"\0")
            chunks[key.decode()] = (zlib.decompress(text) if compressed else text).decode("utf-8")
        if kind == b"IHDR":
            chunks["_size"] = struct.unpack(">II", body[:8])
        offset += 12 + length
    return chunks
