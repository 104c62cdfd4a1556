"""Reading and searching one open text file in pieces; also the grep worker process (run by path, stdlib only).

Text is seen as the model should see it: invalid UTF-8 as U+FFFD, CRLF and lone CR as line ends. Memory
stays within a few pieces whatever the file's size: lines are found by counting newlines in bytes, and only
the lines asked for are decoded, each cut to `clip` characters (its full length is still counted).

Searches run in a separate process because CPython's `re` cannot be interrupted: a pattern that
backtracks catastrophically would hold the GIL, and the whole server with it. The parent kills the
worker when its time is up. The worker gets the file the parent opened as a descriptor passed over a
Unix socket (SCM_RIGHTS), so it reads exactly what the parent's door let through; results cross back as
plain tuples. This module runs as `__main__` in the worker and as `fs_sandbox._scan` in the parent alike.
"""

from __future__ import annotations

import codecs
import os
import pickle
import re
import socket
import struct
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import AnyStr, cast

PIECE = 1 << 20  # bytes read at a time
WINDOW = 1 << 20  # bytes of whole lines a search looks at before it moves on
AHEAD = 64 << 10  # how far past its window a match that starts in it may reach
BEHIND = 4 << 10  # how much before its window a lookbehind or \b may see
MAX_PATTERN_CHARS = 1000

Shown = tuple[int, str, int]  # (1-based line number, text cut to `clip` characters, full length in characters)
Line = tuple[int, str, bool, int]  # a grep line: (number, text, is a match, full length)
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


# grep

_REGEX_SYNTAX = frozenset(".^$*+?{}[]\\|()")
_FOLD_TO_ASCII = tuple(c.encode() for c in "\u0130\u0131\u017f\u212a")  # İ ı ſ K: all re.IGNORECASE adds to a-z


def _folds_to_ascii(data: bytes) -> bool:
    """Whether `data` holds one of the four letters; their lead bytes are looked for first (memchr is fast)."""
    return any(code[:1] in data and code in data for code in _FOLD_TO_ASCII)


def compile_pattern(pattern: str, case_sensitive: bool) -> re.Pattern[str]:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"the pattern is longer than {MAX_PATTERN_CHARS} characters")
    flags = re.MULTILINE | (0 if case_sensitive else re.IGNORECASE)
    return re.compile(pattern, flags)


@dataclass(frozen=True, slots=True)
class _Window:
    """Whole lines to search (`body`), with what comes before and after them for context."""

    before: bytes
    body: bytes
    ahead: bytes
    first_line: int  # the number of the line `body` starts in
    final: bool


def _windows(fd: int, size: int) -> Iterator[_Window]:
    source = pieces(fd, size)
    buffer, before, line, done = b"", b"", 1, False
    while True:
        while not done and len(buffer) < WINDOW + AHEAD:
            piece = next(source, None)
            if piece is None:
                done = True
            else:
                buffer += piece
        if done and len(buffer) <= WINDOW + AHEAD:
            yield _Window(before, buffer, b"", line, True)
            return
        cut = buffer.rfind(b"\n", 0, WINDOW) + 1 or _boundary(buffer, WINDOW)  # a line longer than a window is cut
        body = buffer[:cut]
        yield _Window(before, body, buffer[cut : _boundary(buffer, cut + AHEAD)], line, False)
        line += body.count(b"\n")
        tail = body[-BEHIND:] if len(body) >= BEHIND else (before + body)[-BEHIND:]
        before = tail[_boundary(tail, 0, forward=True) :]
        buffer = buffer[cut:]


def _boundary(data: bytes, at: int, *, forward: bool = False) -> int:
    """The nearest UTF-8 character boundary at or before `at` (after it with `forward`), within 3 bytes."""
    if at >= len(data):
        return len(data)
    step, limit = (1, min(len(data), at + 3)) if forward else (-1, max(0, at - 3))
    while at != limit and data[at] & 0xC0 == 0x80:
        at += step
    return at


def find_matches(fd: int, size: int, pattern: str, case_sensitive: bool, max_matches: int) -> tuple[list[int], bool]:
    """The numbers of the lines where matches start (each line once), at most `max_matches`; whether more exist.

    The search runs over whole windows of text, not line by line, so a literal costs one fast scan and a
    pattern may span lines (as far as `AHEAD`). A plain ASCII literal is searched in bytes, undecoded.
    """
    compiled = compile_pattern(pattern, case_sensitive)
    literal = not _REGEX_SYNTAX.intersection(pattern) and pattern.isascii()
    needle = (pattern if case_sensitive else pattern.lower()).encode()
    found: list[int] = []
    resume = 1  # the first line a new match may be on
    for window in _windows(fd, size):
        resume, more = _search_window(window, compiled, needle if literal else None, found, max_matches, resume)
        if more:
            return found, True
    return found, False


