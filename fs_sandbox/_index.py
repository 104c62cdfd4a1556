"""A sparse line index of a stored file, built while it is written and kept beside it (`<name>.lines`).

Every `SPACING` bytes (moved to a character boundary) it notes the byte offset, the number of the line that
offset is in, how many characters come before it, and whether a line starts there. Read at any line and
slice at any character then start from the nearest entry instead of the start of the file: at most
`SPACING` bytes and the one line are scanned, whatever the file's size. Lines end at LF, CRLF or a lone CR
(as `fs_sandbox._lines` reads them); characters are those of the UTF-8 text as stored (CR kept).

An index is used only when it is the one written for this file: after its entries it holds a digest of the
file's size and its first and last `END_BLOCK` bytes, and a digest of everything before it. A damaged or
hand-edited index (even one whose numbers are all plausible) or one left beside another file of the same size
fails them and is rebuilt. (Whoever can rewrite both digests can rewrite the output itself: the run root is the
user's own, 0700.)

Stdlib only: the grep worker imports it.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import struct
from dataclasses import dataclass

__all__ = ["SUFFIX", "IndexBuilder", "LineIndex", "build"]

SPACING = 1 << 20
SUFFIX = ".lines"
_MAGIC = b"claimcheck-lines-3\n"
_HEAD = struct.Struct("<QQQQQ")  # size, lines, chars, entries, carriage returns
_ENTRY = struct.Struct("<QQQQ")  # offset, line, chars before, 1 when a line starts there
_CONTINUATION = bytes(range(0x80, 0xC0))
END_BLOCK = 64 << 10
_DIGEST = 32  # sha256
_SAMPLE = 4096  # bytes of a piece's start whose newlines say how long its lines are
_LONG_LINE = 32  # bytes a line has on average from where memchr counts faster than `bytes.count`


def ends_digest(fd: int, size: int) -> bytes:
    """The digest that binds an index to its file: the size, the first and the last `END_BLOCK` bytes."""
    first = os.pread(fd, min(size, END_BLOCK), 0)
    last = os.pread(fd, min(size, END_BLOCK), max(0, size - END_BLOCK))
    return _ends(size, first, last)


def _ends(size: int, first: bytes, last: bytes) -> bytes:
    return hashlib.sha256(size.to_bytes(8, "little") + first + last).digest()


def _chars(data: bytes | memoryview) -> int:
    """Characters in valid UTF-8: the bytes that are not continuation bytes."""
    return len(bytes(data).translate(None, _CONTINUATION))


@dataclass(frozen=True, slots=True)
class LineIndex:
    """The entries of one file of `size` bytes, and its totals."""

    size: int
    lines: int
    chars: int
    carriage_returns: int  # none: the bytes are the text as lines are read (no CR to turn into LF)
    offsets: tuple[int, ...]
    line_numbers: tuple[int, ...]
    char_counts: tuple[int, ...]
    starts: tuple[bool, ...]

    def seek_line(self, line: int) -> tuple[int, int]:
        """(byte offset, the number of the line there) to read forward from to reach 1-based `line`.

        The offset is before that line starts: at an entry in an earlier line, or where that line starts.
        """
        at = bisect.bisect_left(self.line_numbers, line) - 1  # entries strictly before the line
        following = at + 1
        if following < len(self.offsets) and self.line_numbers[following] == line and self.starts[following]:
            at = following
        return (self.offsets[at], self.line_numbers[at]) if at >= 0 else (0, 1)

    def seek_offset(self, offset: int) -> tuple[int, int]:
        """(byte offset, the number of the line there) of the last entry at or before byte `offset`."""
        at = bisect.bisect_right(self.offsets, offset) - 1
        return (self.offsets[at], self.line_numbers[at]) if at >= 0 else (0, 1)

    def seek_char(self, char: int) -> tuple[int, int]:
        """(byte offset, characters before it) of the last entry at or before character `char`."""
        at = bisect.bisect_right(self.char_counts, char) - 1
        return (self.offsets[at], self.char_counts[at]) if at >= 0 else (0, 0)

    def seek_byte(self, offset: int) -> tuple[int, int]:
        """(byte offset, characters before it) of the last entry at or before byte `offset`."""
        at = bisect.bisect_right(self.offsets, offset) - 1
        return (self.offsets[at], self.char_counts[at]) if at >= 0 else (0, 0)

    @classmethod
    def parse(cls, data: bytes, size: int, ends: bytes | None = None) -> LineIndex | None:
        """The index in `data`, or None when it is not one, is for another file (`ends`: the file's
        `ends_digest`, checked where given) or another size of file, or cannot be true of one (a file on disk
        may be damaged or changed by hand: its digests and numbers are checked, not trusted)."""
        if not data.startswith(_MAGIC) or len(data) < len(_MAGIC) + _HEAD.size + 2 * _DIGEST:
            return None
        total, lines, chars, count, crs = _HEAD.unpack_from(data, len(_MAGIC))
        body = len(_MAGIC) + _HEAD.size
        if total != size or len(data) != body + count * _ENTRY.size + 2 * _DIGEST:
            return None
        if hashlib.sha256(data[:-_DIGEST]).digest() != data[-_DIGEST:]:
            return None
        if ends is not None and data[-2 * _DIGEST : -_DIGEST] != ends:
            return None
        entries = [_ENTRY.unpack_from(data, body + i * _ENTRY.size) for i in range(count)]
        if not _possible(size, lines, chars, crs, entries):
            return None
        return cls(
            size,
            lines,
            chars,
            crs,
            tuple(e[0] for e in entries),
            tuple(e[1] for e in entries),
            tuple(e[2] for e in entries),
            tuple(bool(e[3]) for e in entries),
        )


def _possible(size: int, lines: int, chars: int, crs: int, entries: list[tuple[int, int, int, int]]) -> bool:
    """Whether totals and entries could be those of a file of `size` bytes: every count within the bytes it
    counts, offsets inside the file and increasing (at most one entry per `SPACING` bytes), line numbers and
    characters never going back nor growing faster than the bytes between entries."""
    if lines > size or (size and not lines) or chars > size or crs > size or len(entries) > size // SPACING:
        return False
    before = (0, 1, 0, 1)  # the start of the file: offset 0, line 1, no characters, a line starts there
    for entry in entries:
        offset, line, chars_before, start = entry
        step = offset - before[0]
        if not 0 < step or offset >= size or start > 1 or not 0 <= line - before[1] <= step:
            return False
        if not 0 <= chars_before - before[2] <= step or line > lines or chars_before > chars:
            return False
        before = entry
    return True


class IndexBuilder:
    """Fed the bytes of a file in order, as they are written; `finish` gives the index file's bytes."""

    def __init__(self) -> None:
        self.size = 0
        self._ends = 0  # line ends so far (LF, CRLF and lone CR count one each)
        self.newlines = 0  # LF bytes so far
        self._chars = 0
        self._crs = 0
        self._last = b""
        self._next = SPACING
        self._entries: list[tuple[int, int, int, int]] = []
        self._first = bytearray()  # the file's first END_BLOCK bytes
        self._tail: list[bytes] = []  # the last pieces, END_BLOCK bytes or more of them (kept, not copied)
        self._tail_size = 0
        self._by_deleting = True  # newlines are counted with memchr (see `_newlines`)

    def feed(self, data: bytes, chars: int | None = None) -> None:
        """The next bytes of the file; `chars`, when the writer knows it, is how many characters they hold (then
        only the part before an entry is counted)."""
        view = memoryview(bytes(data) if not isinstance(data, bytes) else data)
        while len(view):
            room = self._next - self.size
            if room >= len(view):
                self._take(view, chars)
                return
            counted = self._take(view[:room], None)
            view = view[room:]
            # An entry here, moved past continuation bytes and never between the CR and LF of a CRLF.
            skip = 0
            while skip < min(3, len(view)) and view[skip] & 0xC0 == 0x80:
                skip += 1
            if skip == 0 and self._last == b"\r" and view[0] == 0x0A:
                skip = 1
            counted += self._take(view[:skip], None)
            if chars is not None:
                chars -= counted
            view = view[skip:]
            if len(view):
                start = self._last in (b"\n", b"\r")
                self._entries.append((self.size, self._ends + 1, self._chars, int(start)))
            self._next = self.size + SPACING

    def _take(self, piece: memoryview, chars: int | None) -> int:
        """Count `piece` in (its characters given as `chars`, or counted); the characters it holds."""
        if not len(piece):
            return 0
        data = piece.obj if len(piece) == len(piece.obj) else bytes(piece)  # type: ignore[arg-type]
        assert isinstance(data, bytes)
        crs = data.count(b"\r") if b"\r" in data else 0  # `in` is a memchr: most texts have no CR
        newlines = self._newlines(data)
        self.newlines += newlines
        ends = newlines + (crs - data.count(b"\r\n") if crs else 0)
        self._crs += crs
        if self._last == b"\r" and data[:1] == b"\n":
            ends -= 1  # the LF of a CRLF split across pieces
        self._ends += ends
        if chars is None:
            chars = len(data) if data.isascii() else _chars(data)
        self._chars += chars
        self._last = data[-1:]
        self.size += len(data)
        if len(self._first) < END_BLOCK:
            self._first += data[: END_BLOCK - len(self._first)]
        self._tail.append(data)
        self._tail_size += len(data)
        while self._tail_size - len(self._tail[0]) >= END_BLOCK:
            self._tail_size -= len(self._tail.pop(0))
        return chars

    def _newlines(self, data: bytes) -> int:
        """The LF bytes in `data`. `bytes.count` looks at every byte (~2.5 GB/s on one core); deleting them with
        `replace` finds them with memchr: as fast at 32-byte lines, 2× at 100 bytes, 20× with none, but 10× as
        slow where lines are a few bytes. A sample of the piece's start says which; once a deletion finds lines
        shorter than the sample promised, this file is counted byte by byte from then on (so no text costs more
        than one slow piece)."""
        if not self._by_deleting or len(data) < 4 * _SAMPLE or data.count(b"\n", 0, _SAMPLE) > _SAMPLE // _LONG_LINE:
            return data.count(b"\n")
        newlines = len(data) - len(data.replace(b"\n", b""))
        if newlines > len(data) // _LONG_LINE:
            self._by_deleting = False
        return newlines

    @property
    def lines(self) -> int:
        return self._ends + (1 if self.size and self._last not in (b"\n", b"\r") else 0)

    def finish(self) -> bytes:
        head = _HEAD.pack(self.size, self.lines, self._chars, len(self._entries), self._crs)
        last = b"".join(self._tail)[-END_BLOCK:] if self.size else b""
        ends = _ends(self.size, bytes(self._first), last)
        data = _MAGIC + head + b"".join(_ENTRY.pack(*entry) for entry in self._entries) + ends
        return data + hashlib.sha256(data).digest()


def build(fd: int, size: int, piece: int = 256 << 10) -> bytes:
    """The index file's bytes for the first `size` bytes of `fd`: one pass, for a file stored without one
    (pieces small enough to stay in cache between the read and the counts)."""
    builder = IndexBuilder()
    offset = 0
    while offset < size:
        data = os.pread(fd, min(piece, size - offset), offset)
        if not data:
            break
        builder.feed(data)
        offset += len(data)
    return builder.finish()
