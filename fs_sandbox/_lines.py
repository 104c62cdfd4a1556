"""The text of one open file as the model sees it, read in pieces: lines for Read, windows for Grep.

Invalid UTF-8 shows as U+FFFD, CRLF and lone CR end lines. Memory stays within a few pieces whatever the
file's size: lines are found by counting newlines in bytes, and only the lines asked for are decoded, each
cut to `clip` characters (its full length still counted). Stdlib only: the grep worker imports it too.
"""

from __future__ import annotations

import codecs
import mmap
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from fs_sandbox._index import LineIndex

PIECE = 1 << 20  # bytes read at a time
SEEK_PIECE = 64 << 10  # ... after a seek to a few lines
_SKIP_BLOCK = 16 << 10  # newlines counted at a time when skipping lines
WINDOW = 1 << 20  # bytes of whole lines a search looks at before it moves on
AHEAD = 64 << 10  # how far past its window a match that starts in it may reach
BEHIND = 4 << 10  # how much before its window a lookbehind or \b may see
SPAN = 8  # windows the search buffer holds before what it still needs is moved to its front
RELEASE = 8 << 20  # a mapped file's pages behind the search are let go this many bytes at a time
_DONTNEED: int | None = getattr(mmap, "MADV_DONTNEED", None)

Shown = tuple[int, str, int]  # (1-based line number, text cut to `clip` characters, full length in characters)
Span = tuple[int, int]  # a match's start and end, in bytes from the start of its line
Snippet = tuple[int, str, bool, bool]  # (column of the match in characters, text around it, cut before, after)
CONTEXT_CHARS = 80  # shown before and after a match on a long line
MATCH_CHARS = 200  # of the match itself at most
SNIPPET_BYTES = CONTEXT_CHARS * 4
MATCH_BYTES = MATCH_CHARS * 4
_CONTINUATION = bytes(range(0x80, 0xC0))
Ranges = Sequence[tuple[int, int]]  # 1-based, inclusive, sorted and disjoint
Buffer = bytearray | mmap.mmap  # what a Grep window's bytes are in: the scanner's buffer, or the mapped file


def pieces(fd: int, size: int, offset: int = 0, piece: int = 0) -> Iterator[bytes]:
    """The first `size` bytes of `fd` from `offset`, CRLF and lone CR turned into LF, a piece at a time
    (`PIECE` bytes, or `piece`)."""
    held_cr = False
    piece = piece or PIECE
    while offset < size:
        data = os.pread(fd, min(piece, size - offset), offset)
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


def _chars(data: bytes | bytearray) -> int:
    """Characters in UTF-8 bytes (a stored output is valid UTF-8): the bytes that are not continuation bytes."""
    return len(data.translate(None, _CONTINUATION))


def count_lines(fd: int, size: int) -> int:
    total, last = 0, b"\n"
    for piece in pieces(fd, size):
        total += piece.count(b"\n")
        last = piece[-1:]
    return total + (last != b"\n")


