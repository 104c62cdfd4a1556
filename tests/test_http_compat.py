"""`http_compat.hand_over_h11_bodies` gives what h11's own code gives: the same bytes, the same buffer left, for
every split of a body into reads (its speed is docs/benchmarks.md's)."""

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
