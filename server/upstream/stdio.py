"""Serving MCP on the process's own stdin/stdout without a thread per read and write.

mcp 2.3.0's `stdio_server` reads and writes through `anyio.wrap_file`, a worker-thread hop for every
line and flush; on a proxy that is most of the per-call overhead. When stdin and stdout are pipes or
sockets (how every MCP client launches a server) this module polls them on the event loop instead.
Like the SDK, it moves the wire to private descriptors and points fd 0 at /dev/null and fd 1 at
stderr while serving, so stray prints cannot corrupt the protocol. Anything else (a terminal, a
regular file) falls back to the SDK's transport. A request line past the budget (`server.budget`: longer
than `max_request_bytes`, drained without being held, or nested too deep) is answered with a JSON-RPC error
before any parser reads it, and so is a line that is not JSON-RPC; the connection goes on. While the answers
waiting for stdout pass `BACKLOG_HIGH` bytes, or `OWED_HIGH` requests wait for their answers (a client that
does not read them, or floods), stdin is not read until both are below their low-water marks: the client's
requests wait in the pipe, not in memory (`server.upstream.line_writer`). Given the registry of spooled
outputs, the transport streams a pass-through's output from its file in place of the SDK's stand-in answer
(`server.upstream.streamed`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import stat
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.stdio import stdio_server
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types import JSONRPCError, JSONRPCMessage, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

from server.budget import HEAD_BYTES, MAX_BYTES, Refused, check_budget, request_key, too_large, unreadable
from server.downstream.spooled import SpooledOutputs
from server.framing import Framer, LongLine, encode, parse_line
from server.platform import loop_reads_pipes, private_duplicate
from server.upstream.line_writer import LineWriter
from server.upstream.streamed import LineLink, stand_in_token, write_stand_in

__all__ = ["DEFAULT_MAX_REQUEST_BYTES", "Take", "fd_streams", "stdio_streams"]

logger = logging.getLogger(__name__)

_READ_SIZE = 1 << 16
_QUEUE_HIGH, _QUEUE_LOW = 64, 16
"""Frames waiting for the SDK's side beyond which stdin is not read, and below which it is again."""
_QUEUE_BYTES = 1 << 20
"""Nor is it while this many bytes of frames wait (a flood of large requests holds about one of them)."""
DEFAULT_MAX_REQUEST_BYTES = MAX_BYTES

Take = Callable[[bytes], bool]
"""Offered each request line before the SDK reads it; True: taken (`server.upstream.fastpath`)."""
Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]


@asynccontextmanager
async def stdio_streams(
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    fast: Callable[[LineWriter], Take] | None = None,
    outputs: SpooledOutputs | None = None,
) -> AsyncIterator[Streams]:
    """The server side of stdio: messages read from stdin, and a stream whose messages go to stdout.

    `fast` makes, from the writer of whole lines to stdout, the function each request line is
    offered to first (the SDK's transport fallback has none: the lines are not seen there, and it streams
    nothing)."""
    if not (loop_reads_pipes() and _pollable(0) and _pollable(1)):  # else the SDK's reader, in threads
        async with stdio_server() as streams:
            yield streams
        return
    with _claimed(0, os.devnull, os.O_RDONLY) as wire_in, _claimed(1, None, os.O_WRONLY) as wire_out:
        async with fd_streams(wire_in, wire_out, max_request_bytes, fast, outputs) as streams:
            yield streams


@asynccontextmanager
async def fd_streams(
    wire_in: int,
    wire_out: int,
    max_request_bytes: int,
    fast: Callable[[LineWriter], Take] | None = None,
    outputs: SpooledOutputs | None = None,
    link: str = "",
) -> AsyncIterator[Streams]:
    """Newline-delimited JSON-RPC over two non-blocking descriptors (pipes, or one socket twice).

    With `outputs` or a `link` (one relay's, `server.upstream.shared_serve`), each message handed the SDK carries
    them as its transport context (`LineLink`, the request's `ctx.request`), and a stand-in answer naming one of
    the outputs is written with the output streamed in its place."""
    metadata = ServerMessageMetadata(request_context=LineLink(outputs, link)) if outputs is not None or link else None
    to_session, from_client = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_client, from_session = anyio.create_memory_object_stream[SessionMessage](0)

    writer = LineWriter(wire_out)
    write = writer.write
    owed: set[tuple[bool, int | str]] = set()  # the SDK's requests not answered yet

    async def read_stdin() -> None:
        reader = LineReader(wire_in, max_request_bytes, take, writer)
        with contextlib.closing(reader), to_session:
            while (frame := await reader.next()) is not None:
                if isinstance(frame, Refused):
                    await write(frame.line())
                elif take is None or not _taken(take, frame):
                    message = parse_line(frame, "client")
                    if isinstance(message, Exception):  # the SDK would drop it unanswered
                        await write(unreadable(frame, message).line())
                    else:
                        _account(message.message, owed, writer)
                        message.metadata = metadata
                        await to_session.send(message)

    async def write_stdout() -> None:
        async with from_session:
            async for message in from_session:
                token = stand_in_token(message) if outputs is not None else None
                if token is not None and outputs is not None:
                    written = await write_stand_in(writer, message, token, outputs)
                else:
                    written = await write(encode(message))
                if not written:
                    return  # the client went away; reading stdin will end too
                answered = message.message
                if isinstance(answered, JSONRPCResponse | JSONRPCError) and answered.id is not None:
                    _settled(request_key(answered.id), owed, writer)

    take = fast(writer) if fast is not None else None
    async with anyio.create_task_group() as tg:
        tg.start_soon(read_stdin)
        tg.start_soon(write_stdout)
        try:
            yield from_client, to_client
        finally:
            tg.cancel_scope.cancel()