class _Collector:
    """Lines as they stream past: their texts while the budget lasts, then only how many.

    A line with match spans also yields a snippet per span: the text around the match and its column.
    """

    def __init__(self, clip: int, max_chars: int | None, spans: Mapping[int, Sequence[Span]]) -> None:
        self.clip, self.max_chars = clip, max_chars
        self.shown: list[Shown] = []
        self.snippets: dict[int, list[Snippet]] = {}
        self.hidden = 0
        self._spans = spans
        self._used = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._parts: list[str] = []
        self._kept = self._length = 0
        self._line_bytes = self._line_chars = 0  # of the current line so far (for spans)
        self._captured: list[tuple[Span, int, bytearray, int]] = []  # span, region start, bytes, column

    @property
    def showing(self) -> bool:
        return self.max_chars is None or self._used <= self.max_chars

    def feed(self, data: bytes, number: int) -> None:
        if not data or not self.showing:
            return
        self._take(self._decoder.decode(data))
        spans = self._spans.get(number)
        if spans:
            self._capture(data, spans)

    def _capture(self, data: bytes, spans: Sequence[Span]) -> None:
        if not self._line_bytes:
            self._captured = [((a, b), max(0, a - SNIPPET_BYTES), bytearray(), -1) for a, b in spans]
        low, high = self._line_bytes, self._line_bytes + len(data)
        for i, ((a, b), region, kept, column) in enumerate(self._captured):
            end = min(b, a + MATCH_BYTES) + SNIPPET_BYTES
            if region < high and end > low:
                kept += data[max(region, low) - low : min(end, high) - low]
            if column < 0 and low <= a < high:
                column = self._line_chars + _chars(data[: a - low])
                self._captured[i] = ((a, b), region, kept, column)
        self._line_chars += _chars(data)
        self._line_bytes = high

    def end_line(self, number: int) -> None:
        if not self.showing:
            self.hidden += 1
            return
        self._take(self._decoder.decode(b"", final=True))
        self._decoder.reset()
        text = "".join(self._parts)
        self.shown.append((number, text, self._length))
        if self._length > self.clip and self._captured:
            self.snippets[number] = [_snippet(*captured, self._length) for captured in self._captured]
            self._used += sum(len(snippet[1]) + 1 for snippet in self.snippets[number]) - len(text)
        self._used += len(text) + 1
        self._parts, self._kept, self._length = [], 0, 0
        self._line_bytes = self._line_chars = 0
        self._captured = []

    def _take(self, text: str) -> None:
        self._length += len(text)
        room = self.clip - self._kept
        if room > 0 and text:
            part = text[:room]
            self._parts.append(part)
            self._kept += len(part)


def _snippet(span: Span, region: int, kept: bytearray, column: int, length: int) -> Snippet:
    """The text around one match: up to CONTEXT_CHARS before and after, the match itself cut at MATCH_CHARS.

    The region may begin or end inside a character: those partial bytes are dropped.
    """
    start, end = span
    before = bytes(kept[: start - region]).decode("utf-8", "ignore")[-CONTEXT_CHARS:]
    match = bytes(kept[start - region : end - region]).decode("utf-8", "ignore")
    after = bytes(kept[end - region :]).decode("utf-8", "ignore")[:CONTEXT_CHARS]
    if len(match) > MATCH_CHARS:
        match, after = match[:MATCH_CHARS], ""
    column = max(column, 0)
    return (column, before + match + after, column > len(before), column + len(match) + len(after) < length)


def collect(
    fd: int,
    size: int,
    ranges: Ranges,
    *,
    clip: int,
    max_chars: int | None,
    to_end: bool,
    spans: Mapping[int, Sequence[Span]] | None = None,
    begin: tuple[int, int] = (0, 1),
    seek: Callable[[int], tuple[int, int]] | None = None,
) -> tuple[list[Shown], int, int | None, dict[int, list[Snippet]]]:
    """The lines in `ranges`: (shown, how many more exist but were over `max_chars`, total lines, snippets).

    Texts are kept until their characters (plus one per line) pass `max_chars`; the line that passes it
    is still shown. The total is None when reading stopped after the last range (`to_end` false). Reading
    starts at `begin`: (a byte offset, the number of the line there), from a line index, or where `seek`
    says for each run of ranges. Lines longer than
    `clip` with `spans` (byte offsets of matches in the line) get a snippet per span.
    """
    out = _Collector(clip, max_chars, spans or {})
    if seek is None or to_end:
        counted = _collect_into(out, fd, size, ranges, to_end, begin)
        return out.shown, out.hidden, counted, out.snippets
    # `seek(line)` gives a known place (offset, line) at or before a line (a line index entry, a match's line
    # start): each run of ranges with no known place between them is read from the one nearest before it, so
    # matches far apart in a large file cost a seek each rather than a scan of what lies between.
    total: int | None = None
    group: list[tuple[int, int]] = []
    group_begin = begin
    for first, last in ranges:
        here = seek(first)
        if group and here[1] > group[-1][1]:
            total = _collect_into(out, fd, size, group, False, group_begin, SEEK_PIECE)
            group = []
        if not group:
            group_begin = here
        group.append((first, last))
    if group:
        total = _collect_into(out, fd, size, group, False, group_begin, SEEK_PIECE)
    return out.shown, out.hidden, total, out.snippets


