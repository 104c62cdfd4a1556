"""A sandbox bound to one root: Read in a thread, Grep in killable worker processes taken in fair turns.

Both read the file in pieces (`fs_sandbox._lines`, `fs_sandbox._scan`), so memory does not grow with its
size, and both take the file from the one door, `open_file`: a name under the root, or a file a caller
already opened there.
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import re
import struct
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import anyio
import anyio.abc
from anyio.abc import UNIXSocketStream
from anyio.streams.buffered import BufferedByteReceiveStream

from fs_sandbox import _engine, _lines, _scan
from fs_sandbox._fair import FairQueue
from fs_sandbox.errors import NotAFile, PatternError, PatternTimeout, SandboxError
from fs_sandbox.paths import OpenFile, keep_index, open_file
from fs_sandbox.platform import worker_pair

__all__ = ["GrepLine", "GrepResult", "ReadResult", "Sandbox", "Snippet"]

_WORKER = Path(_scan.__file__).resolve().with_name("_worker.py")
_RE2_SPEC = importlib.util.find_spec("re2")
_RE2_HOME = [str(Path(_RE2_SPEC.origin).parent.parent)] if _RE2_SPEC and _RE2_SPEC.origin else []
GUARD_BYTES_PER_S = 20e6  # the slowest RE2 goes (its NFA, when a pattern's DFA outgrows its memory)
MAX_LINE_CHARS = 2000
INDEX_FROM_BYTES = 1 << 20  # a file read or searched without a line index gets one kept beside it from this size


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Numbered lines of one file and how many it has.

    A line longer than `max_line_chars` is cut there; `lengths` holds each shown line's full length in
    characters. `omitted` lines of the range asked for were left out because they passed `max_chars`.
    """

    lines: tuple[tuple[int, str], ...]
    total_lines: int
    lengths: tuple[int, ...] = ()
    omitted: int = 0


@dataclass(frozen=True, slots=True)
class Snippet:
    """The text around one match on a long line; `column` is the match's offset in the line, in characters."""

    column: int
    text: str
    cut_before: bool  # the line goes on before `text`
    cut_after: bool  # and after it


@dataclass(frozen=True, slots=True)
class GrepLine:
    number: int
    text: str  # cut at `max_line_chars`
    is_match: bool
    length: int  # the whole line's length in characters
    snippets: tuple[Snippet, ...] = ()  # a match line longer than `max_line_chars`: the text around each match
    more_in_line: bool = False  # it has more matches than snippets


@dataclass(frozen=True, slots=True)
class GrepResult:
    """Blocks of matching lines with their context; `more` when matches past `max_matches` exist.

    Lines past `max_chars` are left out: `omitted_lines` of them, of which `omitted_blocks` whole blocks.
    """

    blocks: tuple[tuple[GrepLine, ...], ...]
    matches: int
    more: bool
    omitted_lines: int = 0
    omitted_blocks: int = 0


class _Worker:
    def __init__(self, process: anyio.abc.Process, channel: UNIXSocketStream) -> None:
        self.process = process
        self.channel = channel
        self.replies = BufferedByteReceiveStream(channel)
        self.killed = False

    async def ask(self, fd: int, request: tuple[object, ...]) -> tuple[object, ...]:
        data = pickle.dumps(request, pickle.HIGHEST_PROTOCOL)
        await self.channel.send_fds(struct.pack("<Q", len(data)) + data, [fd])
        (length,) = struct.unpack("<Q", await self.replies.receive_exactly(8))
        reply = pickle.loads(await self.replies.receive_exactly(length))
        assert isinstance(reply, tuple)
        return reply

    async def kill(self) -> None:
        if self.killed:
            return
        self.killed = True
        if self.process.returncode is None:
            self.process.kill()
        with anyio.CancelScope(shield=True):
            await self.channel.aclose()
            await self.process.aclose()


