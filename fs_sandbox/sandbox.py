"""A sandbox bound to one root: confined reads in a thread, confined greps in killable worker processes."""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from fs_sandbox import _scan
from fs_sandbox.errors import NotAFile, PatternError, PatternTimeout, SandboxError
from fs_sandbox.paths import confine, open_regular

__all__ = ["GrepLine", "GrepResult", "ReadResult", "Sandbox"]

_WORKER = Path(_scan.__file__).resolve()


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Numbered lines of one file and how many it has."""

    lines: tuple[tuple[int, str], ...]
    total_lines: int


@dataclass(frozen=True, slots=True)
class GrepLine:
    number: int
    text: str
    is_match: bool


@dataclass(frozen=True, slots=True)
class GrepResult:
    """Blocks of matching lines with their context; `more` when matches past `max_matches` exist."""

    blocks: tuple[tuple[GrepLine, ...], ...]
    matches: int
    more: bool


class _Worker:
    def __init__(self, process: anyio.abc.Process) -> None:
        assert process.stdin is not None and process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.stdout = BufferedByteReceiveStream(process.stdout)

    async def ask(self, request: tuple[object, ...]) -> tuple[object, ...]:
        data = pickle.dumps(request, pickle.HIGHEST_PROTOCOL)
        await self.stdin.send(struct.pack("<Q", len(data)) + data)
        (length,) = struct.unpack("<Q", await self.stdout.receive_exactly(8))
        reply = pickle.loads(await self.stdout.receive_exactly(length))
        assert isinstance(reply, tuple)
        return reply

    async def kill(self) -> None:
        if self.process.returncode is None:
            self.process.kill()
        with anyio.CancelScope(shield=True):
            await self.process.aclose()


class Sandbox:
    """Read and Grep over the regular files under `root`, and nothing else."""

    def __init__(self, root: Path, *, timeout: float = 2.0, workers: int = 2) -> None:
        self.root = root
        self.timeout = timeout
        self._limiter = anyio.CapacityLimiter(workers)
        self._idle: list[_Worker] = []

    async def read(self, name: str, *, start: int = 0, lines: int = 200, from_end: bool = False) -> ReadResult:
        """`lines` numbered lines from line `start` (0-based), counted from the end when `from_end`."""
        if start < 0 or lines < 0:
            raise SandboxError("start and lines must not be negative")
        path = confine(self.root, name)

        def blocking() -> ReadResult:
            fd = open_regular(path)
            with os.fdopen(fd, "rb") as stream:
                text = _scan.decode(stream.read())
            numbered, total = _scan.line_slice(text, start, lines, from_end)
            return ReadResult(tuple(numbered), total)

        return await anyio.to_thread.run_sync(blocking)

    async def grep(
        self,
        name: str,
        pattern: str,
        *,
        before: int = 3,
        after: int = 3,
        case_sensitive: bool = False,
        max_matches: int = 50,
    ) -> GrepResult:
        """Lines matching `pattern`, searched in a worker process that is killed after `timeout` seconds."""
        if before < 0 or after < 0 or max_matches < 1:
            raise SandboxError("before and after must not be negative, and max_matches must be at least 1")
        path = confine(self.root, name)
        request = (str(path), pattern, case_sensitive, before, after, max_matches)
        async with self._limiter:
            worker = self._idle.pop() if self._idle else await self._spawn()
            try:
                with anyio.fail_after(self.timeout):
                    reply = await worker.ask(request)
            except TimeoutError:
                await worker.kill()
                raise PatternTimeout(
                    f"the search for {pattern!r} took longer than {self.timeout:g} s and was stopped; "
                    "simplify the pattern (nested repetition such as (a+)+ backtracks without end)"
                ) from None
            except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError, OSError) as exc:
                await worker.kill()
                raise SandboxError(f"the search worker stopped unexpectedly ({type(exc).__name__})") from None
            except BaseException:
                await worker.kill()
                raise
            self._idle.append(worker)
        if reply[0] == "error":
            kind, message = reply[1], str(reply[2])
            raise PatternError(message) if kind == "pattern" else NotAFile(message)
        blocks, matches, more = cast(tuple[list[list[_scan.Line]], int, bool], reply[1])
        return GrepResult(tuple(tuple(GrepLine(*line) for line in block) for block in blocks), int(matches), bool(more))

    async def aclose(self) -> None:
        """Stop the idle workers."""
        while self._idle:
            await self._idle.pop().kill()

    async def _spawn(self) -> _Worker:
        process = await anyio.open_process(
            [sys.executable, "-I", "-S", str(_WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        return _Worker(process)