def _account(message: JSONRPCMessage, owed: set[tuple[bool, int | str]], writer: LineWriter) -> None:
    """A request the SDK will answer is owed; one the client cancelled is not any more (it never will be)."""
    if isinstance(message, JSONRPCRequest):
        key = request_key(message.id)
        if key not in owed:
            owed.add(key)
            writer.owe()
    elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
        ident = (message.params or {}).get("requestId")
        if isinstance(ident, int | str):
            _settled(request_key(ident), owed, writer)


def _settled(key: tuple[bool, int | str], owed: set[tuple[bool, int | str]], writer: LineWriter) -> None:
    if key in owed:
        owed.discard(key)
        writer.paid()


class LineReader:
    """Request lines from a non-blocking descriptor, read by an event-loop reader callback (asyncio's, which is
    what anyio runs on here): a line `take` takes is handled right there, without waking a task; every other
    line, or the refusal of one past the budget, waits, in order, for `next` (and once one waits, so do the
    lines after it, to keep their order). Nothing is read while `writer` holds too many unwritten answers."""

    def __init__(self, fd: int, max_request_bytes: int, take: Take | None, writer: LineWriter | None = None) -> None:
        self._fd = fd
        self._max_bytes = max_request_bytes
        self._framer = Framer(max_request_bytes)
        self._take = take
        self._writer = writer
        self._queue: deque[bytes | Refused] = deque()
        self._queued = 0  # bytes in `_queue`
        self._head = b""  # the start of a line too long to read
        self._eof = False
        self._reading = False
        self._held = False  # paused until the writer's backlog drains and the answers owed are paid
        self._waiter: asyncio.Future[None] | None = None
        self._loop = asyncio.get_running_loop()
        if writer is not None:
            writer.on_drained = self._drained

    async def next(self) -> bytes | Refused | None:
        """The next line the callback did not take, or the refusal of one; None at end of file."""
        while not self._queue:
            if self._eof:
                return None
            self._resume()
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        frame = self._queue.popleft()
        self._queued -= _size(frame)
        if not self._reading and len(self._queue) < _QUEUE_LOW and self._queued < _QUEUE_BYTES // 4:
            self._resume()
        return frame

    def close(self) -> None:
        self._pause()
        if self._writer is not None:
            self._writer.on_drained = None

    def _drained(self) -> None:
        """The writer's backlog and the answers owed fell below their low-water marks: read again, as far as the
        queue allows."""
        if not self._held:
            return
        self._held = False
        if len(self._queue) < _QUEUE_LOW and self._queued < _QUEUE_BYTES // 4:
            self._resume()

    def _resume(self) -> None:
        if not self._reading and not self._eof and not self._held:
            self._loop.add_reader(self._fd, self._readable)
            self._reading = True

    def _pause(self) -> None:
        if self._reading:
            self._loop.remove_reader(self._fd)
            self._reading = False

    def _readable(self) -> None:
        try:
            chunk = os.read(self._fd, _READ_SIZE)
        except BlockingIOError:
            return
        except ConnectionResetError:
            chunk = b""
        queue = self._queue
        if not chunk:
            self._eof = True
            self._pause()
        else:
            take = self._take
            for frame in self._framer.feed(chunk):
                line = self._line(frame)
                if line is None:
                    continue
                if isinstance(line, bytes) and not queue and take is not None and _taken(take, line):
                    continue
                queue.append(line)
                self._queued += _size(line)
            if len(queue) >= _QUEUE_HIGH or self._queued >= _QUEUE_BYTES:
                self._pause()  # the SDK's side is behind: the pipe holds the rest
            writer = self._writer
            if writer is not None and writer.full():
                self._held = True  # the client does not read its answers: the pipe holds its requests
                self._pause()
        waiter = self._waiter
        if (queue or self._eof) and waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _line(self, frame: bytes | LongLine) -> bytes | Refused | None:
        """A line to offer and queue, the refusal of one past the budget, or None for a part of a long one."""
        if isinstance(frame, bytes):
            return check_budget(frame, max_bytes=self._max_bytes) or frame
        if frame.kind == "first":
            self._head = frame.data[:HEAD_BYTES]
        elif frame.kind == "end":
            head, self._head = self._head, b""
            return too_large(head, self._max_bytes)
        return None  # the middle of a request too large to read: drained, never held


def _size(frame: bytes | Refused) -> int:
    return len(frame) if isinstance(frame, bytes) else 0


def _taken(take: Take, frame: bytes) -> bool:
    try:
        return take(frame)
    except Exception:  # the SDK's path answers it (a bug here must not end the connection)
        logger.exception("the fast path failed to read a request; the SDK's path takes it")
        return False


def _pollable(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


@contextmanager
def _claimed(fd: int, diversion: str | None, flags: int) -> Iterator[int]:
    """A private non-blocking duplicate of `fd`; meanwhile `fd` itself points at `diversion` (None: stderr)."""
    private = private_duplicate(fd)
    substitute = os.open(diversion, flags) if diversion is not None else os.dup(2)
    os.dup2(substitute, fd)
    os.close(substitute)
    was_blocking = os.get_blocking(private)
    os.set_blocking(private, False)
    try:
        yield private
    finally:
        os.set_blocking(private, was_blocking)  # the pipe's description may be shared with our parent
        os.dup2(private, fd)
        os.close(private)
