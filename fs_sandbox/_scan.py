"""Searching one open text file (Grep), and the grep worker process that runs it.

Searches run in a separate process because CPython's `re` cannot be interrupted: a pattern that
backtracks catastrophically would hold the GIL, and the whole server with it. The parent kills the
worker when its time is up. The worker (`_worker.py`, stdlib only) gets the file the parent opened as a
descriptor passed over a Unix socket (SCM_RIGHTS), so it reads exactly what the parent's door let
through; results cross back as plain tuples. The file is read in windows (`fs_sandbox._lines`).
"""

from __future__ import annotations

import os
import pickle
import re
import socket
import struct
from collections.abc import Callable
from typing import TypeVar, cast

from fs_sandbox._lines import Window, collect, windows

MAX_PATTERN_CHARS = 1000

Line = tuple[int, str, bool, int]  # a grep line: (number, text, is a match, full length)

_REGEX_SYNTAX = frozenset(".^$*+?{}[]\\|()")
_FOLD_TO_ASCII = tuple(c.encode() for c in "\u0130\u0131\u017f\u212a")  # İ ı ſ K: all re.IGNORECASE adds to a-z


def _folds_to_ascii(data: bytearray, stop: int) -> bool:
    """Whether data[:stop] holds one of the four letters; their lead bytes are looked for first (memchr is fast)."""
    return any(data.find(code[:1], 0, stop) >= 0 and data.find(code, 0, stop) >= 0 for code in _FOLD_TO_ASCII)


def compile_pattern(pattern: str, case_sensitive: bool) -> re.Pattern[str]:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"the pattern is longer than {MAX_PATTERN_CHARS} characters")
    flags = re.MULTILINE | (0 if case_sensitive else re.IGNORECASE)
    return re.compile(pattern, flags)


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
    for window in windows(fd, size):
        resume, more = _search_window(window, compiled, needle if literal else None, found, max_matches, resume)
        if more:
            return found, True
    return found, False


def _search_window(
    window: Window, compiled: re.Pattern[str], needle: bytes | None, found: list[int], limit: int, resume: int
) -> tuple[int, bool]:
    data, start, end, stop = window.data, window.start, window.end, window.stop
    # re.IGNORECASE is Unicode-aware: "k" also matches the Kelvin sign, so lowered bytes stand in for the text
    # only where none of the four characters that fold to ASCII letters occur.
    ignoring_case = bool(compiled.flags & re.IGNORECASE)
    if needle is not None and not (ignoring_case and _folds_to_ascii(data, stop)):
        haystack = data[:stop].lower() if ignoring_case else data

        def literal(at: int) -> int:
            return haystack.find(needle, at, stop)

        return _search(haystack, start, end, stop, window, literal, found, limit, resume)
    with memoryview(data) as view:
        parts = [str(view[a:b], "utf-8", "replace") for a, b in ((0, start), (start, end), (end, stop))]
    text = "".join(parts)

    def regex(at: int) -> int:
        match = compiled.search(text, at)
        return -1 if match is None else match.start()

    first, last = len(parts[0]), len(parts[0]) + len(parts[1])
    return _search(text, first, last, len(text), window, regex, found, limit, resume)


Text = TypeVar("Text", str, bytes, bytearray)


def _search(
    text: Text,
    start: int,
    body_end: int,
    stop: int,
    window: Window,
    finder: Callable[[int], int],
    found: list[int],
    limit: int,
    resume: int,
) -> tuple[int, bool]:
    """Add the lines of the matches that start in text[start:body_end]; (the next `resume`, whether more exist).

    text[:start] and text[body_end:stop] are context only; in the final window `stop` is the end of the file.
    """
    newline = "\n" if isinstance(text, str) else b"\n"
    position, line = start, window.first_line
    if line < resume:  # the window goes on with a line that already matched
        skip = text.find(newline, start, body_end)
        if skip < 0:
            return resume, False
        position, line = skip + 1, line + 1
    counted = position
    # The empty "line" after a final newline is not a line (Read does not show it); a last line without one is.
    open_end = window.final and stop > 0 and text[stop - 1 : stop] != newline
    while (at := finder(position)) >= 0 and (at < body_end or (open_end and at == stop)):
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
