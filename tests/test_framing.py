"""Newline framing: whatever way a byte stream is cut into chunks, the same lines come out."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from server.framing import LineSplitter, parse_line

lines = st.lists(st.binary(max_size=300).map(lambda b: b.replace(b"\n", b"x")), max_size=20)


@given(lines=lines, cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30))
def test_any_chunking_of_a_stream_yields_its_non_blank_lines_in_order(lines: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(line + b"\n" for line in lines)
    bounds = sorted({0, len(stream), *(cut % (len(stream) + 1) for cut in cuts)})
    splitter = LineSplitter()

    got = [line for start, end in itertools.pairwise(bounds) for line in splitter.feed(stream[start:end])]

    assert got == [line for line in lines if line.strip()]


def test_an_unterminated_last_line_is_held_back_until_its_newline_arrives() -> None:
    splitter = LineSplitter()

    assert splitter.feed(b'{"a":') == []
    assert splitter.feed(b"1}\n") == [b'{"a":1}']


def test_a_garbage_line_becomes_an_error_for_the_session_not_an_exception() -> None:
    assert isinstance(parse_line(b"not json", "test"), ValueError)
