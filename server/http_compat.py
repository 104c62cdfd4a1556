"""Every private part of starlette, uvicorn, h11 and httpcore2 claimcheck uses, in one place: what it is, why, and what
would replace it. tests/test_compat_canary.py fails, naming the entry, when one moves or changes shape."""

from __future__ import annotations

import asyncio.selector_events

import h11._connection
import httpcore2
from h11._receivebuffer import ReceiveBuffer
from starlette.requests import Request
from starlette.types import Send

# uvicorn's HTTP/1.1 protocol (an implementation module, not uvicorn's API). The status API and the HTTP
# transport subclass it to close a connection whose request is not complete by a deadline, a slow-client
# guard uvicorn lacks; the subclass uses its `conn` (the h11 connection), `transport`, `loop` and `client`, and
# extends `connection_made`, `data_received`, `on_response_complete` and `connection_lost`. Would be replaced
# by: a request-header/body timeout in uvicorn's config.
from uvicorn.protocols.http.h11_impl import H11Protocol as H11Protocol

__all__ = ["H11Protocol", "HandingBuffer", "hand_over_h11_bodies", "send_of", "widen_http_reads"]


def send_of(request: Request) -> Send:
    """The ASGI `send` of a request, which the SDK's SSE transport needs to stream its events itself. Starlette
    keeps it private on the Request of a plain route. Would be replaced by: mounting the SSE endpoint as an
    ASGI app (which gets `send` directly)."""
    send: Send = request._send
    return send


def widen_http_reads(size: int) -> None:
    """Let the process's HTTP/1.1 client connections read up to `size` bytes of a response at a time.

    Each read of a long body goes up through asyncio, anyio, h11, httpcore2, httpx2 and the spool at the same cost
    in Python, so the read's size sets what a gigabyte costs. httpcore2 reads 64 KiB at a time
    (`AsyncHTTP11Connection.READ_NUM_BYTES`, a class constant, not an option), and asyncio's socket transport
    receives at most 256 KiB (`max_size` of `asyncio.selector_events._SelectorSocketTransport`, for every socket of
    the loop: uvicorn's too, which then receives a request of up to `size` in one piece instead of four). Reading a
    megabyte where the socket holds one took an HTTP server's 1000 MiB output from 4.6–4.8 to 3.1 CPU s per GiB
    (docs/benchmarks.md). A short answer is read in one read either way; nothing is narrowed. Would be replaced by:
    a read size among httpx2's transport options."""
    connection = httpcore2.AsyncHTTP11Connection
    connection.READ_NUM_BYTES = max(size, connection.READ_NUM_BYTES)
    transport = getattr(asyncio.selector_events, "_SelectorSocketTransport", None)  # not on every event loop
    if transport is not None and isinstance(getattr(transport, "max_size", None), int):
        transport.max_size = max(size, transport.max_size)


def hand_over_h11_bodies() -> None:
    """Let h11 hand a body's bytes over without copying them to hold them or to look at them.

    h11 appends every read to its receive buffer (`h11._receivebuffer.ReceiveBuffer`, private, made by
    `h11._connection` for each connection), and gives a body's next bytes with `maybe_extract_at_most`, which
    slices the whole buffer once to see whether it is empty and again to take the bytes; httpcore2 then copies
    them into `bytes`. Each megabyte read was copied four times.

    - `maybe_extract_at_most` is replaced: it tests the length instead, and when the bytes asked for are all the
      buffer holds it hands over the buffer itself and starts an empty one.
    - Each h11 connection gets a `HandingBuffer`: a read that comes while nothing is buffered is held as it came
      (`bytes`), and what is asked of it is taken from it: the whole read itself when all of it is asked for (a
      `bytes`, which httpcore2 then keeps without a copy), else a slice (one copy, of what is taken); a chunk's
      header line is found in it too. Anything else (another read before it is all taken, the header lines of
      a message) first joins it to the buffer, as h11 would have.

    What each returns is what h11's own code returns (the same bytes; `bytes` where it gives a `bytearray` for a
    body's data, which every reader takes alike), and the line searches are reset alike, for every h11 connection
    of the process (uvicorn's too). The first took an HTTP server's 1000 MiB output from 1.76 to 1.58 user CPU s
    per GiB (docs/benchmarks.md). Would be replaced by: h11 taking bytes without copying them first (its buffer's
    own code)."""
    if ReceiveBuffer.maybe_extract_at_most is not _maybe_extract_at_most:
        ReceiveBuffer.maybe_extract_at_most = _maybe_extract_at_most  # type: ignore[method-assign]  # see above
    if h11._connection.ReceiveBuffer is ReceiveBuffer:  # type: ignore[attr-defined]  # see above
        h11._connection.ReceiveBuffer = HandingBuffer  # type: ignore[attr-defined]  # see above


def _maybe_extract_at_most(self: ReceiveBuffer, count: int) -> bytearray | None:
    """`ReceiveBuffer.maybe_extract_at_most`, its result the same, without copying to look (see above)."""
    data: bytearray = self._data
    if not data or count <= 0:
        return None
    self._next_line_search = 0
    self._multiple_lines_search = 0
    if count >= len(data):
        self._data = bytearray()
        return data
    out = data[:count]
    del data[:count]  # from the front: the bytearray moves its start, nothing is copied
    return out


class HandingBuffer(ReceiveBuffer):
    """h11's receive buffer, holding a read as it came while nothing else is buffered (`hand_over_h11_bodies`)."""

    def __init__(self) -> None:
        super().__init__()
        self._read = b""  # a read held as it came, only while `_data` is empty
        self._at = 0  # where what is left of it starts

    def _join(self) -> None:
        """What is left of the read held goes to the buffer, as h11 would have put it there."""
        if self._at < len(self._read):
            self._data += memoryview(self._read)[self._at :]
        self._read, self._at = b"", 0

    def __iadd__(self, byteslike: bytes | bytearray) -> HandingBuffer:
        if type(byteslike) is bytes and not self._data and self._at >= len(self._read):
            self._read, self._at = byteslike, 0
        else:
            self._join()
            self._data += byteslike
        return self

    def __len__(self) -> int:
        return len(self._data) + len(self._read) - self._at

    def __bytes__(self) -> bytes:
        self._join()
        return bytes(self._data)

    def maybe_extract_at_most(self, count: int) -> bytes | bytearray | None:  # type: ignore[override]  # bytes too
        read, at = self._read, self._at
        if at >= len(read):
            return _maybe_extract_at_most(self, count)
        if count <= 0:
            return None
        end = min(at + count, len(read))
        out = read if at == 0 and end == len(read) else read[at:end]
        self._taken(end)
        return out

    def maybe_extract_next_line(self) -> bytearray | None:
        read, at = self._read, self._at
        if at >= len(read):
            return super().maybe_extract_next_line()
        found = read.find(b"\r\n", at + max(0, self._next_line_search - 1))
        if found == -1:
            self._next_line_search = len(read) - at
            return None
        out = bytearray(memoryview(read)[at : found + 2])
        self._taken(found + 2)
        return out

    def _taken(self, end: int) -> None:
        """The read held is taken up to `end`; the line searches start again, as after h11's `_extract`."""
        self._next_line_search = 0
        self._multiple_lines_search = 0
        self._at = end
        if end == len(self._read):
            self._read, self._at = b"", 0

    def maybe_extract_lines(self) -> list[bytearray] | None:
        self._join()
        return super().maybe_extract_lines()

    def is_next_line_obviously_invalid_request_line(self) -> bool:
        self._join()
        return super().is_next_line_obviously_invalid_request_line()
