"""Where a piece of JSON text can be cut for decoding now, the rest waiting for the next piece: never inside a
UTF-8 sequence, an escape, or a surrogate pair written as two escapes (`jsonstream`'s helpers); and text escaped
back into the inside of a JSON string (`escape`)."""

from __future__ import annotations

import json

from pydantic_core import PydanticSerializationError, to_json

__all__ = ["escape", "safe_cut", "safe_cut_bytes", "utf8_cut"]

_HEX = frozenset("0123456789abcdefABCDEF")


def safe_cut(segment: str) -> int:
    """How much of an unfinished string segment can be decoded now: never part of an escape, or the
    first half of a surrogate pair written as two escapes."""
    size = len(segment)
    cut = size
    start = segment.rfind("\\", max(0, size - 12))
    while start >= 0:
        run = start
        while run > 0 and segment[run - 1] == "\\":
            run -= 1
        if (start - run) % 2 == 0:  # this backslash starts an escape
            escape = segment[start:cut]
            if len(escape) < 2 or (escape[1] == "u" and len(escape) < 6):  # lone "\" or short "\u"
                cut = start
            elif escape[1] == "u" and len(escape) == 6 and _is_high_surrogate(escape[2:6]):
                cut = start  # wait for the low half of the pair
            else:
                break
            start = segment.rfind("\\", max(0, cut - 12), cut)
            continue
        break
    return cut


def safe_cut_bytes(data: bytes, size: int) -> int:
    """`safe_cut` of `data[:size]`, on bytes (escapes are ASCII)."""
    if data.rfind(b"\\", max(0, size - 12), size) < 0:
        return size
    start = max(0, size - 24)
    if start and data[start - 1] == 0x5C:  # inside a run of backslashes: take all of it, for its parity
        head = data[:start]
        start -= len(head) - len(head.rstrip(b"\\"))
    return start + safe_cut(data[start:size].decode("latin-1"))


def _is_high_surrogate(hex4: str) -> bool:
    return len(hex4) == 4 and all(c in _HEX for c in hex4) and 0xD800 <= int(hex4, 16) <= 0xDBFF


def utf8_cut(data: bytes) -> int:
    """The end of the last complete UTF-8 sequence (bytes after it may be the start of the next one)."""
    size = len(data)
    for back in range(1, min(4, size) + 1):
        byte = data[size - back]
        if byte < 0x80:
            return size
        if byte >= 0xC0:  # a lead byte: is its sequence complete?
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return size if back >= need else size - back
    return size


def escape(text: str) -> bytes:
    """`text` as the inside of a JSON string, as `json.dumps(text, ensure_ascii=False)` writes it, in UTF-8 (a lone
    surrogate becomes one "?", as in the output file). pydantic-core's serializer writes the same bytes ~9× as
    fast for text with non-ASCII characters; it refuses a lone surrogate, which `json.dumps` then escapes."""
    try:
        return to_json(text)[1:-1]
    except PydanticSerializationError:
        return json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8", "replace")
