"""Spooled outputs waiting for their claim: the registry between the spool and whoever settles the call.

`MessageSpool` puts a finished tool result's output here and gives the SDK session a small stand-in whose
`_meta` names it by a random token; `SpooledOutputs.claim` hands it out once, to the code that receives the
stand-in. A stand-in can be dropped on the way (the request was cancelled, the call timed out, nobody waits
for that answer any more): its entry is then never claimed, so every entry expires `ttl` seconds after it was
made, and whatever is left when the registry stops, is released with its files.

A tool result whose answer is sure to be its output file's text before it has ended (its message passed what the
spool keeps whole, and its content began) can instead be handed, while it is still being read, to a pass-through
that waits for it (`RawChannel.take_growing`): a `GrowingOutput`, which says how much of the output's start is on
disk, hands over the rest in memory, escaped, and then says how it ended (an error result or not), or why it broke
off.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import mcp_types as types

from fs_sandbox import INDEX_SUFFIX
from server.downstream.json_depth import deeper_than

__all__ = [
    "FOLLOW_BUFFER",
    "META_KEY",
    "SPOOLED_TTL_S",
    "GrowingOutput",
    "SpooledOutput",
    "SpooledOutputs",
    "kept_result",
    "materialize",
]

META_KEY = "claimcheck/spooled"
FOLLOW_BUFFER = 8 << 20
"""Bytes of a followed output that may wait in memory for its reader; past that its spool waits (and so does the
server's pipe). The reader writes to a claimcheck in front, which reads as fast as it can."""
SPOOLED_TTL_S = 300.0
"""How long a spooled output waits for its claim. The wait is the SDK handing one response to the task that
sent the request (milliseconds, at worst a turn of the thread pool), whatever the tool's run time was: a call
that has stopped waiting is gone and will never claim it. Five minutes is far above that hand-over, so a live
claim never finds its output gone, and short enough that a dropped one does not hold its disk space for long."""


@dataclass(frozen=True, slots=True)
class SpooledOutput:
    """A tool result's rendered output, on disk; `path` is None when it could not be stored."""

    path: Path | None
    bytes: int  # in the file, cut marker included
    total: int  # what the tool produced
    lines: int
    is_error: bool
    head: str  # the first part of the output, for an answer when it could not be stored
    failure: str | None  # why it could not be stored
    raw: Path | None  # the whole original message, when it was small enough to keep
    cut: bool  # only the first `maxOutputBytes` were kept, and the cut marker follows them
    raw_streamed: bool = False
    """`raw` is past what is read whole (the spool's `raw_keep`): kept for an answer that is the message as it came
    (`SpoolPolicy.whole`), streamed from disk, never read whole (`kept_result` passes it by); `path` is then None
    (the text was counted, not written: `spool.rendered` makes it from `raw` when it is needed)."""
    proven: tuple[tuple[int, int], ...] = ()
    output_limit: int = 1 << 30
    """The spool's `maxOutputBytes`: where its text is cut, if it is made again from `raw` (`spool.rendered`)."""
    """Byte ranges of `raw` inside strings that were read strictly on the way in (`JsonStream.proven`)."""

    def release(self) -> None:
        """Remove whatever of it is still on disk (the output, its line index, the original message)."""
        index = None if self.path is None else self.path.with_name(self.path.name + INDEX_SUFFIX)
        for path in (self.raw, self.path, index):
            if path is not None:
                try:
                    path.unlink(missing_ok=True)
                except OSError:
                    pass


class GrowingOutput:
    """A tool result's output while its message is still being spooled (see the module's doc): the start of its
    output file, written before it was followed, then the rest handed over in memory, escaped for a JSON string.
    Its spool is the one writer of how it grows and ends (`grew`, `put`, `finished`, `failed`) and waits while
    more than `FOLLOW_BUFFER` bytes wait for the reader (`taken`); its reader waits on `changed`, takes what was
    put (`take`), and says when it stops reading (`release`, after which what is put is dropped, and which removes
    the file once the output has ended, or at once if it has). Used from the event loop's thread, but `grew`,
    which the spool file's writer thread calls.

    A reader passes the output on as the first `prefix` bytes of `path`, escaped, then what it takes as it is:
    the server's own escaped text where it came as such, so the text is neither written to disk, nor decoded and
    escaped a second time."""

    def __init__(self, path: Path, *, prefix: int) -> None:
        self.path = path
        self.prefix = prefix
        """Bytes of `path` that hold the output's start; the file holds no more."""
        self.written = 0
        """Bytes of `path` on disk, readable."""
        self.ended = False
        """The message ended: what is left to take is the rest of the output (the cut marker, if any, escaped)."""
        self.is_error = False
        """Once it has ended: the tool's result was an error."""
        self.broken: str | None = None
        """Why the message broke off (or was not the tool result it began as, or could not be kept)."""
        self.interrupted = False
        """Its reader was asked to stop (the request was cancelled)."""
        self._pieces: deque[bytes] = deque()
        self.waiting = 0
        """Bytes put and not taken yet."""
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()
        self._room = asyncio.Event()
        self._released = False

    def grew(self, written: int) -> None:
        """`written` bytes of the output file are on disk (from its writer thread)."""
        try:
            self._loop.call_soon_threadsafe(self._grown, written)
        except RuntimeError:  # the loop has closed: nobody reads any more
            pass

    def _grown(self, written: int) -> None:
        if written > self.written and not self.ended and self.broken is None:
            self.written = written
            self._changed.set()

    def put(self, escaped: bytes) -> None:
        """More of the output, escaped (dropped once nobody reads it)."""
        if self._released or self.interrupted or not escaped:
            return
        self._pieces.append(escaped)
        self.waiting += len(escaped)
        self._changed.set()

    async def taken(self) -> None:
        """Wait while more than `FOLLOW_BUFFER` bytes wait for the reader (not once it stopped reading)."""
        while self.waiting > FOLLOW_BUFFER and not (self._released or self.interrupted):
            self._room.clear()
            await self._room.wait()

    def take(self, most: int) -> bytes:
        """What was put and not taken yet, up to about `most` bytes (whole pieces, at least one)."""
        pieces: list[bytes] = []
        size = 0
        while self._pieces and (not pieces or size + len(self._pieces[0]) <= most):
            piece = self._pieces.popleft()
            pieces.append(piece)
            size += len(piece)
        self.waiting -= size
        self._room.set()
        return b"".join(pieces)

    def finished(self, *, is_error: bool, written: int) -> None:
        """The message ended: the output file is whole (`written` bytes, its start) and so is what was put; the
        file is its own now."""
        self.ended, self.is_error, self.written = True, is_error, written
        self._changed.set()
        if self._released:
            self._remove()

    def failed(self, reason: str) -> None:
        """The message broke off, or was not the tool result it began as (its file is the spool's to remove)."""
        self.broken = reason
        self._changed.set()

    def interrupt(self) -> None:
        """Ask the reader to stop where it is."""
        self.interrupted = True
        self._changed.set()
        self._wake_spool()

    async def changed(self) -> None:
        """Wait until it grew, ended, or was interrupted since the last wait."""
        await self._changed.wait()
        self._changed.clear()

    def release(self) -> None:
        """Nobody reads it any more: what is put is dropped, and its file goes once it has ended (at once if it
        has)."""
        self._released = True
        self._wake_spool()
        if self.ended:
            self._remove()

    def _wake_spool(self) -> None:
        self._pieces.clear()
        self.waiting = 0
        self._room.set()

    def _remove(self) -> None:
        try:
            self.path.unlink(missing_ok=True)
        except OSError:
            pass


@dataclass(frozen=True, slots=True)
class _Entry:
    output: SpooledOutput
    made: float


class SpooledOutputs:
    """The spooled outputs not claimed yet, by token. Used from the event loop's thread only."""

    def __init__(self, *, ttl: float = SPOOLED_TTL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def put(self, output: SpooledOutput) -> str:
        """Keep `output` until it is claimed or expires; the token a stand-in names it by."""
        token = uuid.uuid4().hex
        self._entries[token] = _Entry(output, self._clock())
        return token

    def claim(self, result: types.CallToolResult) -> SpooledOutput | None:
        """The spooled output a stand-in result names, once; None for any other result."""
        meta = result.meta or {}
        token = meta.get(META_KEY) if isinstance(meta, dict) else None
        return self.take(token) if isinstance(token, str) else None

    def take(self, token: str) -> SpooledOutput | None:
        """The output kept under `token`, once; None when there is none (claimed, or expired)."""
        entry = self._entries.pop(token, None)
        return None if entry is None else entry.output

    def expire(self, now: float | None = None) -> int:
        """Release every output made `ttl` seconds or more before `now` (the clock's time by default);
        how many were released."""
        now = self._clock() if now is None else now
        old = [token for token, entry in self._entries.items() if now - entry.made >= self.ttl]
        for token in old:
            self._entries.pop(token).output.release()
        return len(old)

    def close(self) -> None:
        """Release every output still waiting (the pool stops: no claim can come any more)."""
        entries, self._entries = self._entries, {}
        for entry in entries.values():
            entry.output.release()

    async def run(self) -> None:
        """Expire outputs every quarter of `ttl` until cancelled; then release what is left."""
        try:
            while True:
                await anyio.sleep(self.ttl / 4)
                self.expire()
        finally:
            self.close()


def kept_result(spooled: SpooledOutput) -> types.CallToolResult | None:
    """The tool's own message when the spool kept it whole (it is then at most `raw_keep` bytes), else None."""
    if spooled.raw is None or spooled.raw_streamed:
        return None
    try:
        text = spooled.raw.read_bytes().decode("utf-8", "replace")
        if deeper_than(text):  # json and pydantic would recurse through it: the stored text stands in
            return None
        return types.CallToolResult.model_validate(json.loads(text)["result"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def materialize(spooled: SpooledOutput) -> types.CallToolResult:
    """A claimed output whole in memory, for a caller that must pass the result on as it is (a plain
    pass-through whose answer is not streamed from the file, `server.upstream.streamed`): the tool's own
    message when it was kept, else the stored text. Blocking; holds the output whole; its files are removed."""
    try:
        kept = kept_result(spooled)
        if kept is not None:
            return kept
        if spooled.path is None:
            why = spooled.failure or "it is passed on only as it is read from disk"
            text = f"{spooled.head}\n[claimcheck] the output could not be kept whole: {why}"
        else:
            text = spooled.path.read_bytes().decode("utf-8", "replace")
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=spooled.is_error)
    finally:
        spooled.release()
