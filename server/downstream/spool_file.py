"""One file of a spooled message, written by a thread of its own while the message is still being read.

The event loop's side (`add`, `flush`) only gathers the bytes into batches of about 1 MiB and hands each to
the file's writer thread, which writes it and feeds the line index, so the disk works while the next piece of
the message is decoded. At most `IN_FLIGHT` batches wait for the thread: past that, `flush` waits for it, so
memory stays bounded when the disk is slower than the pipe. The file stops growing, and says why, when the disk
cannot take more. A reader may follow the file as it grows (`SpoolFile.on_written`).

No digest is taken on the way: hashing a gigabyte costs half a second of CPU that the two cores of a small
machine need for the pipe, and only extraction asks for it (`SessionStore.sha256`, once, from the file).
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path

import anyio

from fs_sandbox import INDEX_SUFFIX, IndexBuilder
from server.platform import NOFOLLOW, write_vector

__all__ = ["FLUSH_BYTES", "IN_FLIGHT", "SpoolFile", "private_opener"]

FLUSH_BYTES = 1 << 20
IN_FLIGHT = 2
"""Batches handed to the writer thread and not written yet, at most."""
_DISK_RESERVE = 16 << 20  # stop writing before the disk is full to the last block

_Batch = tuple[list[bytes], list[int | None]]  # pieces, and the characters each holds when known
_WRITEV_PIECES = 64  # more (a structured output comes in many small pieces) are joined first


class SpoolFile:
    """A file written in batches by its own thread (see the module's doc), up to `limit` bytes; what comes past
    the limit is counted (`produced`) and dropped. `written`, `lines` and `failure` are final once `close`
    returned."""

    def __init__(self, path: Path, limit: int, *, indexed: bool = True) -> None:
        self.path = path
        self.limit = limit  # bytes kept at most; the rest is counted only
        self.written = 0
        self.produced = 0
        self.failure: str | None = None
        self._accepted = 0  # bytes given to be written (at most `limit`)
        self._counting_only = False
        self._pending: list[bytes] = []
        self._pending_chars: list[int | None] = []
        self._pending_bytes = 0
        self._worker: _Worker | None = None
        self._index = IndexBuilder() if indexed else None
        self._last = b""
        self.on_written: Callable[[int], None] | None = None
        """Told, from the writer thread, how many bytes are on disk after each batch (a reader that follows)."""

    @property
    def room(self) -> int:
        """Bytes it still keeps of what is added (0 once the limit is reached)."""
        return max(self.limit - self._accepted, 0)

    @property
    def accepted(self) -> int:
        """Bytes it keeps of what was added so far (on disk, or to be written)."""
        return self._accepted

    def count_only(self) -> None:
        """From now on what is added is counted (`produced`, `accepted`, `room`), not written: the file keeps what
        it was given so far (written by the next `flush`)."""
        self._counting_only = True

    def add(self, data: bytes, chars: int | None = None) -> None:
        """Bytes to write (with how many characters they hold, when the caller knows), gathered until `flush`."""
        self.produced += len(data)
        room = self.limit - self._accepted
        if room <= 0:
            return
        if self._counting_only:
            self._accepted += min(len(data), room)
            return
        if len(data) > room:
            data, chars = data[:room], None  # perhaps cut inside a character: counted by the index
        self._pending.append(data)
        self._pending_chars.append(chars)
        self._pending_bytes += len(data)
        self._accepted += len(data)

    async def flush(self, *, force: bool = False) -> None:
        """Hand the gathered bytes to the writer thread once they make a batch (any amount with `force`); waits
        only while `IN_FLIGHT` batches are still being written."""
        if not self._pending or (self._pending_bytes < FLUSH_BYTES and not force and not self._counting_only):
            return
        batch = (self._pending, self._pending_chars)
        if len(self._pending) > _WRITEV_PIECES:
            batch = ([b"".join(self._pending)], [None])
        self._pending, self._pending_chars = [], []
        self._pending_bytes = 0
        if self.failure is not None:
            return
        if self._worker is None:
            self._worker = _Worker(self._write, f"spool writer {self.path.name}")
        await self._worker.put(batch)

    async def close(self) -> None:
        """Write what is left, and wait for the thread to finish; the file's figures are then final."""
        await self.flush(force=True)
        worker, self._worker = self._worker, None
        if worker is not None:
            await worker.put(None)
            await anyio.to_thread.run_sync(worker.thread.join)

    def _write(self, batches: Callable[[], _Batch | None]) -> None:
        """The writer thread: batches to the file and the line index, until None."""
        fd: int | None = None
        try:
            while (item := batches()) is not None:
                if self.failure is not None:
                    continue  # drained, not written
                pieces, chars = item
                try:
                    if fd is None:
                        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | NOFOLLOW, 0o600)
                    free = _free_bytes(self.path.parent)
                    size = sum(map(len, pieces))
                    if free is not None and free < size + _DISK_RESERVE:
                        raise OSError(28, _no_room(free, size))
                    _write_all(fd, pieces, size)
                except OSError as exc:
                    self.failure = f"{exc.strerror or exc} ({self.written} bytes were written)"
                    continue
                for piece, piece_chars in zip(pieces, chars, strict=True):
                    self._counted(piece, piece_chars)
                if self.on_written is not None:
                    self.on_written(self.written)
        finally:
            if fd is not None:
                try:
                    os.close(fd)
                except OSError as exc:
                    self.failure = self.failure or f"{exc.strerror or exc}"

    def append_now(self, data: bytes) -> None:
        """Append a few bytes after `close` (the cut marker), past the limit."""
        try:
            with open(self.path, "ab", opener=private_opener) as out:
                out.write(data)
        except OSError as exc:
            self.failure = f"{exc.strerror or exc}"
            return
        self._counted(data, None)

    def _counted(self, data: bytes, chars: int | None) -> None:
        if self._index is not None:
            self._index.feed(data, chars)
        if data:
            self._last = data[-1:]
        self.written += len(data)

    def write_index(self) -> None:
        """Keep the line index of what was written beside the file (`<name>.lines`; a few bytes per MiB)."""
        if self._index is None:
            return
        try:
            with open(self.path.with_name(self.path.name + INDEX_SUFFIX), "wb", opener=private_opener) as out:
                out.write(self._index.finish())
        except OSError:
            pass  # readers scan from the start instead

    def remove(self) -> None:
        for path in (self.path, self.path.with_name(self.path.name + INDEX_SUFFIX)):
            try:
                path.unlink(missing_ok=True)
            except OSError:
                pass

    @property
    def lines(self) -> int:
        """Lines written as the store counts them (LF ends one; an unfinished last line counts); 0 without an
        index."""
        if self._index is None:
            return 0
        return self._index.newlines + (1 if self.written and self._last != b"\n" else 0)