class Sandbox:
    """Read and Grep over the regular files under `root`, and nothing else.

    Greps run in `workers` processes (default: one per core, at least 2), each stopped after `timeout`
    seconds. They are queued per `owner` and served in turn, at most `per_owner` in flight per owner and at most
    `workers_per_owner` of them running (default: all workers but one, at least one); `setting` is the name a
    refusal gives the limit.
    """

    def __init__(
        self,
        root: Path,
        *,
        timeout: float = 2.0,
        workers: int | None = None,
        per_owner: int = 20,
        workers_per_owner: int | None = None,
        setting: str = "per_owner",
    ) -> None:
        self.root = root
        self.timeout = timeout
        self._slots = workers or max(2, os.cpu_count() or 2)
        running = workers_per_owner or max(1, self._slots - 1)
        self._queue = FairQueue(self._slots, per_owner, running_per_owner=running, setting=setting)
        self._idle: list[_Worker] = []
        self._live = 0  # worker processes, idle or busy
        self._closed = False

    def in_flight(self, owner: str = "") -> int:
        """How many greps of `owner` are queued or running."""
        return self._queue.in_flight(owner)

    async def read(
        self,
        file: str | OpenFile,
        *,
        start: int = 0,
        lines: int = 200,
        from_end: bool = False,
        max_line_chars: int = MAX_LINE_CHARS,
        max_chars: int | None = None,
    ) -> ReadResult:
        """`lines` numbered lines from line `start` (0-based), counted from the end when `from_end`."""
        if start < 0 or lines < 0:
            raise SandboxError("start and lines must not be negative")
        async with self._opened(file) as opened:

            def blocking() -> ReadResult:
                if opened.index is None and opened.size >= INDEX_FROM_BYTES:
                    keep_index(opened)  # one pass, instead of the count from the start every Read would make
                shown, total, omitted = _lines.read_lines(
                    opened.fd,
                    opened.size,
                    start,
                    lines,
                    from_end,
                    clip=max_line_chars,
                    max_chars=max_chars,
                    index=opened.index,
                )
                numbered = tuple((number, text) for number, text, _ in shown)
                return ReadResult(numbered, total, tuple(length for _, _, length in shown), omitted)

            return await anyio.to_thread.run_sync(blocking)

    async def grep(
        self,
        file: str | OpenFile,
        pattern: str,
        *,
        before: int = 3,
        after: int = 3,
        case_sensitive: bool = False,
        max_matches: int = 50,
        owner: str = "",
        max_line_chars: int = MAX_LINE_CHARS,
        max_chars: int | None = None,
    ) -> GrepResult:
        """Lines matching `pattern`, searched in a worker process that is killed after `timeout` seconds.

        `Busy` at once when `owner` already has `per_owner` greps in flight.
        """
        if before < 0 or after < 0 or max_matches < 1:
            raise SandboxError("before and after must not be negative, and max_matches must be at least 1")
        try:
            plan = _engine.check(pattern, case_sensitive)
        except (re.error, ValueError) as exc:
            why = f"invalid regular expression: {exc}" if isinstance(exc, re.error) else str(exc)
            raise PatternError(why) from None
        with self._queue.admitted(owner):
            async with self._opened(file) as opened:
                if opened.index is None and opened.size >= INDEX_FROM_BYTES:  # then numbered from it, and mapped
                    await anyio.to_thread.run_sync(keep_index, opened)
                async with self._queue.turn(owner):
                    request = (
                        opened.size,
                        pattern,
                        case_sensitive,
                        before,
                        after,
                        max_matches,
                        max_line_chars,
                        max_chars,
                        opened.index,
                    )
                    reply = await self._ask(opened.fd, request, pattern, plan, opened.size)
        if reply[0] == "error":
            kind, message = reply[1], str(reply[2])
            raise PatternError(message) if kind == "pattern" else NotAFile(message)
        blocks, matches, more, left_lines, left_blocks = cast(
            tuple[list[list[_scan.Line]], int, bool, int, int], reply[1]
        )
        return GrepResult(
            tuple(
                tuple(
                    GrepLine(n, text, hit, length, tuple(Snippet(*s) for s in around), more)
                    for n, text, hit, length, around, more in block
                )
                for block in blocks
            ),
            int(matches),
            bool(more),
            int(left_lines),
            int(left_blocks),
        )

    async def aclose(self) -> None:
        """Stop the idle workers."""
        self._closed = True
        while self._idle:
            await self._kill(self._idle.pop())

    @asynccontextmanager
    async def _opened(self, file: str | OpenFile) -> AsyncIterator[OpenFile]:
        """`file` itself, or the file it names under the root, opened through the door and closed afterwards."""
        if isinstance(file, OpenFile):
            yield file
            return
        opened = await anyio.to_thread.run_sync(open_file, self.root, file)
        try:
            yield opened
        finally:
            opened.close()

    def time_limit(self, plan: _engine.Plan, size: int) -> float:
        """How long a search may run: RE2 runs in time linear in the size, so its guard grows with the file
        (`timeout` plus a second per `GUARD_BYTES_PER_S`); a backtracking pattern keeps the fixed `timeout`."""
        return self.timeout if plan.backtracking else self.timeout + size / GUARD_BYTES_PER_S

    async def _ask(
        self, fd: int, request: tuple[object, ...], pattern: str, plan: _engine.Plan, size: int
    ) -> tuple[object, ...]:
        worker = self._idle.pop() if self._idle else await self._spawn()
        limit = self.time_limit(plan, size)
        try:
            with anyio.fail_after(limit):
                reply = await self._asking(worker, fd, request, limit / 2)
        except TimeoutError:
            await self._kill(worker)
            if plan.backtracking:
                why = (
                    f"it uses {plan.construct}, which only the backtracking engine runs, and that engine is "
                    f"stopped after {limit:g} s; drop that construct (nested repetition such as (a+)+ "
                    "backtracks without end)"
                )
            else:
                why = f"it took longer than {limit:.3g} s for {size} bytes and was stopped"
            shown = repr(pattern[:80]) + ("…" if len(pattern) > 80 else "")
            raise PatternTimeout(f"the search for {shown} was stopped: {why}") from None
        except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError, OSError) as exc:
            await self._kill(worker)
            raise SandboxError(f"the search worker stopped unexpectedly ({type(exc).__name__})") from None
        except BaseException:
            await self._kill(worker)
            raise
        self._idle.append(worker)
        return reply

    async def _asking(
        self, worker: _Worker, fd: int, request: tuple[object, ...], spare_after: float
    ) -> tuple[object, ...]:
        """`worker.ask`, starting a spare worker meanwhile if it takes longer than `spare_after` (half its limit)."""
        reply: tuple[object, ...] = ()
        error: Exception | None = None
        async with anyio.create_task_group() as tg:

            async def ask() -> None:
                nonlocal reply, error
                try:
                    reply = await worker.ask(fd, request)
                except Exception as exc:  # raised below as itself, not inside the task group's exception group
                    error = exc
                finally:
                    tg.cancel_scope.cancel()  # the spare is not needed

            tg.start_soon(ask)
            tg.start_soon(self._spare_after, spare_after)
        if error is not None:
            raise error
        return reply

    async def _spare_after(self, delay: float) -> None:
        """A search still running after `delay` may well be killed at its timeout: start one spare worker now, so
        that the search whose turn comes then (another session's, often) does not wait for a process to start."""
        await anyio.sleep(delay)
        if self._idle or self._live > self._slots or self._closed:
            return
        with anyio.CancelScope(shield=True):  # a process half started would be lost
            spare = await self._spawn()
        if self._closed:
            await self._kill(spare)
        else:
            self._idle.append(spare)

    async def _kill(self, worker: _Worker) -> None:
        if not worker.killed:
            self._live -= 1
        await worker.kill()

    async def _spawn(self) -> _Worker:
        self._live += 1  # counted from the start: two spares are never started at once
        try:
            return await self._start_worker()
        except BaseException:
            self._live -= 1
            raise

    async def _start_worker(self) -> _Worker:
        ours, theirs = worker_pair()
        try:
            process = await anyio.open_process(
                [sys.executable, "-I", "-S", str(_WORKER), str(theirs.fileno()), *_RE2_HOME],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=[theirs.fileno()],
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        return _Worker(process, await UNIXSocketStream.from_socket(ours))
