"""fs_sandbox reads and searches a file in pieces: the answers are those of the whole text, at any cut.

The scanner runs here in-process with pieces and windows of a few bytes, so every boundary case (a CRLF,
a character, a line or a match cut in two) happens many times over in small texts.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from fs_sandbox import _lines, _scan

EXAMPLES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def tiny_line_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_lines, "PIECE", 3)
    monkeypatch.setattr(_lines, "WINDOW", 8)
    monkeypatch.setattr(_lines, "AHEAD", 6)
    monkeypatch.setattr(_lines, "BEHIND", 4)


@pytest.fixture(scope="module")
def scratch() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as folder:
        yield os.path.join(folder, "f")


def opened(path: str, data: bytes) -> int:
    with open(path, "wb") as out:
        out.write(data)
    return os.open(path, os.O_RDONLY)


def whole_lines(data: bytes) -> list[str]:
    """The lines as the model sees them, from the whole text at once."""
    text = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def whole_grep(
    data: bytes, pattern: str, case_sensitive: bool, before: int, after: int, max_matches: int
) -> tuple[list[list[tuple[int, str, bool]]], int, bool]:
    """The search over the whole text, as the sandbox did before it streamed (the reference)."""
    text = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    compiled = re.compile(re2_spaces(pattern), re.MULTILINE | (0 if case_sensitive else re.IGNORECASE))
    lines = whole_lines(data)
    matches: list[int] = []
    more, position, number, counted = False, 0, 1, 0
    while position <= len(text) and (found := compiled.search(text, position)) is not None:
        at = found.start()
        if at == len(text) and (not text or text.endswith("\n")):
            break
        start, end = text.rfind("\n", 0, at) + 1, text.find("\n", at)
        number += text.count("\n", counted, start)
        counted = start
        if len(matches) == max_matches:
            more = True
            break
        matches.append(number)
        position = (len(text) if end < 0 else end) + 1
    blocks: list[list[tuple[int, str, bool]]] = []
    shown: set[int] = set()
    last = 0
    for n in matches:
        wanted = range(max(1, n - before), min(len(lines), n + after) + 1)
        if not blocks or wanted[0] > last + 1:
            blocks.append([])
        for line in wanted:
            if line in shown:
                if line == n:
                    block = blocks[-1]
                    block[[old[0] for old in block].index(line)] = (line, lines[line - 1], True)
                continue
            shown.add(line)
            blocks[-1].append((line, lines[line - 1], line == n))
        last = max(last, wanted[-1])
    return blocks, len(matches), more


def re2_spaces(pattern: str) -> str:
    """`pattern` with `\\s` and `\\S` spelled as RE2 (Grep's engine) reads them, `[\\t\\n\\f\\r ]`: `re` also counts
    `\\v` and `\\x1c`-`\\x1f` as space, in ASCII text as well (no pattern here puts them in a set)."""
    spelled = {"\\\\": "\\\\", "\\s": "[\\t\\n\\f\\r ]", "\\S": "[^\\t\\n\\f\\r ]"}
    return re.sub(r"\\\\|\\s|\\S", lambda found: spelled[found.group(0)], pattern)


def documented_difference(data: bytes, pattern: str, case_sensitive: bool) -> bool:
    """Where RE2 (Grep's engine) answers otherwise than `re`, as fs_sandbox/_engine.py documents and
    tests/fs_sandbox/test_grep_engine.py pins: `\\b \\w \\d \\s` are ASCII, without case İ and ı are not i, and a byte
    that is not UTF-8 (never in a stored output, which claimcheck writes as UTF-8) is no character to `.`."""
    text = data.decode("utf-8", "replace")
    ascii_classes = re.search(r"\\[bBwWdDsS]", pattern) is not None and not text.isascii()
    dotted = not case_sensitive and ("\u0130" in text or "\u0131" in text) and re.search("[iI]", pattern) is not None
    invalid = "\ufffd" in text and re.search(r"\.|\[\^|\\[SWD]", pattern) is not None  # bytes that are no UTF-8
    return ascii_classes or dotted or invalid


TEXTS = st.lists(
    st.tuples(
        st.text(alphabet="aAbB ikKsxé\u212a\u017f\u0131\u0130\ufffd", max_size=12),
        st.sampled_from(["\n", "\r\n", "\r", ""]),
    ),
    max_size=12,
).map(lambda parts: "".join(line + end for line, end in parts).encode("utf-8"))
BYTES = st.one_of(TEXTS, st.binary(max_size=40).map(lambda raw: raw.replace(b"\x00", b"a")))
PATTERNS = st.sampled_from(
    [
        "a",
        "ab",
        "A B",
        "b\nb",
        "a\n\nb",
        "^$",
        "^",
        "$",
        "b$",
        "^a",
        "x*",
        " ",
        "k",
        "s",
        "I",
        "é",
        r"\ba",
        r"(?<=a)b",
        "[ab]{2}",
        r"(a|b)+ ",
        "a{2,}",
        ".",
        ".$",
        "(?i)K",
        r"\w+ ",
        r"\S\s\S",
        "[^ab\n]",
        "é|x",
        "s*$",
        r"(b)\1",
    ]
)


@EXAMPLES
@example(data=b"a\x1ca", pattern=r"\S\s\S", case_sensitive=False, before=0, after=0, max_matches=1)
@example(data=b"a\x0ba", pattern=r"\S\s\S", case_sensitive=True, before=0, after=0, max_matches=1)
@given(
    data=BYTES,
    pattern=PATTERNS,
    case_sensitive=st.booleans(),
    before=st.integers(0, 3),
    after=st.integers(0, 3),
    max_matches=st.integers(1, 6),
)
def test_a_search_in_small_windows_finds_what_a_search_of_the_whole_text_finds(
    tiny_line_pieces: None,
    scratch: str,
    data: bytes,
    pattern: str,
    case_sensitive: bool,
    before: int,
    after: int,
    max_matches: int,
) -> None:
    assume(not documented_difference(data, pattern, case_sensitive))
    fd = opened(scratch, data)
    try:
        blocks, matches, more, left, left_blocks = _scan.grep(
            fd, len(data), pattern, case_sensitive, before, after, max_matches, 1000, None
        )
    finally:
        os.close(fd)

    expected = whole_grep(data, pattern, case_sensitive, before, after, max_matches)
    assert ([[line[:3] for line in block] for block in blocks], matches, more) == expected
    assert (left, left_blocks) == (0, 0)


@EXAMPLES
@given(data=BYTES, start=st.integers(0, 14), count=st.integers(0, 14), from_end=st.booleans())
def test_lines_read_in_small_pieces_are_the_lines_of_the_whole_text(
    tiny_line_pieces: None, scratch: str, data: bytes, start: int, count: int, from_end: bool
) -> None:
    fd = opened(scratch, data)
    try:
        shown, total, omitted = _lines.read_lines(fd, len(data), start, count, from_end, clip=1000, max_chars=None)
    finally:
        os.close(fd)

    lines = whole_lines(data)
    if from_end:
        stop = max(0, len(lines) - start)
        first = max(0, stop - count)
    else:
        first, stop = min(start, len(lines)), min(len(lines), start + count)
    assert [(number, text) for number, text, _ in shown] == [(n + 1, lines[n]) for n in range(first, stop)]
    assert [length for _, _, length in shown] == [len(lines[n]) for n in range(first, stop)]
    assert (total, omitted) == (len(lines), 0)


def test_a_line_longer_than_the_clip_is_cut_and_its_whole_length_counted(tiny_line_pieces: None, scratch: str) -> None:
    data = ("é" * 50 + "\nshort\n").encode()
    fd = opened(scratch, data)
    try:
        shown, total, _ = _lines.read_lines(fd, len(data), 0, 5, False, clip=7, max_chars=None)
        blocks, *_ = _scan.grep(fd, len(data), "é$", True, 0, 1, 5, 7, None)
    finally:
        os.close(fd)

    assert shown == [(1, "é" * 7, 50), (2, "short", 5)] and total == 2
    snippet = (49, "é" * 50, False, False)  # the line is longer than the clip: the match at column 49, in context
    assert blocks == [[(1, "é" * 7, True, 50, (snippet,), False), (2, "short", False, 5, (), False)]]


def test_past_the_character_budget_lines_are_counted_not_sent(tiny_line_pieces: None, scratch: str) -> None:
    data = "".join(f"line {i} x\n" for i in range(1, 31)).encode()
    fd = opened(scratch, data)
    try:
        shown, total, omitted = _lines.read_lines(fd, len(data), 0, 25, False, clip=100, max_chars=20)
        blocks, matches, more, left, left_blocks = _scan.grep(fd, len(data), "line (1|5|9|2.) ", True, 1, 0, 6, 100, 40)
    finally:
        os.close(fd)

    assert [number for number, _, _ in shown] == [1, 2, 3]  # 9 characters each: the third passes 20, still sent
    assert (total, omitted) == (30, 22)
    assert (matches, more) == (6, True)  # 1, 5, 9, 20, 21, 22 (and 23 past maxMatches)
    assert [[line[0] for line in block] for block in blocks] == [[1], [4, 5], [8, 9]]  # 45 characters by line 9
    assert (left, left_blocks) == (4, 1)  # lines 19-22, one more block
