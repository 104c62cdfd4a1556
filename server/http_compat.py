"""Every private part of starlette, uvicorn, h11 and httpcore2 claimcheck uses, in one place: what it is, why, and what
would replace it. tests/test_compat_canary.py fails, naming the entry, when one moves or changes shape."""

from __future__ import annotations

import asyncio.selector_events

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

__all__ = ["H11Protocol", "hand_over_h11_bodies", "send_of", "widen_http_reads"]


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
    """Let h11 hand a body's bytes over without the copies it makes only to look at them.

    h11's receive buffer (`h11._receivebuffer.ReceiveBuffer`, private) gives a body's next bytes with
    `maybe_extract_at_most`, which slices the whole buffer once to see whether it is empty and again to take the
    bytes: two copies of every megabyte read, on top of the one into the buffer and httpcore2's into `bytes`. The
    replacement tests the length instead, and when the bytes asked for are all the buffer holds (a body read as it
    came) it hands over the buffer itself and starts an empty one. It returns what the original returns (a
    bytearray of the same bytes, or None when there are none or none are asked for) and resets the same line
    searches, for every h11 connection of the process (uvicorn's too). It took an HTTP server's 1000 MiB output
    from 1.76 to 1.58 user CPU s per GiB (docs/benchmarks.md). Would be replaced by: h11 taking bytes without
    copying them first (its buffer's own code)."""
    if ReceiveBuffer.maybe_extract_at_most is not _maybe_extract_at_most:
        ReceiveBuffer.maybe_extract_at_most = _maybe_extract_at_most  # type: ignore[method-assign]  # see above


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
