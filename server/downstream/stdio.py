"""A stdio client transport that reads in linear time, in bounded memory, and reports when the child's stdout ends.

mcp 2.3.0's `stdio_client` re-splits its whole buffer on every 64 KiB chunk (quadratic in the size of
one message) and holds every message whole; this one frames with `Framer`, and a message longer than the
spool threshold goes to disk through `MessageSpool` as it arrives (the session gets a small stand-in).
`closed` is set when the child goes away, which is how the downstream supervisor notices a crash without
waiting for a call; `mid_message` says that the child is in the middle of a long message.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

from server.downstream.spool import MessageSpool, SpoolPolicy
from server.framing import Framer, LineSplitter, LongLine, encode, parse_line

__all__ = ["StdioProcess", "stdio_transport"]

logger = logging.getLogger(__name__)

_READ_BYTES = 1 << 20
_EXIT_GRACE_S = (1.0, 0.5)
"""Waits after closing stdin, then after SIGTERM, before SIGKILL. Together under the 2 s that MCP
clients give claimcheck itself after closing its stdin, so no downstream outlives a killed claimcheck."""


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
    process = await anyio.open_process(
        [spec.command, *spec.args],
        env=get_default_environment() | spec.env,
        cwd=spec.cwd,
        stderr=None,  # the child's stderr goes where ours goes
        start_new_session=True,
    )
    spec.pid = process.pid
    to_session, from_child = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    to_child, from_session = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_stdout() -> None:
        assert process.stdout is not None
        spooler: MessageSpool | None = None
        try:
            async with to_session:
                if spec.spool is None:
                    splitter = LineSplitter()
                    async for chunk in process.stdout:
                        for line in splitter.feed(chunk):
                            await to_session.send(parse_line(line, "downstream"))
                    return
                framer = Framer(spec.spool.threshold)
                while True:
                    chunk = await process.stdout.receive(_READ_BYTES)
                    for frame in framer.feed(chunk):
                        if isinstance(frame, bytes):
                            await to_session.send(parse_line(frame, "downstream"))
                            continue
                        spooler = await _long_line(spec, spooler, frame, to_session)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass
        finally:
            spec.closed.set()
            if spooler is not None:
                with anyio.CancelScope(shield=True):
                    await spooler.abort()

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with from_session:
                async for message in from_session:
                    await process.stdin.send(encode(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await to_session.aclose()
            spec.closed.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_stdout)
        tg.start_soon(write_stdin)
        try:
            yield from_child, to_child
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process)
                spec.closed.set()
            tg.cancel_scope.cancel()


async def _long_line(
    spec: StdioProcess,
    spooler: MessageSpool | None,
    frame: LongLine,
    to_session: MemoryObjectSendStream[SessionMessage | Exception],
) -> MessageSpool | None:
    """Feed one part of a long line to its spool; at its end, hand the session what the spool made of it."""
    assert spec.spool is not None
    if frame.kind == "first":
        spooler = MessageSpool(spec.spool, "downstream")
        spec.mid_message = True
    assert spooler is not None
    if frame.kind != "end":
        await spooler.feed(frame.data)
        return spooler
    spec.mid_message = False
    message = await spooler.finish()
    if isinstance(message, bytes):
        await to_session.send(parse_line(message, "downstream"))
    elif message is not None:
        await to_session.send(message)
    return None


async def _stop(process: anyio.abc.Process) -> None:
    """Close stdin, give the child a grace period, then SIGTERM and SIGKILL its process group."""
    if process.stdin is not None:
        try:
            await process.stdin.aclose()
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass
    for sig, grace in ((None, _EXIT_GRACE_S[0]), (signal.SIGTERM, _EXIT_GRACE_S[1]), (signal.SIGKILL, 2.0)):
        if sig is not None:
            try:
                os.killpg(process.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        with anyio.move_on_after(grace):
            await process.wait()
            break
    try:  # grandchildren a wrapper such as npx left behind
        os.killpg(process.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        pass
    for stream in (process.stdout, process.stderr):
        if stream is not None:
            await stream.aclose()
