"""The same bound for HTTP downstreams: response bodies pass through a transport that spools long messages.

The SDK's streamable-HTTP and SSE clients read a JSON body whole (`aread`) and an SSE event whole. This
`httpx2` transport sits under them and rewrites each response as it streams: a JSON body, or the `data:`
line of an SSE event, that grows past the spool threshold goes through `MessageSpool` instead, and the
client reads the small stand-in (or the original, or an error answer) in its place. Everything else
passes through untouched. Bodies are read up to a megabyte at a time (`http_compat.widen_http_reads`), not
httpcore2's 64 KiB, and h11 hands each read over without slicing it twice first (`http_compat.hand_over_h11_bodies`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import httpx2

from server.downstream.processes import PIPE_BYTES
from server.downstream.spool import MessageSpool, SpoolPolicy
from server.framing import Framer, LongLine
from server.http_compat import hand_over_h11_bodies, widen_http_reads
from server.sdk_compat import HttpClientFactory

__all__ = ["SpoolingTransport", "spooling_client_factory"]

logger = logging.getLogger(__name__)


class SpoolingTransport(httpx2.AsyncBaseTransport):
    """Wraps another transport; see the module docstring."""

    def __init__(self, policy: SpoolPolicy, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        widen_http_reads(PIPE_BYTES)  # a long body read as a server's stdout is: a megabyte at a time where it can
        hand_over_h11_bodies()  # and h11 copying each megabyte once, not three times
        self._policy = policy
        self._inner = inner if inner is not None else httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        stream: httpx2.AsyncByteStream
        if kind == "text/event-stream":
            stream = _EventStream(response.stream, self._policy)  # type: ignore[arg-type]  # a response's stream is async here
        elif kind == "application/json":
            stream = _JsonBody(response.stream, self._policy)  # type: ignore[arg-type]  # a response's stream is async here
        else:
            return response
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() != "content-length"]
        return httpx2.Response(response.status_code, headers=headers, stream=stream, extensions=response.extensions)

    async def aclose(self) -> None:
        await self._inner.aclose()


def spooling_client_factory(policy: SpoolPolicy) -> HttpClientFactory:
    """An `httpx_client_factory` for the legacy SSE transport whose clients spool, with MCP's default timeouts."""

    def factory(
        headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: httpx2.Auth | None = None
    ) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            headers=headers,
            timeout=timeout if timeout is not None else httpx2.Timeout(30.0, read=300.0),
            auth=auth,
            transport=SpoolingTransport(policy),
        )

    return factory


class _EventStream(httpx2.AsyncByteStream):
    """An SSE body, line by line; a long `data:` line is spooled and replaced."""

    def __init__(self, inner: httpx2.AsyncByteStream, policy: SpoolPolicy) -> None:
        self._inner = inner
        self._policy = policy
        self._spool: MessageSpool | None = None
        self._skipping = False  # a long line that is not data: dropped

    async def __aiter__(self) -> AsyncIterator[bytes]:
        framer = Framer(self._policy.threshold, keep_blank=True)
        async for chunk in self._inner:
            out = []
            for frame in framer.feed(chunk):
                piece = await self._frame(frame)
                if piece:
                    out.append(piece)
            if out:
                yield b"".join(out)
        rest = framer.rest()
        if rest is not None and (piece := await self._frame(rest)):
            yield piece

    async def _frame(self, frame: bytes | LongLine) -> bytes:
        if isinstance(frame, bytes):
            return frame + b"\n"
        if frame.kind == "first":
            if not frame.data.startswith(b"data:"):
                logger.warning("a downstream sent an SSE line over %d bytes that is not data; dropped", len(frame.data))
                self._skipping = True
                return b""
            self._spool = MessageSpool(self._policy, "downstream")
            data = frame.data[5:]
            await self._spool.feed(data[1:] if data.startswith(b" ") else data)
            return b""
        if self._skipping:
            self._skipping = frame.kind != "end"
            return b""
        assert self._spool is not None
        if frame.kind == "more":
            await self._spool.feed(frame.data)
            return b""
        spool, self._spool = self._spool, None
        message = await spool.finish()
        return b"data: " + message + b"\n" if isinstance(message, bytes) else b""

    async def aclose(self) -> None:
        if self._spool is not None:
            await self._spool.abort()
            self._spool = None
        await self._inner.aclose()


class _JsonBody(httpx2.AsyncByteStream):
    """A JSON body: passed on as it is while short, spooled and replaced once it is long."""

    def __init__(self, inner: httpx2.AsyncByteStream, policy: SpoolPolicy) -> None:
        self._inner = inner
        self._policy = policy
        self._spool: MessageSpool | None = None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        held: list[bytes] = []
        size = 0
        async for chunk in self._inner:
            if self._spool is not None:
                await self._spool.feed(chunk)
                continue
            held.append(chunk)
            size += len(chunk)
            if size > self._policy.threshold:
                self._spool = MessageSpool(self._policy, "downstream")
                await self._spool.feed(b"".join(held))
                held.clear()
        if self._spool is None:
            yield b"".join(held)
            return
        spool, self._spool = self._spool, None
        message = await spool.finish()
        if isinstance(message, bytes):
            yield message

    async def aclose(self) -> None:
        if self._spool is not None:
            await self._spool.abort()
            self._spool = None
        await self._inner.aclose()
