"""A stdio client transport that reads in linear time, in bounded memory, and reports when the child's stdout ends.

mcp 2.3.0's `stdio_client` re-splits its whole buffer on every 64 KiB chunk (quadratic in the size of
one message) and holds every message whole; this one frames with `Framer`, and a message longer than the
spool threshold goes to disk through `MessageSpool` as it arrives (the session gets a small stand-in; a
pass-through that waits for it may get its output as it grows, `RawChannel.take_growing`).
`closed` is set when the child goes away, which is how the downstream supervisor notices a crash without
waiting for a call; `mid_message` says that the child is in the middle of a long message. The child's
stderr is passed on to claimcheck's and its last lines are kept (`StderrTail`), so that a server that
exits can be said to have exited with what status and what last words (`StdioProcess.why_down`).
"""

from __future__ import annotations

import logging
import os
import shlex
import sys
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import anyio.abc
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from server.anyio_compat import stream_writer_of
from server.downstream.processes import HEAD_START, spawn, stop
from server.downstream.rawchannel import RawChannel
from server.downstream.spool import MessageSpool, SpoolPolicy
from server.errors import clip
from server.framing import Framer, LineSplitter, LongLine, encode, parse_line, unreadable_answer

__all__ = ["StderrTail", "StdioProcess", "stdio_transport"]

logger = logging.getLogger(__name__)

_READ_BYTES = 1 << 20
_RAW_BUFFERED = 1 << 16
"""Beyond this many bytes waiting for the child's stdin, a raw request waits for it to drain as others do."""
_STDERR_DRAIN_S = 0.5
"""How long, after the child exited, its stderr may take to end (a grandchild may hold it open)."""
TAIL_LINES = 5
"""The last lines of a child's stderr kept to say why it went away."""
TAIL_LINE_CHARS = 300
TAIL_PARTIAL_BYTES = 4096
"""The most of an unfinished stderr line kept while waiting for its end."""


class StderrTail:
    """The last `TAIL_LINES` lines of a stream, each cut at `TAIL_LINE_CHARS`: bounded however much comes."""

    def __init__(self) -> None:
        self._lines: deque[str] = deque(maxlen=TAIL_LINES)
        self._partial = b""
        self.written = 0
        """How many non-blank lines the stream has ended so far (`line_after` waits on it)."""
        self._grew: anyio.Event | None = None

    def feed(self, data: bytes) -> None:
        *complete, self._partial = (self._partial + data).split(b"\n")
        ended = sum(1 for line in complete if line.strip())
        if ended:
            self.written += ended
            if self._grew is not None:
                self._grew.set()
                self._grew = None
        for line in [line for line in complete if line.strip()][-TAIL_LINES:]:
            self._keep(line)
        self._partial = self._partial[-TAIL_PARTIAL_BYTES:]

    def _keep(self, raw: bytes) -> None:
        line = raw.decode("utf-8", "replace").strip()
        if line:
            self._lines.append(line if len(line) <= TAIL_LINE_CHARS else line[:TAIL_LINE_CHARS] + "…")

    async def line_after(self, mark: int) -> None:
        """Until the stream has ended a line past its first `mark` (`written` as it was at some moment)."""
        while self.written <= mark:
            if self._grew is None:
                self._grew = anyio.Event()
            await self._grew.wait()

    def lines(self) -> list[str]:
        """The kept lines, with an unfinished last line as one."""
        if not self._partial.strip():
            return list(self._lines)
        return [*self._lines, self._partial.decode("utf-8", "replace").strip()[:TAIL_LINE_CHARS]][-TAIL_LINES:]


@dataclass
class StdioProcess:
    """What the supervisor can see of a running stdio downstream."""

    command: str
    args: list[str]
    env: dict[str, str]
    cwd: str | None
    closed: anyio.Event = field(default_factory=anyio.Event)
    pid: int | None = None
    spool: SpoolPolicy | None = None
    """Where long messages go; None keeps every message whole in memory (a plain pass-through)."""
    mid_message: bool = False
    on_log: Callable[[types.LoggingMessageNotificationParams], Awaitable[None]] | None = None
    """Where the server's log messages go while a raw request waits (in order with its response)."""
    raw: RawChannel | None = None
    """Requests written as bytes by the fast path (`server.downstream.tool_call`); set while connected."""
    stderr: StderrTail = field(default_factory=StderrTail)
    returncode: int | None = None
    hung_up: bool = False
    """The child's stdout ended, or its stdin broke (it went away, mostly)."""
    ended_itself: bool = False
    """The child closed its stdout (exited, mostly) before claimcheck began to stop it."""

    @property
    def command_line(self) -> str:
        return clip(shlex.join([self.command, *self.args]), 200)

    def why_down(self, fallback: str) -> str:
        """Why this process is gone: its command, exit status and last stderr lines, when it ended by itself;
        else `fallback` (claimcheck stopped it) with its last stderr lines."""
        if self.ended_itself and self.returncode is not None:
            if self.returncode < 0:
                reason = f"`{self.command_line}` was killed by signal {-self.returncode}"
            else:
                reason = f"`{self.command_line}` exited with status {self.returncode}"
        elif self.ended_itself:
            reason = f"`{self.command_line}` closed its stdout"
        else:
            reason = fallback
        tail = self.stderr.lines()
        if not tail:
            return reason + ("; it wrote nothing on stderr" if self.ended_itself else "")
        return f"{reason}; its stderr ends: " + " | ".join(tail)

    @asynccontextmanager
    async def connect(
        self,
    ) -> AsyncIterator[
        tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]
    ]:
        async with stdio_transport(self) as streams:
            yield streams


