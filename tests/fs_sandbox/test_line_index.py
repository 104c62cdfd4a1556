"""The line index kept beside a stored output: built while it is written, the same answers as a scan from the start.

Entries come every few bytes here (SPACING patched), so every boundary case (an entry inside a character,
between the CR and LF of a CRLF, inside a long line) happens many times over in small texts.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extraction import find_all, read_chars
from fs_sandbox import INDEX_SUFFIX, LineIndex, _index, _lines, _scan, open_file
from server.handles.store import OutputStore
from tests.support.handles import Downstream, client_of, handle_in
from tests.support.proxies import running_proxy, text_of

EXAMPLES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
TEXTS = st.lists(
    st.tuples(st.text(alphabet="ab é😀\u212a", max_size=9), st.sampled_from(["\n", "\n", "\n", "\r\n", "\r", ""])),
    max_size=12,
).map(lambda parts: "".join(line + end for line, end in parts).encode("utf-8"))
CUTS = st.lists(st.integers(1, 7), max_size=20)


@pytest.fixture
def tiny_spacing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_index, "SPACING", 3)
    monkeypatch.setattr(_lines, "PIECE", 4)
    monkeypatch.setattr(_lines, "WINDOW", 8)
    monkeypatch.setattr(_lines, "AHEAD", 6)
    monkeypatch.setattr(_lines, "BEHIND", 4)


def built(data: bytes, cuts: list[int]) -> bytes:
    """The index of `data` fed in pieces of the sizes `cuts` (then the rest), as a writer feeds it."""
    builder = _index.IndexBuilder()
    at = 0
    for size in cuts:
        builder.feed(data[at : at + size])
        at += size
    builder.feed(data[at:])
    return builder.finish()


def stored(folder: Path, data: bytes, cuts: list[int]) -> Path:
    (folder / "f").write_bytes(data)
    (folder / ("f" + INDEX_SUFFIX)).write_bytes(built(data, cuts))
    return folder / "f"


@EXAMPLES
@given(data=TEXTS, cuts=CUTS)
def test_every_entry_says_where_it_is_and_the_totals_are_the_texts(
    tiny_spacing: None, folder: Path, data: bytes, cuts: list[int]
) -> None:
    index = LineIndex.parse(built(data, cuts), len(data))
    assert index is not None
    text = data.decode("utf-8")
    normal = text.replace("\r\n", "\n").replace("\r", "\n")
    assert (index.size, index.chars) == (len(data), len(text))
    assert index.lines == normal.count("\n") + (1 if normal and not normal.endswith("\n") else 0)
    for offset, line, chars, start in zip(
        index.offsets, index.line_numbers, index.char_counts, index.starts, strict=True
    ):
        before = data[:offset].decode("utf-8")  # an entry is never inside a character
        assert not (before.endswith("\r") and data[offset : offset + 1] == b"\n")  # nor inside a CRLF
        assert chars == len(before)
        lines_before = before.replace("\r\n", "\n").replace("\r", "\n").count("\n")
        assert line == lines_before + 1
        assert start == (offset == 0 or before[-1] in "\r\n")
    assert LineIndex.parse(built(data, cuts), len(data) + 1) is None  # an index of another size is not used


@EXAMPLES
@given(data=TEXTS, cuts=CUTS)
def test_pieces_fed_with_their_character_counts_give_the_same_index(
    tiny_spacing: None, data: bytes, cuts: list[int]
) -> None:
    """A writer that knows how many characters each piece holds (the spool's) says so; only the part before an
    entry is then counted, and the index is the same byte for byte."""
    builder = _index.IndexBuilder()
    at = 0
    for size in [*cuts, len(data)]:
        piece = data[at : at + size]
        builder.feed(piece, len(piece.decode("utf-8", "ignore")) if _whole(data, at, at + size) else None)
        at += len(piece)
    assert builder.finish() == built(data, cuts)
    assert builder.newlines == data.count(b"\n")


def _whole(data: bytes, start: int, end: int) -> bool:
    """Whether data[start:end] begins and ends on character boundaries."""
    return all(at >= len(data) or data[at] & 0xC0 != 0x80 for at in (start, end))


@EXAMPLES
@given(data=TEXTS, cuts=CUTS, start=st.integers(0, 14), count=st.integers(0, 5), from_end=st.booleans())
def test_read_from_the_index_is_read_from_the_start(
    tiny_spacing: None, folder: Path, data: bytes, cuts: list[int], start: int, count: int, from_end: bool
) -> None:
    with open_file(stored(folder, data, cuts).parent, "f") as opened:
        assert opened.index is not None
        indexed = _lines.read_lines(
            opened.fd, opened.size, start, count, from_end, clip=50, max_chars=None, index=opened.index
        )
        scanned = _lines.read_lines(opened.fd, opened.size, start, count, from_end, clip=50, max_chars=None)
    assert indexed == scanned


@EXAMPLES
@given(
    data=TEXTS,
    cuts=CUTS,
    start=st.integers(0, 40),
    length=st.integers(0, 12),
    needle=st.sampled_from(["a", "é😀", " \n", "\r\n"]),
)
def test_slices_and_anchors_from_the_index_are_the_texts(
    tiny_spacing: None, folder: Path, data: bytes, cuts: list[int], start: int, length: int, needle: str
) -> None:
    text = data.decode("utf-8")
    with open_file(stored(folder, data, cuts).parent, "f") as opened:
        assert read_chars(opened, start, start + length, 1000) == (text[start : start + length], len(text))
        found = list(find_all(opened, needle))
    expected, at = [], text.find(needle)
    while at >= 0:
        expected.append(at)
        at = text.find(needle, at + 1)
    assert found == expected


@pytest.mark.anyio
async def test_the_store_keeps_an_index_beside_each_output_and_drops_it_with_the_output(tmp_path: Path) -> None:
    store = OutputStore.create(tmp_path)
    try:
        session = store.open_session()
        handle = session.new_handle()
        text = "".join(f"line {i} é\r\n" if i % 3 else f"line {i}\n" for i in range(300_000))
        await session.write(handle, text)
        with session.open_output(handle) as opened:
            assert opened.index is not None and opened.index.lines == 300_000
            assert opened.index.chars == len(text) and len(opened.index.offsets) == opened.size >> 20
            last = _lines.read_lines(opened.fd, opened.size, 0, 1, True, clip=50, max_chars=None, index=opened.index)
        assert last[0] == [(300_000, "line 299999 é", 13)]
        session.discard(handle)
        assert os.listdir(session.path) == []
    finally:
        store.close()


@EXAMPLES
@given(
    data=TEXTS,
    cuts=CUTS,
    pattern=st.sampled_from(["a", "b$", "^", "é😀", r"\s", "K", "a b", "x*", "$"]),
    before=st.integers(0, 2),
    after=st.integers(0, 2),
    max_matches=st.integers(1, 5),
)
def test_grep_from_the_index_is_grep_from_the_start(
    tiny_spacing: None,
    folder: Path,
    data: bytes,
    cuts: list[int],
    pattern: str,
    before: int,
    after: int,
    max_matches: int,
) -> None:
    with open_file(stored(folder, data, cuts).parent, "f") as opened:
        assert opened.index is not None
        args = (opened.fd, opened.size, pattern, False, before, after, max_matches, 4, 30)
        assert _scan.grep(*args, opened.index) == _scan.grep(*args)


def _tampered(index: bytes, how: str) -> bytes:
    """`index` with one of its numbers changed as a hand or a damaged disk might change it."""
    head = len(_index._MAGIC)
    total, lines, chars, count, crs = _index._HEAD.unpack_from(index, head)
    entries = [
        list(_index._ENTRY.unpack_from(index, head + _index._HEAD.size + i * _index._ENTRY.size)) for i in range(count)
    ]
    if how == "lines":
        lines = 2**64 - 1
    elif how == "chars":
        chars = total + 1
    elif how == "entry past the end":
        entries[-1][0] = total + 5
    elif how == "entries out of order":
        entries[0][0], entries[1][0] = entries[1][0], entries[0][0]
    elif how == "line number going back":
        entries[1][1] = 0
    elif how == "more lines than bytes between entries":
        entries[1][1] = entries[0][1] + (entries[1][0] - entries[0][0]) + 1
    elif how == "line numbers off by one":  # every number still possible
        entries = [[offset, line + 1, chars_before, start] for offset, line, chars_before, start in entries]
        lines += 1
    elif how == "character counts zero":  # every number still possible
        entries = [[offset, line, 0, start] for offset, line, _, start in entries]
    body = b"".join(_index._ENTRY.pack(*entry) for entry in entries)
    digests = index[head + _index._HEAD.size + count * _index._ENTRY.size :]  # kept as written
    return index[:head] + _index._HEAD.pack(total, lines, chars, count, crs) + body + digests


@pytest.mark.anyio
@pytest.mark.parametrize(
    "how",
    [
        "lines",
        "chars",
        "entry past the end",
        "entries out of order",
        "line number going back",
        "more lines than bytes between entries",
        "line numbers off by one",
        "character counts zero",
    ],
)
async def test_a_tampered_index_is_rebuilt_and_read_counts_the_true_lines(how: str) -> None:
    down = Downstream()
    async with running_proxy({"down": down.server}, settings={"asyncTokenThreshold": 1000}) as proxy:
        async with client_of(proxy) as client:
            with anyio.fail_after(60):
                handle = handle_in(text_of(await client.call_tool("down__big", {"lines": 60_000})))
                path = proxy.sessions.store.resolve(handle)
                assert path is not None
                index = path.with_name(path.name + INDEX_SUFFIX)
                good = index.read_bytes()
                assert LineIndex.parse(good, path.stat().st_size) is not None
                index.write_bytes(_tampered(good, how))
                read = await client.call_tool("Read", {"file": handle, "start": 59_998, "lines": 5})
                rebuilt = index.read_bytes()
    assert not read.is_error
    assert "lines 59999-60000 of 60000:" in text_of(read), text_of(read)
    assert "line 59999 of the big output" in text_of(read)
    assert rebuilt == good  # rebuilt as it was written


@pytest.mark.parametrize("size", [10, 3 << 20])  # under one end block, and several entries long
def test_an_index_is_used_only_beside_the_file_it_was_written_for(tmp_path: Path, size: int) -> None:
    written = (b"a line\n" * (size // 7 + 1))[:size]
    other = written[:-2] + b"!\n"  # the same size, another end
    index = built(written, [size // 3, size // 2])
    for name, data in (("written", written), ("other", other)):
        (tmp_path / name).write_bytes(data)
    with open(tmp_path / "written", "rb") as same, open(tmp_path / "other", "rb") as changed:
        assert LineIndex.parse(index, size, _index.ends_digest(same.fileno(), size)) is not None
        assert LineIndex.parse(index, size, _index.ends_digest(changed.fileno(), size)) is None


LINE_RUNS = st.lists(st.tuples(st.integers(0, 300), st.integers(1, 400)), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None)
@given(runs=LINE_RUNS, piece=st.integers(16 << 10, 96 << 10))
def test_newlines_counted_by_deleting_them_are_the_bytes_counted(runs: list[tuple[int, int]], piece: int) -> None:
    """Long lines are counted by deleting their newlines (memchr), short ones byte by byte; the index is the same
    either way, and once a piece's lines turn out short the file is counted byte by byte from then on."""
    data = b"".join((b"x" * length + b"\n") * count for length, count in runs) + "é".encode() * 2000
    fast, plain = _index.IndexBuilder(), _index.IndexBuilder()
    plain._by_deleting = False
    for start in range(0, len(data), piece):
        fast.feed(data[start : start + piece])
        plain.feed(data[start : start + piece])
    assert fast.newlines == plain.newlines == data.count(b"\n")
    assert fast.finish() == plain.finish()


def test_a_piece_whose_lines_are_short_past_its_sample_turns_deleting_off() -> None:
    builder = _index.IndexBuilder()
    builder.feed(b"x" * 8191 + b"\n" + b"a\n" * (32 << 10))  # a sample with no newline, then 2-byte lines
    assert builder.newlines == 1 + (32 << 10)
    assert not builder._by_deleting
