"""Reading and searching one text file; also the grep worker process (run by path, stdlib only).

Searches run in a separate process because CPython's `re` cannot be interrupted: a pattern that
backtracks catastrophically would hold the GIL, and the whole server with it. The parent kills the
worker when its time is up. Results cross the pipe as plain tuples, so this module can run as
`__main__` in the worker and as `fs_sandbox._scan` in the parent alike.
"""

from __future__ import annotations

import bisect
import itertools
import os
import pickle
import re
import stat
import struct
import sys
from array import array
from collections.abc import Callable
from typing import AnyStr

Line = tuple[int, str, bool]  # (1-based number, text, is a match)

MAX_PATTERN_CHARS = 1000


def decode(data: bytes) -> str:
    """Text as the model should see it: invalid UTF-8 shown as U+FFFD, CR line ends removed."""
    text = data.decode("utf-8", "replace")
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def read_file(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{os.path.basename(path)} is not a regular file")
        os.set_blocking(fd, True)
        size = os.fstat(fd).st_size
        data = os.read(fd, size + 1)  # one read, one buffer; keep reading if the file grew meanwhile
        while chunk := os.read(fd, 1 << 20):
            data += chunk
    finally:
        os.close(fd)
    return data


def line_slice(text: str, start: int, count: int, from_end: bool) -> tuple[list[tuple[int, str]], int]:
    """`count` lines from line `start` (0-based; from the end when `from_end`), and the total."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    total = len(lines)
    if from_end:
        stop = max(0, total - start)
        first = max(0, stop - count)
    else:
        first, stop = min(start, total), min(total, start + count)
    return [(number + 1, lines[number]) for number in range(first, stop)], total


def compile_pattern(pattern: str, case_sensitive: bool) -> re.Pattern[str]:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"the pattern is longer than {MAX_PATTERN_CHARS} characters")
    flags = re.MULTILINE | (0 if case_sensitive else re.IGNORECASE)
    return re.compile(pattern, flags)


_REGEX_SYNTAX = frozenset(".^$*+?{}[]\\|()")


def grep_file(
    file: StoredFile, pattern: str, case_sensitive: bool, before: int, after: int, max_matches: int
) -> tuple[list[list[Line]], int, bool]:
    """`grep_text` over a file; a plain ASCII literal is searched in its bytes without decoding."""
    data = file.data
    literal = not _REGEX_SYNTAX.intersection(pattern) and pattern.isascii() and not file.has_cr
    # re.IGNORECASE is Unicode-aware ("k" also matches the Kelvin sign), so bytes only stand in for ASCII text.
    literal = literal and (case_sensitive or file.ascii)
    if not literal:
        return grep_text(decode(data), pattern, case_sensitive, before, after, max_matches)
    compile_pattern(pattern, case_sensitive)  # the same limits as a regex
    needle = pattern.encode() if case_sensitive else pattern.lower().encode()
    haystack = data if case_sensitive else file.lowered()  # bytes.lower changes ASCII letters only

    def finder(position: int) -> int:
        return haystack.find(needle, position)

    file.searches += 1  # the first search counts newlines; later ones use a line index, built once
    return _grep(data, finder, before, after, max_matches, file.line_of if file.searches > 1 else None)


class StoredFile:
    """A stored output as the worker keeps it: outputs never change once written, so greps share this."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.has_cr = b"\r" in data
        self.ascii = data.isascii()
        self.searches = 0
        self._lowered: bytes | None = None
        self._newlines: array[int] | None = None

    def lowered(self) -> bytes:
        if self._lowered is None:
            self._lowered = self.data.lower()
        return self._lowered

    def line_of(self, offset: int) -> int:
        """The 1-based number of the line that starts at or contains byte `offset`."""
        if self._newlines is None:
            ends = itertools.accumulate(len(line) + 1 for line in self.data.split(b"\n"))
            self._newlines = array("q", (end - 1 for end in ends))
            self._newlines.pop()  # the last "line" has no newline after it
        return bisect.bisect_left(self._newlines, offset) + 1


_cache: dict[tuple[str, int, int, int], StoredFile] = {}
_CACHED_FILES = 2


def load(path: str) -> StoredFile:
    """The file at `path`, from the cache while its inode, size and mtime are unchanged."""
    stats = os.stat(path, follow_symlinks=False)
    key = (path, stats.st_ino, stats.st_size, stats.st_mtime_ns)
    if (hit := _cache.pop(key, None)) is None:
        hit = StoredFile(read_file(path))
    _cache[key] = hit  # most recent last
    while len(_cache) > _CACHED_FILES:
        _cache.pop(next(iter(_cache)))
    return hit


def grep_text(
    text: str, pattern: str, case_sensitive: bool, before: int, after: int, max_matches: int
) -> tuple[list[list[Line]], int, bool]:
    """Blocks of matching lines with context (overlapping blocks merged), matches shown, whether more exist.

    The search runs over the whole text, not line by line, so a literal costs one fast scan; a
    match counts for the line it starts on, once per line.
    """
    compiled = compile_pattern(pattern, case_sensitive)

    def finder(position: int) -> int:
        found = compiled.search(text, position)
        return -1 if found is None else found.start()

    return _grep(text, finder, before, after, max_matches)


def _grep(
    text: AnyStr,
    finder: Callable[[int], int],
    before: int,
    after: int,
    max_matches: int,
    line_of: Callable[[int], int] | None = None,
) -> tuple[list[list[Line]], int, bool]:
    newline = _newline(text)
    matches: list[tuple[int, int, int]] = []  # (line number, line start, line end)
    line_number, counted_to, position, more = 1, 0, 0, False
    while position <= len(text):
        at = finder(position)
        if at < 0 or (at == len(text) and (not text or text.endswith(newline))):
            break  # nothing, or only the empty "line" after the final newline, which Read does not show
        start = text.rfind(newline, 0, at) + 1
        end = text.find(newline, at)
        end = len(text) if end < 0 else end
        if line_of is not None:
            line_number = line_of(start)
        else:
            line_number += text.count(newline, counted_to, start)
            counted_to = start
        if len(matches) == max_matches:
            more = True
            break
        matches.append((line_number, start, end))
        position = end + 1
    return _blocks(text, matches, before, after), len(matches), more


def _newline(text: AnyStr) -> AnyStr:
    return "\n" if isinstance(text, str) else b"\n"


def _line(text: AnyStr) -> str:
    return text if isinstance(text, str) else text.decode("utf-8", "replace")


def _blocks(text: AnyStr, matches: list[tuple[int, int, int]], before: int, after: int) -> list[list[Line]]:
    blocks: list[list[Line]] = []
    shown: dict[int, Line] = {}
    last_shown = 0
    for number, start, end in matches:
        context_before = _lines_before(text, start, before)
        context_after = _lines_after(text, end, after)
        first = number - len(context_before)
        lines: list[Line] = [(first + i, line, False) for i, line in enumerate(context_before)]
        lines.append((number, _line(text[start:end]), True))
        lines.extend((number + 1 + i, line, False) for i, line in enumerate(context_after))
        if blocks and lines[0][0] <= last_shown + 1:
            block = blocks[-1]
        else:
            block = []
            blocks.append(block)
        for line in lines:
            if line[0] in shown:
                if line[2] and not shown[line[0]][2]:  # a context line that is itself a match
                    index = next(i for i, old in enumerate(block) if old[0] == line[0])
                    block[index] = shown[line[0]] = line
                continue
            shown[line[0]] = line
            block.append(line)
        last_shown = max(last_shown, lines[-1][0])
    return blocks


def _lines_before(text: AnyStr, start: int, count: int) -> list[str]:
    lines: list[str] = []
    end = start - 1  # the newline ending the previous line
    while count > 0 and end >= 0:
        begin = text.rfind(_newline(text), 0, end) + 1
        lines.append(_line(text[begin:end]))
        end = begin - 1
        count -= 1
    return lines[::-1]


def _lines_after(text: AnyStr, end: int, count: int) -> list[str]:
    lines: list[str] = []
    begin = end + 1
    while count > 0 and begin < len(text):
        stop = text.find(_newline(text), begin)
        stop = len(text) if stop < 0 else stop
        lines.append(_line(text[begin:stop]))
        begin = stop + 1
        count -= 1
    return lines


def serve() -> None:
    """The worker loop: length-prefixed pickled requests in, pickled ("ok", result) or ("error", kind, text) out."""
    reader = sys.stdin.buffer
    writer = sys.stdout.buffer
    while header := reader.read(8):
        request = pickle.loads(reader.read(struct.unpack("<Q", header)[0]))
        path, pattern, case_sensitive, before, after, max_matches = request
        try:
            reply: tuple[object, ...] = (
                "ok",
                grep_file(load(path), pattern, case_sensitive, before, after, max_matches),
            )
        except re.error as exc:
            reply = ("error", "pattern", f"invalid regular expression: {exc}")
        except ValueError as exc:
            reply = ("error", "pattern", str(exc))
        except OSError as exc:
            reply = ("error", "file", str(exc.strerror or exc))
        data = pickle.dumps(reply, pickle.HIGHEST_PROTOCOL)
        writer.write(struct.pack("<Q", len(data)) + data)
        writer.flush()


if __name__ == "__main__":
    serve()
