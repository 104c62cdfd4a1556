"""A pass-through's spooled output written to a stdio client from its file, in pieces, never whole.

A claimcheck in front asks for a plain pass-through (`server.downstream.chain`). When the downstream's result
was spooled to a file (a `SpooledOutput`), the answer's text is that file: over stdio it is written as one
JSON-RPC line in pieces (`write_spooled`): the line is built whole around a placeholder for the text (a token
JSON needs no escape for), then written as its head, the file's text decoded and escaped a piece at a time
(`PIECE_BYTES` of the file each, decoded as `materialize` would decode it whole), and its tail, through
`LineWriter.write_pieces`; the spool's files are removed after. The stdio fast path does this itself
(`server.upstream.fast_passthrough`). On the SDK's path `forwarding.forward` answers with a stand-in whose `_meta`
names the output (`stand_in`, only when the request's transport context is a `LineLink` with outputs:
`fd_streams` gives one to every request of the connection it serves, `streaming_of` reads it), and that
transport's writer streams the output in its place (`stand_in_token`, `write_stand_in`).

A pass-through on the stdio fast path may get its output before the downstream has finished writing it (a
`GrowingOutput`, `server.downstream.spooled`): its answer is then written while the file grows (`write_followed`),
so that the claimcheck in front decodes while this one reads. The line's head is the same whatever the output
turns out to be, so it goes first; the text follows the files as they are written: what was on disk before it
followed, decoded and escaped as `write_spooled` would, then the rest as the server escaped it (the spool's second
file, `GrowingOutput`), so the text is the same as `write_spooled`'s, though its escapes may be the server's; the
tail is chosen at the end: the plain result's, or the tool's error's (its note after the text). A line cannot be
taken back, so an output that breaks off (the downstream's JSON broke, it died, the disk filled, it wrote nothing
for its call timeout, or the client cancelled) ends the text, after its last whole character and escape, with
claimcheck's note of why and the result as an error (`Followed.broken_tail`): the claimcheck in front reports an
error, never a truncated success. While the line is written every other line of this stdout
waits behind it (as behind `write_spooled`), now for as long as the downstream takes to write its output, at
most its call timeout between two pieces.

A spooled output whose whole original message was kept (`SpooledOutput.raw`, at most the spool's `raw_keep`,
16 MiB) is not streamed (`streamable`): that message may hold more than text (images, structured content),
so it is answered from the message as it came (`materialize`, bounded by the same 16 MiB). Past that, a message
kept whole for a server whose rules are off (`SpooledOutput.raw_streamed`) is streamed as it came from its copy
on disk, in place of the text (`server.upstream.kept_message`).
"""

from __future__ import annotations

import codecs
import contextlib
import json
import logging
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import IO, Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from server.downstream.json_cuts import escape, safe_cut_bytes, utf8_cut
from server.downstream.spool import rendered
from server.downstream.spooled import GrowingOutput, SpooledOutput, SpooledOutputs
from server.upstream.kept_message import message_pieces, passable, unreadable_answer
from server.upstream.line_writer import LineWriter

__all__ = [
    "GONE",
    "OUTPUTS_KEY",
    "PIECE_BYTES",
    "STREAM_KEY",
    "Followed",
    "LineLink",
    "followed_pieces",
    "spooled_pieces",
    "stand_in",
    "stand_in_answer",
    "stand_in_token",
    "streamable",
    "streaming_of",
    "write_followed",
    "write_spooled",
    "write_stand_in",
]

logger = logging.getLogger(__name__)

PIECE_BYTES = 1 << 20
_SLICE_BYTES = 256 * 1024
"""A piece is decoded and escaped in slices of this size: the text of a whole megabyte, escaped with its
non-ASCII characters kept, costs 8× as much (it falls out of the cache and the allocator's heap)."""
STREAM_KEY = "claimcheck/streamed"
GONE = (
    "[claimcheck] the output is no longer held: it was sent once already (a stream resumed after its answer),"
    " or it expired before it could be sent; call the tool again"
)
OUTPUTS_KEY = "claimcheck.outputs"
"""The key of a request's ASGI scope that names where its stand-ins' outputs are (an HTTP endpoint's,
`server.upstream.http_stand_ins`)."""