def _search_window(
    window: _Window, compiled: re.Pattern[str], needle: bytes | None, found: list[int], limit: int, resume: int
) -> tuple[int, bool]:
    joined = window.before + window.body + window.ahead
    # re.IGNORECASE is Unicode-aware: "k" also matches the Kelvin sign, so lowered bytes stand in for the text
    # only where none of the four characters that fold to ASCII letters occur.
    folding = compiled.flags & re.IGNORECASE and not joined.isascii() and _folds_to_ascii(joined)
    if needle is not None and not folding:
        data = joined.lower() if compiled.flags & re.IGNORECASE else joined
        start, end = len(window.before), len(window.before) + len(window.body)
        return _search(data, start, end, window, lambda at: data.find(needle, at), found, limit, resume)
    parts = [part.decode("utf-8", "replace") for part in (window.before, window.body, window.ahead)]
    text = "".join(parts)

    def regex(at: int) -> int:
        match = compiled.search(text, at)
        return -1 if match is None else match.start()

    return _search(text, len(parts[0]), len(parts[0]) + len(parts[1]), window, regex, found, limit, resume)


def _search(
    text: AnyStr,
    start: int,
    body_end: int,
    window: _Window,
    finder: Callable[[int], int],
    found: list[int],
    limit: int,
    resume: int,
) -> tuple[int, bool]:
    """Add the lines of the matches that start in text[start:body_end]; (the next `resume`, whether more exist)."""
    newline = "\n" if isinstance(text, str) else b"\n"
    position, line = start, window.first_line
    if line < resume:  # the window goes on with a line that already matched
        skip = text.find(newline, start, body_end)
        if skip < 0:
            return resume, False
        position, line = skip + 1, line + 1
    counted = position
    # The empty "line" after a final newline is not a line (Read does not show it); a last line without one is.
    open_end = window.final and len(text) > 0 and not text.endswith(newline)
    while (at := finder(position)) >= 0 and (at < body_end or (open_end and at == len(text))):
        line += text.count(newline, counted, at)
        if len(found) == limit:
            return resume, True
        found.append(line)
        end = text.find(newline, at, body_end)
        if end < 0:
            return line + 1, False  # the rest of this line is in the next window
        position = counted = end + 1
        line += 1
    return resume, False


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
) -> tuple[list[list[Line]], int, bool, int, int]:
    """Blocks of matching lines with context: (blocks, matches, more exist, lines left out, blocks left out).

    Context blocks that overlap or touch are merged. Lines past `max_chars` (see `collect`) are left out
    of the blocks and counted instead.
    """
    matches, more = find_matches(fd, size, pattern, case_sensitive, max_matches)
    ranges: list[tuple[int, int]] = []
    for number in matches:
        first, last = max(1, number - before), number + after
        if ranges and first <= ranges[-1][1] + 1:
            ranges[-1] = (ranges[-1][0], max(ranges[-1][1], last))
        else:
            ranges.append((first, last))
    shown, _, total = collect(fd, size, ranges, clip=clip, max_chars=max_chars, to_end=False)
    texts = {number: (text, length) for number, text, length in shown}
    blocks: list[list[Line]] = []
    left_lines = left_blocks = 0
    for block in _block_numbers(matches, before, after, total):
        kept: list[Line] = []
        for number, is_match in block:
            if number in texts and not left_lines:
                kept.append((number, texts[number][0], is_match, texts[number][1]))
            else:
                left_lines += 1
        if kept:
            blocks.append(kept)
        else:
            left_blocks += 1
    return blocks, len(matches), more, left_lines, left_blocks


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
    size, pattern, case_sensitive, before, after, max_matches, clip, max_chars = cast(
        tuple[int, str, bool, int, int, int, int, "int | None"], request
    )
    try:
        return ("ok", grep(fd, size, pattern, case_sensitive, before, after, max_matches, clip, max_chars))
    except re.error as exc:
        return ("error", "pattern", f"invalid regular expression: {exc}")
    except ValueError as exc:
        return ("error", "pattern", str(exc))
    except OSError as exc:
        return ("error", "file", str(exc.strerror or exc))


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
