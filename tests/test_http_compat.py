"""`http_compat.hand_over_h11_bodies` gives what h11's own code gives: the same bytes, the same buffer left, for
every split of a body into reads, and for any mix of what h11 asks of its buffer (its speed is docs/benchmarks.md's)."""

from __future__ import annotations

import random

import h11
from h11._receivebuffer import ReceiveBuffer

from server import http_compat


def _original(buffer: ReceiveBuffer, count: int) -> bytearray | None:
    """h11's `ReceiveBuffer.maybe_extract_at_most` as it is written (h11 0.16)."""
    out = buffer._data[:count]
    if not out:
        return None
    return buffer._extract(count)


def test_each_extraction_gives_the_bytes_and_leaves_the_buffer_h11_would() -> None:
    http_compat.hand_over_h11_bodies()
    rng = random.Random(7)
    for _ in range(300):
        ours, theirs = ReceiveBuffer(), ReceiveBuffer()
        for _ in range(rng.randrange(1, 6)):
            data = bytes(rng.choices(b"ab\r\n", k=rng.choice([0, 1, 5, 100, 4096])))  # lines to look for too
            ours += data
            theirs += data
            if rng.random() < 0.5:  # a search that finds no line leaves where it stopped, for the next one
                assert ours.maybe_extract_next_line() == theirs.maybe_extract_next_line()
            count = rng.choice([0, 1, 3, len(theirs), len(theirs) + 1, max(len(theirs) - 1, 0), 7000])
            taken = ours.maybe_extract_at_most(count)
            expected = _original(theirs, count)
            assert taken == expected and type(taken) is type(expected)
            assert bytes(ours) == bytes(theirs)
            assert ours.maybe_extract_next_line() == theirs.maybe_extract_next_line()


def test_a_line_search_after_an_extraction_starts_from_the_new_start() -> None:
    http_compat.hand_over_h11_bodies()
    buffer = ReceiveBuffer()
    buffer += b"ab"
    assert buffer.maybe_extract_next_line() is None  # it notes where it stopped looking
    assert buffer.maybe_extract_at_most(2) == bytearray(b"ab")
    buffer += b"\r\nx"
    assert buffer.maybe_extract_next_line() == bytearray(b"\r\n")


def test_bytes_asked_for_whole_are_handed_over_not_copied() -> None:
    http_compat.hand_over_h11_bodies()
    buffer = ReceiveBuffer()
    buffer += b"a megabyte, say"
    held = buffer._data  # the private buffer under test
    assert buffer.maybe_extract_at_most(1 << 20) is held  # h11's own code gives a copy
    assert not buffer and buffer._data is not held


def test_a_chunked_and_a_sized_body_come_out_whole_from_h11_read_by_read() -> None:
    http_compat.hand_over_h11_bodies()
    body = bytes(range(256)) * 400
    pieces = [body[i : i + 30000] for i in range(0, len(body), 30000)]
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"
    heads = {
        b"transfer-encoding: chunked": chunked,
        b"content-length: %d" % len(body): body,
    }
    for head, payload in heads.items():
        wire = b"HTTP/1.1 200 OK\r\n" + head + b"\r\n\r\n" + payload
        for size in (5, 4096, 40000, 1 << 20):
            connection = h11.Connection(h11.CLIENT)
            assert isinstance(connection._receive_buffer, http_compat.HandingBuffer)  # what is under test
            connection.send(h11.Request(method="GET", target="/", headers=[("host", "x")]))
            connection.send(h11.EndOfMessage())
            received = bytearray()
            ended = False
            for start in range(0, len(wire), size):
                connection.receive_data(wire[start : start + size])
                while (event := connection.next_event()) is not h11.NEED_DATA:
                    if isinstance(event, h11.Data):
                        received += event.data
                    ended = ended or isinstance(event, h11.EndOfMessage)
            assert ended and bytes(received) == body, (head, size)


def _same(ours: object, theirs: object) -> bool:
    """The same result, `bytes` standing for a `bytearray` of the same bytes."""
    if isinstance(theirs, list):
        return isinstance(ours, list) and len(ours) == len(theirs) and all(map(_same, ours, theirs))
    if isinstance(theirs, bytearray):
        return isinstance(ours, bytes | bytearray) and bytes(ours) == bytes(theirs)
    return type(ours) is type(theirs) and ours == theirs


def test_a_handing_buffer_answers_every_question_as_h11s_own_buffer_does() -> None:
    """Random reads (bytes, now and then a bytearray) and random questions, in h11's order or not: each answer, the
    length and the bytes left are the same as h11's own buffer's."""
    http_compat.hand_over_h11_bodies()
    rng = random.Random(11)
    for _ in range(1000):
        ours, theirs = http_compat.HandingBuffer(), ReceiveBuffer()
        for _ in range(rng.randrange(1, 24)):
            step = rng.randrange(7)
            if step == 0:
                data = bytes(rng.choices(b"ab\r\n", k=rng.choice([0, 1, 1, 2, 2, 3, 5, 100, 3000])))
                read = bytearray(data) if rng.random() < 0.2 else data
                ours += read
                theirs += read
            elif step == 1:
                count = rng.choice([0, 1, 2, 3, len(theirs), len(theirs) + 1, max(len(theirs) - 1, 0), 7000])
                assert _same(ours.maybe_extract_at_most(count), _original(theirs, count))
            elif step == 2:
                assert _same(ours.maybe_extract_next_line(), theirs.maybe_extract_next_line())
            elif step == 3:
                assert _same(ours.maybe_extract_lines(), theirs.maybe_extract_lines())
            elif step == 4:
                assert ours.is_next_line_obviously_invalid_request_line() == (
                    theirs.is_next_line_obviously_invalid_request_line()
                )
            elif step == 5:
                assert bytes(ours) == bytes(theirs)
            assert len(ours) == len(theirs) and bool(ours) == bool(theirs)
        assert bytes(ours) == bytes(theirs)


def test_a_read_asked_for_whole_is_handed_over_itself() -> None:
    """The read as it came, which httpcore2 keeps without a copy (`bytes` of a `bytes` is itself); a read taken in
    parts, a chunk's end, header and next chunk, gives each part once."""
    http_compat.hand_over_h11_bodies()
    buffer = http_compat.HandingBuffer()
    read = b"x" * 100_000
    buffer += read
    assert buffer.maybe_extract_at_most(1 << 20) is read and not buffer
    buffer += b"tail\r\n10\r\n" + b"y" * 16
    assert buffer.maybe_extract_at_most(4) == b"tail"
    assert buffer.maybe_extract_at_most(2) == b"\r\n"
    assert buffer.maybe_extract_next_line() == bytearray(b"10\r\n")
    assert buffer.maybe_extract_at_most(16) == b"y" * 16 and not buffer


def test_a_line_search_in_a_read_held_notes_where_it_stopped_from_the_buffers_start() -> None:
    """A search that finds no line in what is left of a read notes how far it looked from where the buffer starts
    (not the read), so the next read's line is found."""
    http_compat.hand_over_h11_bodies()
    buffer = http_compat.HandingBuffer()
    buffer += b"xyz"
    assert buffer.maybe_extract_at_most(2) == b"xy"
    assert buffer.maybe_extract_next_line() is None
    buffer += b"\r\nrest"
    assert buffer.maybe_extract_next_line() == bytearray(b"z\r\n")