@dataclass(frozen=True, slots=True)
class LineLink:
    """The transport context (`ctx.request`) `fd_streams` gives each request it hands the SDK: where it takes the
    outputs it streams (`stand_in`; None: it writes answers whole), and the link it serves, where it is one of the
    shared claimcheck's relays (`server.handles.owners.link_of`)."""

    outputs: SpooledOutputs | None
    link: str = ""


def streaming_of(request: Any) -> SpooledOutputs | None:
    """Where the transport of a request (its `ctx.request`) takes the outputs it streams: claimcheck's stdio
    (`LineLink`), or an HTTP endpoint (a request whose scope names them under `OUTPUTS_KEY`, set by
    `http_stand_ins.with_outputs`); None: a transport that writes answers whole (the SDK's own stdio)."""
    if isinstance(request, LineLink):
        return request.outputs
    scope = getattr(request, "scope", None)
    found = scope.get(OUTPUTS_KEY) if isinstance(scope, dict) else None
    return found if isinstance(found, SpooledOutputs) else None


def streamable(spooled: SpooledOutput) -> bool:
    """Whether the answer is streamed from disk: the server's message, kept past what is read whole
    (`kept_message`), or the output's file, stored, when the message was not kept."""
    return spooled.raw_streamed or (spooled.path is not None and spooled.raw is None)


def stand_in(outputs: SpooledOutputs, spooled: SpooledOutput) -> types.CallToolResult:
    """The result the SDK's path answers for a streamable output: its text stands for the file's, its `_meta`
    names the output in `outputs` (it expires there if nobody writes it)."""
    token = outputs.put(spooled)
    return types.CallToolResult.model_validate(
        {"content": [{"type": "text", "text": token}], "isError": spooled.is_error, "_meta": {STREAM_KEY: token}}
    )


def stand_in_token(message: SessionMessage) -> str | None:
    """The token of a stand-in answer the SDK is about to write, else None."""
    response = message.message
    if not isinstance(response, types.JSONRPCResponse):
        return None
    meta = response.result.get("_meta")
    token = meta.get(STREAM_KEY) if isinstance(meta, dict) else None
    return token if isinstance(token, str) else None


async def write_stand_in(writer: LineWriter, message: SessionMessage, token: str, outputs: SpooledOutputs) -> bool:
    """Write a stand-in answer with the output it names in its place; False once the client has gone away."""
    response = message.message
    assert isinstance(response, types.JSONRPCResponse)
    line, spooled = stand_in_answer(response.id, response.result, token, outputs)
    if spooled is None:
        return await writer.write(line)
    return await write_spooled(writer, response.id, line, token, spooled)


def stand_in_answer(
    ident: types.RequestId, result: dict[str, Any], token: str, outputs: SpooledOutputs
) -> tuple[bytes, SpooledOutput | None]:
    """The answer a stand-in result stands for: its line, `token` where the output's text goes (the stand-in's
    other `_meta` kept), and the output to put there (`spooled_pieces`); or, when the output is gone, an error
    result's line and None."""
    result = dict(result)
    meta = {key: value for key, value in result.pop("_meta").items() if key != STREAM_KEY}
    if meta:
        result["_meta"] = meta
    spooled = outputs.take(token)
    if spooled is None or not streamable(spooled):  # sent already, or expired before the SDK handed it over
        content = [{"type": "text", "text": GONE}]
        result.update(content=content, isError=True)
        return _line(ident, result), None
    return _line(ident, result), spooled


def _line(ident: types.RequestId, result: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}, separators=(",", ":")).encode() + b"\n"


async def write_spooled(
    writer: LineWriter, ident: types.RequestId, line: bytes, placeholder: str, spooled: SpooledOutput
) -> bool:
    """Write the response `line` with the file's text where the JSON string `placeholder` stands, then remove
    the spool's files (`spooled_pieces`). False once the client has gone away."""
    async with contextlib.aclosing(spooled_pieces(ident, line, placeholder, spooled)) as pieces:
        return await writer.write_pieces(pieces)


