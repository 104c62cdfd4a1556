"""Newline framing: whatever way a byte stream is cut into chunks, the same lines come out."""

from __future__ import annotations

import itertools
import json

import mcp_types as types
import pytest
from hypothesis import given
from hypothesis import strategies as st
from mcp.shared.message import SessionMessage

from server.framing import Framer, LineSplitter, LongLine, dump_json, encode, lone_surrogates_replaced, parse_line

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


@given(lines=lines, cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30), limit=st.integers(1, 400))
def test_the_framer_gives_short_lines_whole_and_long_ones_in_pieces_that_add_up(
    lines: list[bytes], cuts: list[int], limit: int
) -> None:
    stream = b"".join(line + b"\n" for line in lines)
    bounds = sorted({0, len(stream), *(cut % (len(stream) + 1) for cut in cuts)})
    framer = Framer(limit)
    got: list[bytes] = []
    long: list[bytes] | None = None
    for start, end in itertools.pairwise(bounds):
        for frame in framer.feed(stream[start:end]):
            if isinstance(frame, bytes):
                assert len(frame) <= limit and long is None
                got.append(frame)
            elif frame.kind == "first":
                assert long is None and len(frame.data) > limit
                long = [frame.data]
            elif frame.kind == "more":
                assert long is not None
                long.append(frame.data)
            else:
                assert long is not None
                got.append(b"".join(long))
                long = None
    assert long is None and framer.rest() is None
    assert got == [line for line in lines if line.strip() or len(line) > limit]


def test_a_line_that_never_ends_is_never_held_past_the_limit() -> None:
    framer = Framer(100)
    frames = [frame for _ in range(1000) for frame in framer.feed(b"x" * 1000)]
    assert all(isinstance(frame, LongLine) for frame in frames)
    assert [frame.kind for frame in frames[:2] if isinstance(frame, LongLine)] == ["first", "more"]
    assert framer.in_long_line
    assert isinstance(framer.rest(), LongLine)


@pytest.mark.parametrize(
    ("line", "text"),
    [
        (rb'"a\ud800b"', "a\ufffdb"),
        (rb'"\udc00"', "\ufffd"),
        (rb'"\ud800\udc00"', "\U00010000"),  # a pair is kept
        (rb'"x\uD83D\uDE00\udfff"', "x\U0001f600\ufffd"),
        (rb'"\\ud800"', "\\ud800"),  # an escaped backslash, then plain text
        (rb'"\\\ud800"', "\\\ufffd"),
    ],
)
def test_lone_surrogate_escapes_become_replacement_characters_and_pairs_are_kept(line: bytes, text: str) -> None:
    assert json.loads(lone_surrogates_replaced(line)) == text


def test_a_message_carrying_a_lone_surrogate_is_read_and_written_again() -> None:
    line = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a\\ud800b"}]}}'
    message = parse_line(line, "downstream")
    assert isinstance(message, SessionMessage)
    assert json.loads(encode(message))["result"]["content"][0]["text"] == "a\ufffdb"
    text = types.TextContent(type="text", text="lone \ud800")  # made here, not read: written escaped
    assert json.loads(dump_json(text))["text"] == "lone \ud800"
