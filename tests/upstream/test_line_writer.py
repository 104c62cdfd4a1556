"""A line written in pieces (a pass-through's output streamed from its file) reaches the reader whole: lines given
meanwhile wait behind it, another such line waits its turn, the backlog holds about one piece, and a line cut
short is ended so that the lines after it stay whole. The escaped text is the file's text as one JSON string."""

from __future__ import annotations

import io
import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from server.upstream.line_writer import LineWriter
from server.upstream.streamed import EscapedText

pytestmark = pytest.mark.anyio

PIECE = 256 * 1024  # four times what a pipe holds: each piece waits for the reader


@contextmanager
def pipe() -> Iterator[tuple[int, int]]:
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    try:
        yield read_end, write_end
    finally:
        os.close(read_end)
        os.close(write_end)


async def read_lines(fd: int, count: int) -> list[bytes]:
    """`count` lines from `fd`, as they were written."""
    data = bytearray()
    while data.count(b"\n") < count:
        await anyio.wait_readable(fd)
        try:
            data += os.read(fd, 1 << 16)
        except BlockingIOError:
            continue
    return bytes(data).split(b"\n")[:count]


async def test_lines_given_while_a_line_is_written_in_pieces_wait_behind_it_and_the_backlog_stays_one_piece() -> None:
    backlog: list[int] = []
    with pipe() as (read_end, write_end), anyio.fail_after(20):
        writer = LineWriter(write_end)
        writer.write_nowait(b"before\n")

        async def pieces() -> AsyncIterator[bytes]:
            for number in range(8):
                backlog.append(writer.backlog)
                writer.write_nowait(f"meanwhile {number}\n".encode())
                yield bytes([ord("a") + number]) * PIECE
            yield b"\n"

        async with anyio.create_task_group() as tg:
            tg.start_soon(writer.write_pieces, pieces())
            lines = await read_lines(read_end, 10)
            await writer.write(b"after\n")
            (last,) = await read_lines(read_end, 1)
    streamed = b"".join(bytes([ord("a") + number]) * PIECE for number in range(8))
    assert lines == [b"before", streamed, *(f"meanwhile {number}".encode() for number in range(8))]
    assert last == b"after"
    assert max(backlog) <= PIECE + 8 * len(b"meanwhile 0\n")


async def test_a_second_line_in_pieces_waits_for_the_first_to_end() -> None:
    def pieces(mark: bytes) -> AsyncIterator[bytes]:
        async def generate() -> AsyncIterator[bytes]:
            for _ in range(4):
                yield mark * PIECE
                await anyio.lowlevel.checkpoint()  # the other writer gets a chance to slip in
            yield b"\n"

        return generate()

    with pipe() as (read_end, write_end), anyio.fail_after(20):
        writer = LineWriter(write_end)
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer.write_pieces, pieces(b"x"))
            tg.start_soon(writer.write_pieces, pieces(b"y"))
            lines = await read_lines(read_end, 2)
    assert lines == [b"x" * 4 * PIECE, b"y" * 4 * PIECE]


async def test_a_line_in_pieces_cut_short_is_ended_and_the_lines_after_it_stay_whole() -> None:
    with pipe() as (read_end, write_end), anyio.fail_after(20):
        writer = LineWriter(write_end)

        async def pieces() -> AsyncIterator[bytes]:
            yield b"{" * PIECE
            writer.write_nowait(b"whole\n")
            raise OSError(5, "the file could not be read")

        async with anyio.create_task_group() as tg:

            async def write() -> None:
                with pytest.raises(OSError):
                    await writer.write_pieces(pieces())

            tg.start_soon(write)
            lines = await read_lines(read_end, 2)
    assert lines == [b"{" * PIECE, b"whole"]


@settings(max_examples=300, deadline=None)
@given(
    text=st.text(),
    noise=st.lists(st.tuples(st.integers(0, 64), st.binary(min_size=1, max_size=3)), max_size=4),
    piece=st.integers(1, 7),
)
def test_escaped_text_is_the_file_decoded_whole_as_one_json_string(
    text: str, noise: list[tuple[int, bytes]], piece: int
) -> None:
    data = bytearray(text.encode("utf-8", "surrogatepass"))
    for at, junk in noise:  # bytes that are not UTF-8, anywhere, so cut sequences straddle the pieces
        data[at:at] = junk
    escaped = EscapedText(io.BytesIO(bytes(data)), piece)
    parts = []
    while part := escaped.read():
        parts.append(part)
    whole = bytes(data).decode("utf-8", "replace")
    assert json.loads(b'"' + b"".join(parts) + b'"') == whole
    assert b"".join(parts) == json.dumps(whole, ensure_ascii=False)[1:-1].encode(), "escaped as json.dumps escapes"