async def spooled_pieces(
    ident: types.RequestId, line: bytes, placeholder: str, spooled: SpooledOutput
) -> AsyncGenerator[bytes]:
    """The pieces of the answer `line` with the file's text where the JSON string `placeholder` stands, for a
    transport to send as they come (`write_spooled` over stdio, `http_fast` over HTTP); an error answer to `ident`
    instead when the file cannot be opened, or after what was sent when it cannot be read on (the answer is then
    broken: the client in front reports it). The spool's files are removed at the end. A message kept to be
    answered as it came (`SpooledOutput.raw_streamed`) is passed on instead (`kept_message.message_pieces`)."""
    head, found, tail = line.partition(placeholder.encode())
    assert found, "the placeholder is not in the line"
    try:
        if spooled.raw is not None and spooled.raw_streamed:
            spans = await anyio.to_thread.run_sync(passable, spooled.raw, spooled.proven)
            if not isinstance(spans, str):
                async with contextlib.aclosing(message_pieces(ident, line, placeholder, spooled.raw, spans)) as kept:
                    async for piece in kept:
                        yield piece
                return
            logger.warning("a server's %d-byte message is passed on as its text: %s", spooled.total, spans)
            spooled = await rendered(spooled)
        if spooled.path is None:
            yield unreadable_answer(ident, OSError(spooled.failure or "the output was not stored"))
            return
        try:
            stored = await anyio.to_thread.run_sync(spooled.path.open, "rb")
        except OSError as exc:
            yield unreadable_answer(ident, exc)
            return
        try:
            async with contextlib.aclosing(_pieces(head, EscapedText(stored), tail)) as pieces:
                async for piece in pieces:
                    yield piece
        except OSError as exc:
            logger.warning("a pass-through's output could not be read whole: %s", exc)
            yield unreadable_answer(ident, exc)
        finally:
            stored.close()
    finally:
        spooled.release()


async def followed_pieces(followed: Followed) -> AsyncGenerator[bytes]:
    """What `write_followed` writes, for a transport that sends the pieces itself (HTTP); the files are removed at
    the end."""
    try:
        async with contextlib.aclosing(_followed_pieces(followed)) as pieces:
            async for piece in pieces:
                yield piece
    finally:
        followed.growing.release()


async def _pieces(head: bytes, text: EscapedText, tail: bytes) -> AsyncGenerator[bytes]:
    yield head
    while piece := await anyio.to_thread.run_sync(text.read):
        yield piece
    yield tail


@dataclass(frozen=True, slots=True)
class Followed:
    """An answer to write while its output grows (`write_followed`): the line's head (up to the text), and
    the tails it may end with, each beginning where the text ends."""

    head: bytes
    tail: bytes  # a plain result
    error_tail: bytes  # the tool's error: its note after the text
    broken_tail: bytes  # it broke off: claimcheck's note ends the text, and the result is an error
    growing: GrowingOutput
    stall_s: float  # the longest wait for the file to grow

    @classmethod
    def of(
        cls, placeholder: str, lines: tuple[bytes, bytes, bytes], growing: GrowingOutput, stall_s: float
    ) -> Followed:
        """From the three lines the answer may be, each with `placeholder` where the text goes (same head)."""
        parts = [line.partition(placeholder.encode()) for line in lines]
        assert all(found and head == parts[0][0] for head, found, _ in parts), "the lines differ before the text"
        return cls(parts[0][0], parts[0][2], parts[1][2], parts[2][2], growing, stall_s)


async def write_followed(writer: LineWriter, followed: Followed) -> bool:
    """Write the answer while its output grows (see the module's doc); its files are removed after. False once
    the client has gone away."""
    try:
        async with contextlib.aclosing(_followed_pieces(followed)) as pieces:
            return await writer.write_pieces(pieces)
    finally:
        followed.growing.release()


