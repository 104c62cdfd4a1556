"""Searching one open text file (Grep), and the grep worker process that runs it.

Searches run in a separate process because CPython's `re` cannot be interrupted: a pattern that
backtracks catastrophically would hold the GIL, and the whole server with it. The parent kills the
worker when its time is up. The worker (`_worker.py`, stdlib only) gets the file the parent opened as a
descriptor passed over a Unix socket (SCM_RIGHTS), so it reads exactly what the parent's door let
through; results cross back as plain tuples. The file is read in windows (`fs_sandbox._lines`), or mapped.
"""

from __future__ import annotations

import bisect
import mmap
import os
import pickle
import re
import socket
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar, cast

from fs_sandbox._engine import Finder
from fs_sandbox._index import LineIndex
from fs_sandbox._lines import PIECE, Buffer, Snippet, Span, Window, boundary, collect, mapped_windows, windows
from fs_sandbox._prefilter import SAMPLE_BYTES

Line = tuple[int, str, bool, int, tuple[Snippet, ...], bool]
# a grep line: (number, text, is a match, full length, snippets around its matches when it is long,
# whether it has more matches than snippets)

PER_LINE = 8  # matches kept per line, each shown as a snippet when the line is long
_REGEX_SYNTAX = frozenset(".^$*+?{}[]\\|()")


@dataclass(slots=True)
class _Found:
    """The matches found so far: matching lines in order, the spans of each, where the search goes on.

    A line is known by where it starts in the normalized text (`starts`); its number is counted as the
    windows go (`lines`), or afterwards from a line index (`number_from_index`).
    """

    limit: int
    starts: list[int] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    spans: dict[int, list[Span]] = field(default_factory=dict)  # by line number (by start until numbered)
    crowded: set[int] = field(default_factory=set)  # lines with more matches than PER_LINE
    raw_offsets: bool = False  # no CR came before the last match: `starts` are offsets in the file
    full: bool = False  # the last matching line has PER_LINE spans: the rest of it is skipped
    next_at: int = 0  # where the next match may start, in the normalized text
    more: bool = False


def find_matches(
    fd: int, size: int, pattern: str, case_sensitive: bool, max_matches: int, index: LineIndex | None = None
) -> _Found:
    """The lines where matches start (each line once, at most `max_matches`), with up to PER_LINE match spans
    each; `more` when more matching lines exist.

    Matches are searched over whole windows of text, not line by line, so a pattern may span lines (as far as
    `AHEAD`); after a match that spans lines the search goes on at the start of the next line. RE2 searches
    the bytes, behind a prefilter when the pattern requires a byte rare in the file (`fs_sandbox._prefilter`);
    a pattern only `re` can run is searched in the decoded text. With a line index of a file without CR, the
    file is mapped (its bytes are the text: nothing is copied into a buffer) and newlines are not counted as
    the windows go: the lines found are numbered afterwards from the index, counting only from the entry
    before each. (A mapped file cut short meanwhile would kill the worker with SIGBUS: the search fails with
    "the search worker stopped unexpectedly", the server goes on.)
    """
    numbered = index is None or index.size != size or index.carriage_returns > 0
    finder = Finder(pattern, case_sensitive, _sample(fd, size))
    found = _Found(max_matches)
    if finder.plan.backtracking:
        compiled = finder.compiled
        for window in windows(fd, size):
            _search_text(window, compiled, found)
            if found.more:
                break
        return found
    if not numbered and size > 0:  # no CR to turn into LF: the file's own bytes, mapped, are the text
        with mmap.mmap(fd, size, prot=mmap.PROT_READ) as mapped:
            _search_windows(mapped_windows(mapped, size), finder, found, numbered=False)
        found.raw_offsets = True
    else:
        carriage: list[bool] = []
        _search_windows(windows(fd, size, numbered=numbered, carriage=carriage), finder, found, numbered=numbered)
        found.raw_offsets = not carriage
    if not numbered:
        assert index is not None
        _number_from_index(fd, found, index)
    return found