def _collect_into(
    out: _Collector, fd: int, size: int, ranges: Ranges, to_end: bool, begin: tuple[int, int], step: int = 0
) -> int | None:
    line, index = begin[1], 0
    in_line = begin[0] > 0  # an index entry may be inside a line; only lines after it are asked for then
    for piece in pieces(fd, size, begin[0], step):
        position, end = 0, len(piece)
        while position < end:
            if index == len(ranges):
                if not to_end:
                    return None
                line += piece.count(b"\n", position)
                in_line = piece[-1] != 0x0A
                break
            first, last = ranges[index]
            if line < first:  # skip whole lines by counting their newlines
                position, skipped = _skip_lines(piece, position, first - line)
                if line + skipped < first:
                    line += skipped
                    in_line = piece[-1] != 0x0A
                    break
                line, in_line = first, False
                continue
            stop = piece.find(b"\n", position)
            if stop < 0:
                out.feed(piece[position:], line)
                in_line = True
                break
            out.feed(piece[position:stop], line)
            out.end_line(line)
            line, in_line, position = line + 1, False, stop + 1
            if line > last:
                index += 1
    if in_line and index < len(ranges) and ranges[index][0] <= line:
        out.end_line(line)  # the last line, without a newline after it
    return line if in_line else line - 1


def _skip_lines(piece: bytes, position: int, wanted: int) -> tuple[int, int]:
    """(the offset after the `wanted`-th newline from `position`, `wanted`), or (the end, how many there were).

    Newlines are counted a block at a time, and found one by one only in the block where the last one is,
    so the cost is that of the bytes skipped, not of the whole piece (Grep's context lines are many skips).
    """
    start, left = position, wanted
    while True:
        stop = min(len(piece), start + _SKIP_BLOCK)
        found = piece.count(b"\n", start, stop)
        if found < left:
            if stop == len(piece):
                return stop, wanted - left + found
            start, left = stop, left - found
            continue
        for _ in range(left):
            start = piece.index(b"\n", start) + 1
        return start, wanted


def read_lines(
    fd: int,
    size: int,
    start: int,
    count: int,
    from_end: bool,
    *,
    clip: int,
    max_chars: int | None,
    index: LineIndex | None = None,
) -> tuple[list[Shown], int, int]:
    """`count` lines from line `start` (0-based; counted from the end when `from_end`): (shown, total, omitted).

    With a line index of the file, reading starts at the entry nearest before the first line asked for.
    """
    if index is not None and index.size != size:
        index = None
    if from_end or index is not None:
        total = index.lines if index is not None else count_lines(fd, size)
        stop = max(0, total - start) if from_end else min(total, start + count)
        first = max(0, stop - count) if from_end else start
        ranges = [(first + 1, stop)] if stop > first else []
        begin = index.seek_line(first + 1) if index is not None and ranges else (0, 1)
        shown, omitted, _, _ = collect(fd, size, ranges, clip=clip, max_chars=max_chars, to_end=False, begin=begin)
        return shown, total, omitted
    ranges = [(start + 1, start + count)] if count > 0 else []
    shown, omitted, counted, _ = collect(fd, size, ranges, clip=clip, max_chars=max_chars, to_end=True)
    assert counted is not None
    return shown, counted, omitted


# windows (for Grep)


@dataclass(frozen=True, slots=True)
class Window:
    """Whole lines to search, data[start:end], with what comes before (lookbehind) and after, up to `stop`.

    `data` is the scanner's own buffer, valid until the next window is asked for (nothing is copied), or
    the whole file mapped.
    """

    data: Buffer
    start: int
    end: int
    stop: int
    first_line: int  # the number of the line data[start] is in
    final: bool
    base: int = 0  # the offset of data[0] in the normalized text
    line_start: int = 0  # the offset in the normalized text where line `first_line` starts