class _Worker:
    """A thread that runs `work` on the batches put to it (at most `IN_FLIGHT` waiting), until None."""

    def __init__(self, work: Callable[[Callable[[], _Batch | None]], None], name: str) -> None:
        self._queue: queue.Queue[_Batch | None] = queue.Queue(IN_FLIGHT)
        self.thread = threading.Thread(target=work, args=(self._queue.get,), name=name, daemon=True)
        self.thread.start()

    async def put(self, item: _Batch | None) -> None:
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            await anyio.to_thread.run_sync(self._queue.put, item)


def _write_all(fd: int, pieces: list[bytes], size: int) -> None:
    """Write every piece, in one call when the file takes them all (no join)."""
    written = write_vector(fd, pieces)
    if written == size:
        return
    view = memoryview(b"".join(pieces))[written:]
    while view:
        view = view[os.write(fd, view) :]


def _no_room(free: int, size: int) -> str:
    """Why a piece was not written: the disk's free space, the reserve claimcheck leaves, the piece."""
    mib = 1 << 20
    return (
        f"the disk has {free / mib:.1f} MiB free and claimcheck leaves the last {_DISK_RESERVE // mib} MiB of it to "
        f"everything else, so the next {size / mib:.1f} MiB did not fit; free some space"
    )


def _free_bytes(directory: Path) -> int | None:
    try:
        info = os.statvfs(directory)
    except OSError:
        return None
    return info.f_bavail * info.f_frsize


def private_opener(path: str, flags: int) -> int:
    return os.open(path, flags | NOFOLLOW, 0o600)
