"""Whole lines to a non-blocking descriptor (claimcheck's stdout, or a relay's socket), in the order given.

A line is written at once when nothing waits before it; what the pipe does not take yet is written from an
event-loop writer callback (asyncio's, which is what anyio runs on here), without a lock or a task. One line
can also be given in pieces (`LineWriter.write_pieces`: a pass-through's output streamed from its file): while
it is written, every other line waits behind it, and each piece waits until the one before it was taken, so the
backlog holds at most one piece besides the lines that wait.
"""

from __future__ import annotations

import asyncio
import errno
import os
from collections import deque
from collections.abc import AsyncIterator, Callable

__all__ = ["BACKLOG_HIGH", "BACKLOG_LOW", "OWED_HIGH", "OWED_LOW", "LineWriter"]

BACKLOG_HIGH, BACKLOG_LOW = 4 << 20, 1 << 20
"""Bytes of answers waiting for stdout beyond which stdin is not read, and below which it is again."""
OWED_HIGH, OWED_LOW = 256, 128
"""Requests read and not answered yet beyond which stdin is not read, and below which it is again (each holds
its arguments and a call's state: 30-50 KB with 9 KB of arguments). Every request is answered in bounded time
without more being read (the time rule hands a slow call out), so a stop cannot last."""


class LineWriter:
    """Whole lines to a non-blocking descriptor, in the order they were given (see the module's doc)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._pending: deque[memoryview] = deque()
        self._held: deque[memoryview | asyncio.Future[None]] = deque()
        """Behind the line being written in pieces: lines given meanwhile, and other such lines' turns."""
        self._streaming = False
        self._taken: asyncio.Future[None] | None = None  # the streamed line waits for its last piece to go
        self._drained: list[asyncio.Future[None]] = []
        self.backlog = 0
        """Bytes given but not written yet."""
        self.owed = 0
        """Requests read whose answers are not written yet (`owe`, `paid`)."""
        self.on_drained: Callable[[], None] | None = None
        """Called when the backlog and the answers owed fall below their low-water marks (the reader may go on)."""
        self.gone = False
        """The reader went away (EPIPE): every later line is dropped."""

    def write_nowait(self, data: bytes) -> bool:
        """Write `data` now, or queue it behind what waits; False once the reader has gone away."""
        if self.gone:
            return False
        if self._streaming:
            self._held.append(memoryview(data))
            self.backlog += len(data)
            return True
        return self._put(memoryview(data))

    async def write(self, data: bytes) -> bool:
        """Write one whole line and wait until the descriptor took it; False once the client has gone away."""
        if not self.write_nowait(data):
            return False
        if self._pending or self._streaming:
            done = asyncio.get_running_loop().create_future()
            self._drained.append(done)
            await done
        return not self.gone

    async def write_pieces(self, pieces: AsyncIterator[bytes]) -> bool:
        """Write one line given in pieces, the last ending with its newline: after the lines given before, and
        before any given while it is written (another line in pieces waits its turn). A piece is made while the
        one before it drains, and given only once that one was taken. If `pieces` stops short (cancelled, or
        failed), the line is ended with a newline where it stopped, so the lines after it stay whole. False
        once the reader has gone away."""
        if self.gone:
            return False
        if self._streaming:
            await self._turn()
        self._streaming = True
        ended = False
        try:
            if self.gone:  # the reader went away while this waited its turn
                return False
            async for piece in pieces:
                await self._piece_taken()
                if self.gone or not self._put(memoryview(piece)):
                    return False
                ended = piece.endswith(b"\n")
            await self._piece_taken()
            return not self.gone
        finally:
            if not ended and not self.gone:
                self._put(memoryview(b"\n"))
            self._streaming = False
            self._release()

    async def _turn(self) -> None:
        """Wait behind the line being written in pieces (and whatever was given before this one)."""
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._held.append(turn)
        try:
            await turn
        except BaseException:
            if turn.done() and not turn.cancelled():  # given the turn as this was cancelled: pass it on
                self._streaming = False
                self._release()
            raise

    async def _piece_taken(self) -> None:
        if self._pending and not self.gone:
            self._taken = asyncio.get_running_loop().create_future()
            try:
                await self._taken
            finally:
                self._taken = None

    def _release(self) -> None:
        """Write what waited behind a line in pieces, up to the next such line's turn."""
        held = self._held
        while held:
            item = held.popleft()
            if isinstance(item, asyncio.Future):
                if not item.done():
                    self._streaming = True
                    item.set_result(None)
                    return
                continue  # a turn whose waiter was cancelled
            self.backlog -= len(item)
            if not self._put(item):
                return
        if not self._pending:
            self._wake()

    def _put(self, view: memoryview) -> bool:
        if self._pending:
            self._pending.append(view)
            self.backlog += len(view)
            return True
        try:
            written = os.write(self._fd, view)
        except BlockingIOError:
            written = 0
        except OSError as exc:
            return self._failed(exc)
        if written < len(view):
            self._pending.append(view[written:])
            self.backlog += len(view) - written
            asyncio.get_running_loop().add_writer(self._fd, self._flush)
        return True

    def _flush(self) -> None:
        was = self.backlog
        try:
            while self._pending:
                view = self._pending[0]
                try:
                    written = os.write(self._fd, view)
                except BlockingIOError:
                    return
                except OSError as exc:
                    self._failed(exc)  # drops what waits, stops writing and wakes the writers
                    return
                self.backlog -= written
                if written < len(view):
                    self._pending[0] = view[written:]
                    return
                self._pending.popleft()
            asyncio.get_running_loop().remove_writer(self._fd)
            self._wake()
        finally:
            if self.backlog < was:
                self._eased()

    def full(self) -> bool:
        """Whether the reader of requests should stop: too many answers wait, or are owed."""
        return self.backlog >= BACKLOG_HIGH or self.owed >= OWED_HIGH

    def owe(self) -> None:
        """A request was read: its answer is owed."""
        self.owed += 1

    def paid(self) -> None:
        """A request was answered (or cancelled, so never will be)."""
        self.owed -= 1
        self._eased()

    def _eased(self) -> None:
        if self.on_drained is not None and self.backlog < BACKLOG_LOW and self.owed < OWED_LOW:
            self.on_drained()

    def _failed(self, exc: OSError) -> bool:
        if exc.errno not in (errno.EPIPE, errno.ECONNRESET):
            raise exc
        self.gone = True
        self.backlog = 0
        if self._pending:
            self._pending.clear()
            asyncio.get_running_loop().remove_writer(self._fd)
        held, self._held = self._held, deque()
        for item in held:  # lines in pieces that wait their turn hear that the reader has gone
            if isinstance(item, asyncio.Future) and not item.done():
                item.set_result(None)
        self._wake()
        self._eased()  # nothing more will be written: reading goes on, to the end of stdin
        return False

    def _wake(self) -> None:
        """Nothing is pending: the line in pieces may give its next piece; once no such line is being written
        either, every `write` waiting is done."""
        if self._taken is not None and not self._taken.done():
            self._taken.set_result(None)
        if self._streaming and not self.gone:
            return
        drained, self._drained = self._drained, []
        for done in drained:
            if not done.done():
                done.set_result(None)