def windows(fd: int, size: int, *, numbered: bool = True, carriage: list[bool] | None = None) -> Iterator[Window]:
    """The file's normalized text as windows, read into one buffer allocated once.

    Fresh memory for every window would cost a page fault per 4 KiB: more than the search itself. Pieces
    are appended until the buffer is full (`SPAN` windows); only then is what is still needed (the text
    after the last window, and `BEHIND` before it) moved to the front. Unless `numbered`, lines are not
    counted (`first_line` stays 1): the caller numbers them from a line index. `carriage`, when given, gets
    True once a CR was read (until then, offsets in the text are offsets in the file).
    """
    capacity = BEHIND + SPAN * WINDOW + AHEAD + PIECE + 16
    buffer = bytearray(capacity)
    length = start = offset = base = line_start = 0
    line = 1
    while True:
        while offset < size and length - start < WINDOW + AHEAD:
            if length + PIECE + 16 > capacity:  # full: move what is still needed to the front
                keep = min(start, boundary(buffer, max(0, start - BEHIND), forward=True))
                with memoryview(buffer) as view:
                    view[: length - keep] = bytes(view[keep:length])
                length, start, base = length - keep, start - keep, base + keep
            length, offset, had_cr = _fill(fd, size, buffer, length, offset)
            if had_cr and carriage is not None and not carriage:
                carriage.append(True)
        if offset >= size and length - start <= WINDOW + AHEAD:
            yield Window(buffer, start, length, length, line, True, base, line_start)
            return
        # A window ends after its last newline; a line longer than a window is cut at a character boundary.
        cut = buffer.rfind(b"\n", start, start + WINDOW) + 1 or boundary(buffer, start + WINDOW)
        yield Window(buffer, start, cut, boundary(buffer, cut + AHEAD), line, False, base, line_start)
        if numbered:
            line += buffer.count(b"\n", start, cut)
        last = buffer.rfind(b"\n", start, cut)
        if last >= 0:
            line_start = base + last + 1
        start = cut


def mapped_windows(data: mmap.mmap, size: int) -> Iterator[Window]:
    """The windows of a mapped file without CR (its bytes are its normalized text), lines not counted.

    Cut as `windows` cuts them, so a match may reach as far past its window; nothing is read or copied here:
    the search reads the pages it looks at, at memchr speed when the prefilter skips. The pages behind the
    search are let go every `RELEASE` bytes (MADV_DONTNEED: they stay in the page cache, a later look faults
    them in again), so the process's resident memory does not grow with the file.
    """
    start = line_start = released = 0
    while size - start > WINDOW + AHEAD:
        cut = data.rfind(b"\n", start, start + WINDOW) + 1 or boundary(data, start + WINDOW)
        yield Window(data, start, cut, boundary(data, cut + AHEAD), 1, False, 0, line_start)
        last = data.rfind(b"\n", start, cut)
        if last >= 0:
            line_start = last + 1
        start = cut
        behind = max(0, start - BEHIND) // mmap.PAGESIZE * mmap.PAGESIZE
        if behind - released >= RELEASE and _DONTNEED is not None:
            data.madvise(_DONTNEED, released, behind - released)
            released = behind
    yield Window(data, start, size, size, 1, True, 0, line_start)


def _fill(fd: int, size: int, buffer: bytearray, length: int, offset: int) -> tuple[int, int, bool]:
    """Read the next piece into buffer[length:], CRLF and lone CR made LF; the new (length, offset), and
    whether the piece had a CR."""
    with memoryview(buffer) as view:
        got = os.preadv(fd, [view[length : length + min(PIECE, size - offset)]], offset)
    if not got:
        return length, size, False  # the file is shorter than it was: take what there is
    end, offset = length + got, offset + got
    if buffer.find(b"\r", length, end) < 0:
        return end, offset, False
    if buffer[end - 1] == 0x0D and offset < size and got > 1:  # a CRLF may straddle pieces: read this CR again
        end, offset = end - 1, offset - 1
    text = bytes(buffer[length:end]).replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    buffer[length : length + len(text)] = text  # never longer than what it replaces
    return length + len(text), offset, True


def boundary(data: bytes | Buffer, at: int, *, forward: bool = False) -> int:
    """The nearest UTF-8 character boundary at or before `at` (after it with `forward`), within 3 bytes."""
    if at >= len(data):
        return len(data)
    step, limit = (1, min(len(data), at + 3)) if forward else (-1, max(0, at - 3))
    while at != limit and data[at] & 0xC0 == 0x80:
        at += step
    return at
