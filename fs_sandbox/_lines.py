"""The text of one open file as the model sees it, read in pieces: lines for Read, windows for Grep.

Invalid UTF-8 shows as U+FFFD, CRLF and lone CR end lines. Memory stays within a few pieces whatever the
file's size: lines are found by counting newlines in bytes, and only the lines asked for are decoded, each
cut to `clip` characters (its full length still counted). Stdlib only: the grep worker imports it too.
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

PIECE = 1 << 20  # bytes read at a time
WINDOW = 1 << 20  # bytes of whole lines a search looks at before it moves on
AHEAD = 64 << 10  # how far past its window a match that starts in it may reach
BEHIND = 4 << 10  # how much before its window a lookbehind or \b may see

Shown = tuple[int, str, int]  # (1-based line number, text cut to `clip` characters, full length in characters)
Ranges = Sequence[tuple[int, int]]  # 1-based, inclusive, sorted and disjoint


def pieces(fd: int, size: int) -> Iterator[bytes]:
    """The first `size` bytes of `fd`, CRLF and lone CR turned into LF, a piece at a time."""
    offset, held_cr = 0, False
    while offset < size:
        data = os.pread(fd, min(PIECE, size - offset), offset)
        if not data:
            break
        offset += len(data)
        if held_cr:
            data, held_cr = b"\r" + data, False
        if b"\r" in data:
            if data.endswith(b"\r") and offset < size:  # a CRLF may straddle the pieces
                data, held_cr = data[:-1], True
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        if data:
            yield data
    if held_cr:
        yield b"\n"


def count_lines(fd: int, size: int) -> int:
    total, last = 0, b"\n"
    for piece in pieces(fd, size):
        total += piece.count(b"\n")
        last = piece[-1:]
    return total + (last != b"\n")


class _Collector:
    """Lines as they stream past: their texts while the budget lasts, then only how many."""

    def __init__(self, clip: int, max_chars: int | None) -> None:
        self.clip, self.max_chars = clip, max_chars
        self.shown: list[Shown] = []
        self.hidden = 0
        self._used = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._parts: list[str] = []
        self._kept = self._length = 0

    @property
    def showing(self) -> bool:
        return self.max_chars is None or self._used <= self.max_chars

    def feed(self, data: bytes) -> None:
        if data and self.showing:
            self._take(self._decoder.decode(data))

    def end_line(self, number: int) -> None:
        if not self.showing:
            self.hidden += 1
            return
        self._take(self._decoder.decode(b"", final=True))
        self._decoder.reset()
        text = "".join(self._parts)
        self.shown.append((number, text, self._length))
        self._used += len(text) + 1
        self._parts, self._kept, self._length = [], 0, 0

    def _take(self, text: str) -> None:
        self._length += len(text)
        room = self.clip - self._kept
        if room > 0 and text:
            part = text[:room]
            self._parts.append(part)
            self._kept += len(part)


def collect(
    fd: int, size: int, ranges: Ranges, *, clip: int, max_chars: int | None, to_end: bool
) -> tuple[list[Shown], int, int | None]:
    """The lines in `ranges`: (shown, how many more exist but were over `max_chars`, total lines).

    Texts are kept until their characters (plus one per line) pass `max_chars`; the line that passes it
    is still shown. The total is None when reading stopped after the last range (`to_end` false).
    """
    out = _Collector(clip, max_chars)
    line, in_line, index = 1, False, 0
    for piece in pieces(fd, size):
        position, end = 0, len(piece)
        while position < end:
            if index == len(ranges):
                if not to_end:
                    return out.shown, out.hidden, None
                line += piece.count(b"\n", position)
                in_line = piece[-1] != 0x0A
                break
            first, last = ranges[index]
            if line < first:  # skip whole lines by counting their newlines
                newlines = piece.count(b"\n", position)
                if line + newlines < first:
                    line += newlines
                    in_line = piece[-1] != 0x0A
                    break
                for _ in range(first - line):
                    position = piece.index(b"\n", position) + 1
                line, in_line = first, False
                continue
            stop = piece.find(b"\n", position)
            if stop < 0:
                out.feed(piece[position:])
                in_line = True
                break
            out.feed(piece[position:stop])
            out.end_line(line)
            line, in_line, position = line + 1, False, stop + 1
            if line > last:
                index += 1
    if in_line and index < len(ranges) and ranges[index][0] <= line:
        out.end_line(line)  # the last line, without a newline after it
    return out.shown, out.hidden, line if in_line else line - 1


def read_lines(
    fd: int, size: int, start: int, count: int, from_end: bool, *, clip: int, max_chars: int | None
) -> tuple[list[Shown], int, int]:
    """`count` lines from line `start` (0-based; counted from the end when `from_end`): (shown, total, omitted)."""
    if from_end:
        total = count_lines(fd, size)
        stop = max(0, total - start)
        first = max(0, stop - count)
        ranges = [(first + 1, stop)] if stop > first else []
        shown, omitted, _ = collect(fd, size, ranges, clip=clip, max_chars=max_chars, to_end=False)
        return shown, total, omitted
    ranges = [(start + 1, start + count)] if count > 0 else []
    shown, omitted, counted = collect(fd, size, ranges, clip=clip, max_chars=max_chars, to_end=True)
    assert counted is not None
    return shown, counted, omitted


# windows (for Grep)


@dataclass(frozen=True, slots=True)
class Window:
    """Whole lines to search, data[start:end], with what comes before (lookbehind) and after, up to `stop`.

    `data` is the scanner's own buffer, valid until the next window is asked for: nothing is copied.
    """

    data: bytearray
    start: int
    end: int
    stop: int
    first_line: int  # the number of the line data[start] is in
    final: bool


def windows(fd: int, size: int) -> Iterator[Window]:
    """The file's normalized text as windows, read into two buffers allocated once and used in turn.

    Fresh memory for every window would cost a page fault per 4 KiB: more than the search itself.
    """
    capacity = BEHIND + WINDOW + AHEAD + PIECE + 16
    buffers = (bytearray(capacity), bytearray(capacity))
    buffer, length, start, offset, line = buffers[0], 0, 0, 0, 1
    while True:
        while offset < size and length - start < WINDOW + AHEAD:
            length, offset = _fill(fd, size, buffer, length, offset)
        if offset >= size and length - start <= WINDOW + AHEAD:
            yield Window(buffer, start, length, length, line, True)
            return
        # A window ends after its last newline; a line longer than a window is cut at a character boundary.
        cut = buffer.rfind(b"\n", start, start + WINDOW) + 1 or boundary(buffer, start + WINDOW)
        yield Window(buffer, start, cut, boundary(buffer, cut + AHEAD), line, False)
        line += buffer.count(b"\n", start, cut)
        keep = min(cut, boundary(buffer, max(0, cut - BEHIND), forward=True))
        other = buffers[1] if buffer is buffers[0] else buffers[0]
        with memoryview(buffer) as view:
            other[: length - keep] = view[keep:length]  # the same length: copied, never resized
        buffer, length, start = other, length - keep, cut - keep


def _fill(fd: int, size: int, buffer: bytearray, length: int, offset: int) -> tuple[int, int]:
    """Read the next piece into buffer[length:], CRLF and lone CR made LF; the new (length, offset)."""
    with memoryview(buffer) as view:
        got = os.preadv(fd, [view[length : length + min(PIECE, size - offset)]], offset)
    if not got:
        return length, size  # the file is shorter than it was: take what there is
    end, offset = length + got, offset + got
    if buffer.find(b"\r", length, end) < 0:
        return end, offset
    if buffer[end - 1] == 0x0D and offset < size and got > 1:  # a CRLF may straddle pieces: read this CR again
        end, offset = end - 1, offset - 1
    text = bytes(buffer[length:end]).replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    buffer[length : length + len(text)] = text  # never longer than what it replaces
    return length + len(text), offset


def boundary(data: bytes | bytearray, at: int, *, forward: bool = False) -> int:
    """The nearest UTF-8 character boundary at or before `at` (after it with `forward`), within 3 bytes."""
    if at >= len(data):
        return len(data)
    step, limit = (1, min(len(data), at + 3)) if forward else (-1, max(0, at - 3))
    while at != limit and data[at] & 0xC0 == 0x80:
        at += step
    return at