async def _followed_pieces(followed: Followed) -> AsyncGenerator[bytes]:
    yield followed.head
    growing = followed.growing
    text = _GrowingText(growing)
    try:
        while True:
            if growing.interrupted:
                yield text.end("the request was cancelled while its output was passed on") + followed.broken_tail
                return
            if growing.broken is not None:
                yield text.end(growing.broken) + followed.broken_tail
                return
            if text.on_disk():
                piece = await anyio.to_thread.run_sync(text.read)
                if piece:
                    yield piece
                continue
            if text.handed_over():
                piece = text.take()
                if piece:
                    yield piece
                continue
            if growing.ended:
                yield text.end() + (followed.error_tail if growing.is_error else followed.tail)
                return
            with anyio.move_on_after(followed.stall_s) as waited:
                await growing.changed()
            if waited.cancelled_caught:
                stalled = f"the server wrote nothing more of its answer for {followed.stall_s:g} s"
                yield text.end(stalled) + followed.broken_tail
                return
    except OSError as exc:
        # A spool that gave up its output (it broke off) removes the file: then the reason is that, not the read.
        reason = growing.broken or f"claimcheck could not read the output it was passing on: {exc.strerror or exc}"
        yield text.end(reason) + followed.broken_tail
    finally:
        text.close()


class _GrowingText:
    """A growing output's text, read up to what is there: its first `prefix` bytes from its file, decoded and
    escaped as `EscapedText` does, then what its spool hands over, as it is (see `GrowingOutput`)."""

    def __init__(self, growing: GrowingOutput) -> None:
        self._growing = growing
        self._stored: IO[bytes] | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.position = 0  # in the output file
        self._held = b""  # the end of the last piece taken, cut inside a character or an escape

    def on_disk(self) -> bool:
        """Whether more of the output's start is on disk to read (`read`, blocking)."""
        growing = self._growing
        return self.position < min(growing.written, growing.prefix)

    def handed_over(self) -> bool:
        """Whether the output's start is all read and more was handed over (`take`)."""
        return self.position >= self._growing.prefix and self._growing.waiting > 0

    def read(self) -> bytes:
        """The escaped text of the next piece of the output's start on disk. Blocking."""
        growing = self._growing
        if self._stored is None:
            self._stored = growing.path.open("rb")
        block = self._stored.read(min(min(growing.written, growing.prefix) - self.position, PIECE_BYTES))
        if not block:
            raise OSError(f"the output file ends at {self.position} bytes, before what was written")
        self.position += len(block)
        return _escaped(self._decoder, block, final=self.position == growing.prefix)

    def take(self) -> bytes:
        """The next pieces handed over, up to the last whole character and escape in them."""
        block = self._held + self._growing.take(PIECE_BYTES)
        cut = safe_cut_bytes(block, utf8_cut(block))  # a note may follow it: it ends on a whole escape
        self._held = block[cut:]
        return block[:cut]

    def end(self, why: str | None = None) -> bytes:
        """What the decoder holds back, then, when the output broke off, claimcheck's note of `why` (the start of
        a character or an escape cut by where it broke off is left out), else what was held back."""
        rest = _escaped(self._decoder, b"", final=True)
        if why is None:
            return rest + self._held
        return rest + escape(f"\n[claimcheck] {why}")

    def close(self) -> None:
        if self._stored is not None:
            self._stored.close()


def _escaped(decoder: codecs.IncrementalDecoder, block: bytes, *, final: bool) -> bytes:
    """`block` decoded (the decoder keeps a character cut at its end) and escaped, a slice at a time."""
    return b"".join(
        escape(text)
        for start in range(0, max(len(block), 1), _SLICE_BYTES)
        if (text := decoder.decode(block[start : start + _SLICE_BYTES], final=final))
    )


class EscapedText:
    """A stored output's text, decoded as `materialize` decodes it whole (UTF-8, bad bytes replaced) and
    escaped as the inside of a JSON string as `json.dumps(..., ensure_ascii=False)` writes it (as the SDK and
    most servers do: the claimcheck in front decodes raw UTF-8 twice as fast as `\\u` escapes), a piece at a
    time. Blocking: read it from a worker thread."""

    def __init__(self, stored: IO[bytes], piece_bytes: int = PIECE_BYTES) -> None:
        self._stored = stored
        self._piece_bytes = piece_bytes
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._done = False

    def read(self) -> bytes:
        """The next piece of escaped text; b"" at the end."""
        while not self._done:
            block = self._stored.read(self._piece_bytes)
            self._done = not block
            if escaped := _escaped(self._decoder, block, final=self._done):
                return escaped
        return b""
