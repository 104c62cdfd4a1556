"""A stored output as extraction reads it: byte ranges on demand, decoded in pieces, never the whole.

`Source` is the seam: an open stored file (`fs_sandbox.OpenFile`) is one, `TextSource` holds a small text
in memory. Reads block, so callers run a whole operation in a worker thread. Character offsets count the
text exactly as stored (UTF-8, CR kept), the way a model sees `slice` and evidence positions.
"""

from __future__ import annotations

import codecs
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from fs_sandbox import LineIndex, literal_finder

__all__ = [
    "Descriptor",
    "Source",
    "TextSource",
    "boundary",
    "find_all",
    "head_chars",
    "measure",
    "read_all",
    "read_chars",
    "sha256_of",
    "tail_chars",
    "text_pieces",
    "text_windows",
]

PIECE_BYTES = 1 << 20
_CONTINUATION = bytes(range(0x80, 0xC0))


class Source(Protocol):
    """The bytes of one stored output."""

    @property
    def size(self) -> int: ...

    def read(self, offset: int, length: int) -> bytes: ...


@dataclass(frozen=True, slots=True)
class TextSource:
    """A text held in memory (a small inline result, or a test's document)."""

    data: bytes

    @classmethod
    def of(cls, text: str) -> TextSource:
        return cls(text.encode("utf-8", "replace"))

    @property
    def size(self) -> int:
        return len(self.data)

    def read(self, offset: int, length: int) -> bytes:
        return self.data[offset : offset + max(0, length)]


@dataclass(frozen=True, slots=True)
class Descriptor:
    """The first `size` bytes of a descriptor the caller keeps open (and closes)."""

    fd: int
    size: int

    def read(self, offset: int, length: int) -> bytes:
        length = min(length, self.size - offset)
        return os.pread(self.fd, length, offset) if length > 0 else b""


def sha256_of(source: Source) -> str:
    """The hex sha256 of all of `source`, read in pieces. Blocking."""
    digest = hashlib.sha256()
    offset = 0
    while piece := source.read(offset, PIECE_BYTES):
        digest.update(piece)
        offset += len(piece)
    return digest.hexdigest()


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def boundary(source: Source, offset: int) -> int:
    """The character boundary at or before byte `offset` (UTF-8 continuation bytes are skipped back)."""
    if offset <= 0 or offset >= source.size:
        return max(0, min(offset, source.size))
    around = source.read(offset, 1)
    back = 0
    while back < 3 and around and _is_continuation(around[0]) and offset - back > 0:
        back += 1
        around = source.read(offset - back, 1)
    return offset - back


def text_pieces(source: Source, start: int = 0, stop: int | None = None) -> Iterator[str]:
    """The text of bytes `start`..`stop` (character boundaries), decoded a piece at a time."""
    stop = source.size if stop is None else min(stop, source.size)
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    offset = start
    while offset < stop:
        data = source.read(offset, min(PIECE_BYTES, stop - offset))
        if not data:
            break
        offset += len(data)
        if text := decoder.decode(data):
            yield text
    if tail := decoder.decode(b"", final=True):
        yield tail


def text_windows(source: Source, overlap: int) -> Iterator[tuple[int, str]]:
    """(character offset, text) windows over the whole text, each starting with the last `overlap`
    characters of the one before, so anything up to `overlap + 1` characters long lies whole in one window."""
    carry, before = "", 0
    for piece in text_pieces(source):
        window = carry + piece
        yield before - len(carry), window
        before += len(piece)
        carry = window[-overlap:] if overlap > 0 else ""


def find_all(source: Source, needle: str) -> Iterator[int]:
    """The character offset of every occurrence of `needle`, overlapping ones included, in order.

    The UTF-8 bytes are searched by Grep's engine (`literal_finder`); characters are counted
    only up to each hit, from the nearest line-index entry before it when the source has an index.
    """
    if not needle:
        raise ValueError("the text to find is empty")
    wanted = needle.encode("utf-8", "replace")
    find = literal_finder(wanted)
    index = _index_of(source)
    cursor = chars = 0  # a byte offset and the characters before it
    offset, carry = 0, b""
    while offset < source.size:
        data = source.read(offset, min(PIECE_BYTES, source.size - offset))
        if not data:
            break
        window, base = carry + data, offset - len(carry)
        at = 0
        while (hit := find(window, at)) >= 0:
            position = base + hit
            if index is not None:
                entry, before = index.seek_byte(position)
                if entry > cursor:
                    cursor, chars = entry, before
            chars += _count_chars(source, cursor, position)
            cursor = position
            yield chars
            at = hit + 1
        offset += len(data)
        keep = len(wanted) - 1
        carry = window[max(0, len(window) - keep) :] if keep else b""  # too short to hold a hit already found


def _count_chars(source: Source, start: int, stop: int) -> int:
    """Characters in bytes `start`..`stop` of valid UTF-8 (stored outputs are): the non-continuation bytes."""
    count = 0
    while start < stop:
        data = source.read(start, min(PIECE_BYTES, stop - start))
        if not data:
            break
        count += len(data.translate(None, _CONTINUATION))
        start += len(data)
    return count


def _index_of(source: Source) -> LineIndex | None:
    index = getattr(source, "index", None)
    return index if isinstance(index, LineIndex) and index.size == source.size else None


def read_chars(source: Source, start: int, stop: int, cap: int) -> tuple[str | None, int]:
    """(characters `start`..`stop`, or None when there are more than `cap` of them; the total characters).

    With a line index, reading starts at the entry nearest before `start` and ends at `stop`.
    """
    index = _index_of(source)
    if index is None:
        return _read_chars_scanning(source, start, stop, cap)
    if stop - start > cap:
        return None, index.chars
    offset, total = index.seek_char(start)
    kept: list[str] = []
    for piece in text_pieces(source, offset):
        low, high = max(start, total), min(stop, total + len(piece))
        if low < high:
            kept.append(piece[low - total : high - total])
        total += len(piece)
        if total >= stop:
            break
    return "".join(kept), index.chars


def _read_chars_scanning(source: Source, start: int, stop: int, cap: int) -> tuple[str | None, int]:
    kept: list[str] = []
    kept_chars = total = 0
    over = False
    for piece in text_pieces(source):
        low, high = max(start, total), min(stop, total + len(piece))
        if low < high and not over:
            if kept_chars + high - low > cap:
                over, kept = True, []
            else:
                kept.append(piece[low - total : high - total])
                kept_chars += high - low
        total += len(piece)
    return (None if over else "".join(kept)), total


def head_chars(source: Source, count: int) -> str:
    """The first `count` characters."""
    data = source.read(0, count * 4)  # a character is at most 4 bytes
    end = boundary(source, len(data)) if len(data) < source.size else len(data)
    return data[:end].decode("utf-8", "replace")[:count]


def tail_chars(source: Source, count: int) -> str:
    """The last `count` characters."""
    if count <= 0:
        return ""
    start = boundary(source, max(0, source.size - count * 4))
    return source.read(start, source.size - start).decode("utf-8", "replace")[-count:]


def measure(source: Source) -> tuple[int, int]:
    """(characters, newlines) of the whole text."""
    chars = newlines = 0
    for piece in text_pieces(source):
        chars += len(piece)
        newlines += piece.count("\n")
    return chars, newlines


def read_all(source: Source) -> str:
    """The whole text: only for sources known to be small (under a token threshold)."""
    return "".join(text_pieces(source))