@asynccontextmanager
async def stdio_transport(
    spec: StdioProcess,
) -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]
]:
    """Spawn `spec` in its own process group and exchange newline-delimited JSON-RPC with it."""
    spawned = HEAD_START.take(spec.command, spec.args, spec.env, spec.cwd) or await spawn(
        spec.command, spec.args, spec.env, spec.cwd
    )
    process, stdout = spawned.process, spawned.stdout
    spec.pid = process.pid
    raw = RawChannel(spec.on_log)
    stderr_done = anyio.Event()
    to_session, from_child = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_child, from_session = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_stdout() -> None:
        spooler: MessageSpool | None = None
        try:
            async with to_session:
                if spec.spool is None:
                    splitter = LineSplitter()
                    async for chunk in stdout:
                        for line in splitter.feed(chunk):
                            await to_session.send(_read(line))
                    spec.hung_up = True
                    return
                framer = Framer(spec.spool.threshold)
                while True:
                    chunk = await stdout.receive(_READ_BYTES)
                    for frame in framer.feed(chunk):
                        if isinstance(frame, bytes):
                            if not (raw.waiting and await raw.take_line(frame)):
                                message = parse_line(frame, "downstream")
                                answer = unreadable_answer(frame, message) if isinstance(message, Exception) else None
                                if answer is not None and raw.waiting and await raw.take_line(answer):
                                    continue  # a raw request's answer that could not be read: it fails now
                                await to_session.send(message if answer is None else parse_line(answer, "downstream"))
                            continue
                        spooler = await _long_line(spec, spooler, frame, to_session, raw)
        except anyio.EndOfStream:
            spec.hung_up = True
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            raw.close()
            spec.closed.set()
            if spooler is not None:
                with anyio.CancelScope(shield=True):
                    await spooler.abort()

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for message in from_session:
                    await process.stdin.send(encode(message))  # one whole line per write: never interleaved
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            spec.hung_up = True
            raw.close()
            await to_session.aclose()
            spec.closed.set()

    def send_raw_nowait(data: bytes) -> bool:
        """Write `data` now, when the child's stdin transport takes it without waiting; False: it cannot."""
        assert process.stdin is not None
        writer = stream_writer_of(process.stdin)
        if writer is None or writer.is_closing():
            return False
        if writer.transport.get_write_buffer_size() > _RAW_BUFFERED:
            return False
        writer.write(data)  # the transport queues what the pipe does not take yet, in order, without a checkpoint
        return True

    async def send_raw(data: bytes) -> None:
        assert process.stdin is not None
        if not send_raw_nowait(data):
            await process.stdin.send(data)  # waits for the pipe, or says why it is broken

    raw.send = send_raw
    raw.send_nowait = send_raw_nowait

    async def read_stderr() -> None:
        assert process.stderr is not None
        try:
            async for chunk in process.stderr:
                spec.stderr.feed(chunk)
                await anyio.to_thread.run_sync(_pass_on, chunk)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass
        finally:
            stderr_done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_stdout)
        tg.start_soon(write_stdin)
        tg.start_soon(read_stderr)
        spec.raw = raw if spec.spool is not None else None  # a plain pass-through keeps the SDK's path
        try:
            yield from_child, to_child
        finally:
            spec.raw = None
            raw.close()
            with anyio.CancelScope(shield=True):
                spec.ended_itself = spec.hung_up
                await stop(spawned, stderr_done, drain_s=_STDERR_DRAIN_S)
                spec.returncode = process.returncode
                spec.closed.set()
            tg.cancel_scope.cancel()


def _pass_on(chunk: bytes) -> None:
    """A child's stderr goes where claimcheck's goes (in a thread: nobody may be reading ours)."""
    try:
        sys.stderr.flush()
        os.write(2, chunk)
    except (OSError, ValueError):
        pass


async def _long_line(
    spec: StdioProcess,
    spooler: MessageSpool | None,
    frame: LongLine,
    to_session: MemoryObjectSendStream[SessionMessage | Exception],
    raw: RawChannel,
) -> MessageSpool | None:
    """Feed one part of a long line to its spool; at its end, hand the session what the spool made of it."""
    assert spec.spool is not None
    if frame.kind == "first":
        spooler = MessageSpool(spec.spool, "downstream")
        spec.mid_message = True
    assert spooler is not None
    if frame.kind != "end":
        await spooler.feed(frame.data)
        if raw.follows:
            raw.take_growing(spooler)
        return spooler
    spec.mid_message = False
    message = await spooler.finish()
    if isinstance(message, bytes):
        if not (raw.waiting and await raw.take_line(message)):
            await to_session.send(parse_line(message, "downstream"))
    elif message is not None and not (raw.waiting and raw.take_message(message)):
        await to_session.send(message)
    return None


def _read(line: bytes) -> SessionMessage | Exception:
    """A line from the server as the session reads it; an answer it cannot read becomes an error answer."""
    message = parse_line(line, "downstream")
    if isinstance(message, Exception) and (answer := unreadable_answer(line, message)) is not None:
        return parse_line(answer, "downstream")
    return message