def _sample(fd: int, size: int) -> bytes:
    """Bytes of the file at its start and middle, for the prefilter to judge how rare a byte is."""
    sample = os.pread(fd, SAMPLE_BYTES, 0)
    if size > 2 * SAMPLE_BYTES:
        sample += os.pread(fd, SAMPLE_BYTES, size // 2)
    return sample


def _search_windows(source: Iterator[Window], finder: Finder, found: _Found, *, numbered: bool) -> None:
    find = finder.find  # RE2 (behind the prefilter when there is one)
    for window in source:
        data, stop = window.data, window.stop
        if finder.prefilter is not None:
            finder.prefilter.forget()  # the buffer's bytes moved, or the window ends elsewhere
        with memoryview(data) as view, view[:stop] as text:  # the bytes past `stop` are no context

            def search(at: int, text: memoryview = text, stop: int = stop, raw: Buffer = data) -> tuple[int, int]:
                return find(text, at, stop, raw)

            _search(window, data, window.start, window.end, stop, search, found, numbered=numbered)
        if found.more:
            break


def _number_from_index(fd: int, found: _Found, index: LineIndex) -> None:
    """Number the lines found (known by where they start) by counting newlines from the index entry before
    each, or from the line before when that is nearer; spans and crowded lines are then keyed by number."""
    offset, line = 0, 1
    numbers: list[int] = []
    for start in found.starts:
        entry = index.seek_offset(start)
        if entry[0] > offset:
            offset, line = entry
        while offset < start:
            data = os.pread(fd, min(PIECE // 4, start - offset), offset)  # counted while still in cache
            if not data:
                break
            line += data.count(b"\n")
            offset += len(data)
        numbers.append(line)
    by_start = dict(zip(found.starts, numbers, strict=True))
    found.lines = numbers
    found.spans = {by_start[start]: spans for start, spans in found.spans.items()}
    found.crowded = {by_start[start] for start in found.crowded}


def _search_text(window: Window, compiled: re.Pattern[str], found: _Found) -> None:
    """The backtracking path: the window decoded, offsets turned back into bytes for the spans."""
    data, start, end, stop = window.data, window.start, window.end, window.stop
    with memoryview(data) as view:
        parts = [str(view[a:b], "utf-8", "replace") for a, b in ((0, start), (start, end), (end, stop))]
    text = "".join(parts)
    cursor = [0, 0]  # a (character, byte) pair known to correspond

    def to_bytes(char: int) -> int:
        at, byte = cursor
        byte += len(text[at:char].encode()) if char >= at else -len(text[char:at].encode())
        cursor[:] = [char, byte]
        return byte

    def regex(at: int) -> tuple[int, int]:
        match = compiled.search(text, at)
        return (-1, -1) if match is None else match.span()

    first, last = len(parts[0]), len(parts[0]) + len(parts[1])
    _search(window, text, first, last, len(text), regex, found, to_bytes)


Text = TypeVar("Text", str, Buffer)


def _search(
    window: Window,
    text: Text,
    start: int,
    body_end: int,
    stop: int,
    finder: Callable[[int], tuple[int, int]],
    found: _Found,
    to_bytes: Callable[[int], int] | None = None,
    *,
    numbered: bool = True,
) -> None:
    """Add the matches that start in text[start:body_end]; text[:start] and text[body_end:stop] are context.

    In the final window `stop` is the end of the file. `to_bytes` turns an offset in `text` into one in
    `window.data` (when the text was decoded).
    """
    newline = "\n" if isinstance(text, str) else b"\n"
    base = window.base

    def absolute(at: int) -> int:
        return base + (at if to_bytes is None else to_bytes(at))

    line, line_start, counted = window.first_line, window.line_start, start
    position = start
    if to_bytes is None:
        position = max(start, found.next_at - base)
    if found.full and found.starts and found.starts[-1] == line_start:  # the window goes on with a full line
        skip = text.find(newline, start, body_end)
        if skip < 0:
            return
        position = max(position, skip + 1)
    # The empty "line" after a final newline is not a line (Read does not show it); a last line without one is.
    open_end = window.final and stop > 0 and text[stop - 1 : stop] != newline
    while True:
        at, until = finder(position)
        if at < 0 or not (at < body_end or (open_end and at == stop)):
            break
        last_newline = text.rfind(newline, counted, at)
        if last_newline >= 0:
            if numbered:
                assert not isinstance(text, mmap.mmap)  # a mapped file is searched only with a line index
                line += text.count(newline, counted, at)
            line_start = absolute(last_newline + 1)
        counted = at
        key = line if numbered else line_start
        if not found.starts or found.starts[-1] != line_start:
            if len(found.starts) == found.limit:
                found.more = True
                return
            found.starts.append(line_start)
            found.lines.append(line)
            found.spans[key] = []
            found.full = False
        spans = found.spans[key]
        spans.append((absolute(at) - line_start, absolute(until) - line_start))
        line_end = text.find(newline, at, body_end)
        if len(spans) == PER_LINE:
            found.full = True
            if finder(until)[0] >= 0 and (line_end < 0 or finder(until)[0] < line_end):
                found.crowded.add(key)
            if line_end < 0:
                found.next_at = base + (body_end if to_bytes is None else to_bytes(body_end))
                return
            position = line_end + 1
        elif 0 <= line_end < until:  # the match went on past its line: go on from the next line
            position = line_end + 1
        else:
            position = until if until > at else _next_char(text, at)
    if to_bytes is None:
        found.next_at = base + position


def _next_char(text: str | Buffer, at: int) -> int:
    """The offset of the character after the one at `at` (an empty match moves the search on by one)."""
    if isinstance(text, str):
        return at + 1
    return max(at + 1, boundary(text, at + 1, forward=True))  # past the end of a mapped file too


def grep(
    fd: int,
    size: int,
    pattern: str,
    case_sensitive: bool,
    before: int,
    after: int,
    max_matches: int,
    clip: int,
    max_chars: int | None,
    index: LineIndex | None = None,
) -> tuple[list[list[Line]], int, bool, int, int]:
    """Blocks of matching lines with context: (blocks, matches, more exist, lines left out, blocks left out).

    Context blocks that overlap or touch are merged. Lines past `max_chars` (see `collect`) are left out
    of the blocks and counted instead. A match line longer than `clip` comes with a snippet per match.
    """
    found = find_matches(fd, size, pattern, case_sensitive, max_matches, index)
    matches, more = found.lines, found.more
    ranges: list[tuple[int, int]] = []
    for number in matches:
        first, last = max(1, number - before), number + after
        if ranges and first <= ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], max(ranges[-1][1], last))
        else:
            ranges.append((first, last))
    shown, _, total, snippets = collect(
        fd,
        size,
        ranges,
        clip=clip,
        max_chars=max_chars,
        to_end=False,
        spans=found.spans,
        seek=_seeker(fd, size, index, found, before),
    )
    texts = {number: (text, length) for number, text, length in shown}
    blocks: list[list[Line]] = []
    left_lines = left_blocks = 0
    for block in _block_numbers(matches, before, after, total):
        kept: list[Line] = []
        for number, is_match in block:
            if number in texts and not left_lines:
                text, length = texts[number]
                around = tuple(snippets.get(number, ())) if is_match else ()
                kept.append((number, text, is_match, length, around, number in found.crowded))
            else:
                left_lines += 1
        if kept:
            blocks.append(kept)
        else:
            left_blocks += 1
    return blocks, len(matches), more, left_lines, left_blocks


def _seeker(
    fd: int, size: int, index: LineIndex | None, found: _Found, before: int
) -> Callable[[int], tuple[int, int]] | None:
    """Where to start reading towards a line: the index entry before it, or, when no CR came before the
    matches (so their line starts are file offsets), the start of a matching line, or of the line `before`
    lines up."""
    if index is not None and index.size != size:
        index = None
    places: list[tuple[int, int]] = []
    if found.raw_offsets:
        for start, number in zip(found.starts, found.lines, strict=True):
            places.append((start, number))
            if before:
                places.append(_lines_back(fd, start, number, before))
        places.sort(key=lambda place: place[1])
    numbers = [number for _, number in places]

    if index is None and not places:
        return None

    def seek(line: int) -> tuple[int, int]:
        entry = index.seek_line(line) if index is not None else (0, 1)
        at = bisect.bisect_right(numbers, line) - 1
        return places[at] if at >= 0 and places[at][1] > entry[1] else entry

    return seek


def _lines_back(fd: int, start: int, number: int, count: int) -> tuple[int, int]:
    """(offset, line) of the line `count` lines before the one starting at `start`, looking back 64 KiB at most."""
    low = max(0, start - (64 << 10))
    data = os.pread(fd, start - low, low)
    at, line = len(data) - 1, number  # data ends with the newline that ends the line before
    while line > number - count:
        previous = data.rfind(b"\n", 0, at)
        if previous < 0:
            if low == 0 and at >= 0:
                return 0, line - 1
            break
        at, line = previous, line - 1
    return low + at + 1, line


def _block_numbers(matches: list[int], before: int, after: int, total: int | None) -> list[list[tuple[int, bool]]]:
    """Each block as (line number, is a match); a block goes on while contexts overlap or touch."""
    blocks: list[list[tuple[int, bool]]] = []
    shown: dict[int, bool] = {}
    last_shown = 0
    for number in matches:
        first = max(1, number - before)
        last = number + after if total is None else min(number + after, total)
        if blocks and first <= last_shown + 1:
            block = blocks[-1]
        else:
            block = []
            blocks.append(block)
        for line in range(first, last + 1):
            is_match = line == number
            if line in shown:
                if is_match and not shown[line]:  # a context line that is itself a match
                    block[next(i for i, old in enumerate(block) if old[0] == line)] = (line, True)
                    shown[line] = True
                continue
            shown[line] = is_match
            block.append((line, is_match))
        last_shown = max(last_shown, last)
    return blocks


def serve(channel: socket.socket) -> None:
    """The worker loop: a length-prefixed pickled request with the file's descriptor in, a pickled reply out.

    Replies are ("ok", result) or ("error", kind, text).
    """
    while True:
        data, fds, _, _ = socket.recv_fds(channel, 1 << 16, 1)
        if not data:
            return
        try:
            while len(data) < 8 or len(data) < 8 + struct.unpack("<Q", data[:8])[0]:
                more = channel.recv(1 << 16)
                if not more:
                    return
                data += more
            reply = _answer(fds[0] if fds else -1, pickle.loads(data[8:]))
        finally:
            for fd in fds:
                os.close(fd)
        payload = pickle.dumps(reply, pickle.HIGHEST_PROTOCOL)
        channel.sendall(struct.pack("<Q", len(payload)) + payload)


def _answer(fd: int, request: tuple[object, ...]) -> tuple[object, ...]:
    size, pattern, case_sensitive, before, after, max_matches, clip, max_chars, index = cast(
        tuple[int, str, bool, int, int, int, int, "int | None", "LineIndex | None"], request
    )
    try:
        return ("ok", grep(fd, size, pattern, case_sensitive, before, after, max_matches, clip, max_chars, index))
    except re.error as exc:
        return ("error", "pattern", f"invalid regular expression: {exc}")
    except ValueError as exc:
        return ("error", "pattern", str(exc))
    except OSError as exc:
        return ("error", "file", str(exc.strerror or exc))
