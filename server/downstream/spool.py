"""Large messages from a downstream go to disk as they arrive, never whole into memory.

A transport hands a message to `MessageSpool` once it passes `SpoolPolicy.threshold` (1 MiB) and feeds
it the rest in pieces. The spool decodes the message as it comes (`jsonstream` + `render`): a tool
result's rendered output goes straight into a file of the run root, capped at `maxOutputBytes` (the rest
is counted and drained), and the message itself is kept on disk only while it is small enough to be
useful whole (`raw_keep`), or, for a server whose answers are its messages as they came (its rules are off:
`SpoolPolicy.whole`), up to `maxOutputBytes`, with where its strings were read strictly (`JsonStream.proven`).
At the end the transport gets the bytes to give the SDK session: for a tool result a small stand-in whose
`_meta` names a `SpooledOutput` kept in `SpoolPolicy.outputs` (the pool's `SpooledOutputs`, which hands it to
whoever settles the call, or releases it if nobody claims it in time); for anything else the original message
when it was kept, else an error answer or nothing.

A tool result can also be followed while it is read (`MessageSpool.follow`; never one kept whole, for a server
whose rules are off: its answer is the message, not its text): once the message has passed
`raw_keep` (so it will not be answered from the message as it came) and its content has begun (so its output is
the content's text, not the structured content's), its answer is sure to be the output file's text; the
transport may then hand a `GrowingOutput` to the request that waits for it, and at the end the spool settles it
(how it ended, or why the message broke off) instead of making a stand-in. From then on the
output is no longer written to the file: it is handed to the `GrowingOutput` escaped, as the inside of a JSON string
(the server's own bytes where pydantic-core read them back unchanged), so whoever passes it on neither reads it back
nor decodes and escapes it again; while more than `FOLLOW_BUFFER` bytes of it wait for its reader, the spool waits.
"""

from __future__ import annotations

import json
import logging
import uuid
from dataclasses import dataclass, replace
from pathlib import Path

import anyio
import mcp_types as types

from server.downstream.json_cuts import escape
from server.downstream.jsonstream import JsonStream, JsonStreamError
from server.downstream.render import ResultRenderer
from server.downstream.spool_file import SpoolFile
from server.downstream.spooled import META_KEY, GrowingOutput, SpooledOutput, SpooledOutputs

__all__ = ["CUT_MARKER", "MessageSpool", "SpoolPolicy", "rendered"]

logger = logging.getLogger(__name__)

CUT_MARKER = "\n[claimcheck] output cut at {limit} bytes of {total} (maxOutputBytes)\n"
_HEAD_BYTES = 256 * 1024  # kept in memory for an answer when the output cannot be stored


@dataclass(frozen=True, slots=True)
class SpoolPolicy:
    """Where large messages go and how much of them is kept."""

    directory: Path
    max_output_bytes: int
    outputs: SpooledOutputs  # where a finished tool result's output waits for its claim
    threshold: int = 1 << 20
    raw_keep: int = 16 << 20
    whole: bool = False
    """A tool result is answered with its message as it came (the server's rules are off): the message is kept
    whole past `raw_keep`, up to half as much again as `max_output_bytes` (a message is its output escaped, and
    more), to be streamed from disk (`SpooledOutput.raw_streamed`), and its output is never followed."""

    @property
    def raw_limit(self) -> int:
        """The most bytes of a message kept whole."""
        return max(self.raw_keep, self.max_output_bytes * 3 // 2) if self.whole else self.raw_keep


class _TextSink:
    """Text in, UTF-8 out to a `SpoolFile`, with the first part kept in memory; once followed, the same text
    escaped as the inside of a JSON string to its follower instead (`follower`, see `MessageSpool.follow`)."""

    def __init__(self, file: SpoolFile) -> None:
        self.file = file
        self.head: list[str] = []
        self._head_chars = 0
        self.follower: GrowingOutput | None = None
        """Takes what is written from now on, escaped: the server's own bytes where it wrote them as pydantic-core
        reads them back unchanged, else escaped here as `json.dumps(..., ensure_ascii=False)` escapes. It stops
        where `file` stops keeping (its cut), so it is always what `file` would hold, escaped."""

    def write(self, text: str, escaped: bytes | None = None) -> None:
        if self._head_chars < _HEAD_BYTES:
            self.head.append(text[: _HEAD_BYTES - self._head_chars])
            self._head_chars += len(self.head[-1])
        data = text.encode("utf-8", "replace")  # a lone surrogate becomes one "?"
        if self.follower is not None and (room := self.file.room):
            if len(data) > room:  # cut here: the rest is not kept
                self.follower.put(escape(data[:room].decode("utf-8", "replace")))
            else:
                self.follower.put(escaped if escaped is not None else escape(text))
        self.file.add(data, len(text))


class MessageSpool:
    """One large message on its way in (see the module docstring)."""

    def __init__(self, policy: SpoolPolicy, peer: str) -> None:
        self._policy = policy
        self._peer = peer
        stem = policy.directory / f"spool-{uuid.uuid4().hex}"
        self._output = _TextSink(SpoolFile(stem.with_suffix(".out"), policy.max_output_bytes))
        self._structured = _TextSink(SpoolFile(stem.with_suffix(".json"), policy.max_output_bytes))
        self._raw = SpoolFile(stem.with_suffix(".raw"), policy.raw_limit + 1, indexed=False)
        self._renderer = ResultRenderer(self._output, self._structured)
        self._stream = JsonStream(self._renderer)
        self._renderer.stream = self._stream
        if policy.whole:  # its answer may be the message as it came: where its strings were read strictly
            self._stream.proven = []
        self._broken: str | None = None
        self._growing: GrowingOutput | None = None
        self._text_counted = False  # the output's text is counted, not written (`SpoolPolicy.whole`)
        self.size = 0

    def followable_id(self) -> object | None:
        """The id of the tool result this message is, once its answer is sure to be its output file's text and
        nobody follows it yet (see the module's doc); else None."""
        renderer, output = self._renderer, self._output.file
        if self._growing is not None or self._broken is not None or renderer.method is not None or self._policy.whole:
            return None
        if self._raw.produced <= self._policy.raw_keep or not renderer.items or output.failure is not None:
            return None
        ident: object = renderer.id
        return ident

    def follow(self) -> GrowingOutput:
        """Its output as it grows, for the request whose answer it is (`followable_id`): the file's start, then
        the rest in memory, escaped; the spool settles it, and makes no stand-in."""
        assert self._growing is None
        sink = self._output
        file = sink.file
        file.count_only()  # what it holds so far is the output's start; the rest goes to the follower only
        self._growing = sink.follower = GrowingOutput(file.path, prefix=file.accepted)
        # Told before it is read: the writer thread may finish a batch in between, and the file's last batch
        # may be the one that brings its start whole (its reader would wait for it forever).
        file.on_written = self._growing.grew
        self._growing.grew(file.written)
        return self._growing

    async def feed(self, piece: bytes) -> None:
        self.size += len(piece)
        self._raw.add(piece)
        if self._policy.whole and not self._text_counted and self._raw.produced > self._policy.raw_keep:
            self._text_counted = True  # answered from the message, not its text: counted, not written from now on
            self._output.file.count_only()
            self._structured.file.count_only()
        if self._broken is None:
            try:
                self._stream.feed(piece)
            except JsonStreamError as exc:
                self._broken = str(exc)
        await self._output.file.flush()
        if self._growing is not None:
            await self._growing.taken()
        await self._structured.file.flush()
        await self._raw.flush()

    async def finish(self) -> bytes | Exception | None:
        """The message for the SDK session: a stand-in, the original, an error answer, or None to drop."""
        if self._broken is None:
            try:
                self._stream.finish()
            except JsonStreamError as exc:
                self._broken = str(exc)
        for sink in (self._output, self._structured):
            await sink.file.close()
        await self._raw.close()
        raw_whole = self._raw.failure is None and self._raw.produced <= self._policy.raw_limit
        if not raw_whole:
            self._raw.remove()
        renderer = self._renderer
        growing, self._growing = self._growing, None
        if self._broken is not None:
            self._discard()
            logger.warning("%s wrote a %d-byte line that is not JSON-RPC: %s", self._peer, self.size, self._broken)
            if growing is not None:
                growing.failed(f"the server's answer broke off after {self.size} bytes: {self._broken}")
            return ValueError(f"a {self.size}-byte message that is not JSON: {self._broken}")
        if renderer.method is None and renderer.has_result and (renderer.has_content or renderer.has_structured):
            if growing is not None:  # its request has its answer already: the output goes there, not to a stand-in
                self._finish_followed(growing)
                return None
            return self._stand_in(raw_whole)
        if growing is not None:  # its request has its answer already: nothing goes to the session
            growing.failed("the server's answer turned out not to be a tool result")
            self._discard()
            return None
        if raw_whole and self.size <= self._policy.raw_keep:  # a bounded message of another kind: pass it on
            data = await anyio.to_thread.run_sync(self._raw.path.read_bytes)
            self._discard()
            return data
        self._discard()
        what = f"{renderer.method!r} message" if renderer.method else "answer"
        logger.warning(
            "%s sent a %d-byte %s; claimcheck keeps at most %d bytes of those",
            self._peer,
            self.size,
            what,
            self._policy.raw_keep,
        )
        if renderer.method is not None or renderer.id is None:
            return None
        message = (
            f"the server's answer was {self.size} bytes, over the {self._policy.raw_keep} bytes claimcheck keeps "
            "for anything but a tool result"
        )
        error = {"jsonrpc": "2.0", "id": renderer.id, "error": {"code": types.INTERNAL_ERROR, "message": message}}
        return json.dumps(error).encode()

    def _finish_followed(self, growing: GrowingOutput) -> None:
        """Settle the output its request follows: its escaped text whole (the cut marker after it), or why not."""
        file = self._output.file
        self._structured.file.remove()
        if file.failure is not None:  # the output's start, written before it was followed, is not all there
            self._discard()
            growing.failed(f"the output could not be kept whole: {file.failure}")
            return
        if file.produced > file.limit:
            growing.put(escape(CUT_MARKER.format(limit=file.limit, total=file.produced)))
        growing.finished(is_error=self._renderer.is_error, written=file.written)

    def _stand_in(self, raw_whole: bool) -> bytes:
        renderer = self._renderer
        token = self._policy.outputs.put(self._output_of(raw_whole))
        result = {
            "content": [{"type": "text", "text": f"[claimcheck] spooled output {token}"}],
            "isError": True,  # never checked against the tool's output schema; the real flag is in SpooledOutput
            "_meta": {META_KEY: token},
        }
        return json.dumps({"jsonrpc": "2.0", "id": renderer.id, "result": result}).encode()

    def _output_of(self, raw_whole: bool) -> SpooledOutput:
        """The finished result's output: its file (cut marker and line index added), or why it has none."""
        renderer = self._renderer
        use_structured = renderer.items == 0 and renderer.has_structured
        sink = self._structured if use_structured else self._output
        other = self._output if use_structured else self._structured
        other.file.remove()
        file = sink.file
        if file.failure is None and file.written == 0:
            file.append_now(b"")  # an empty output still gets its (empty) file
        total = file.produced
        cut = total > file.written and file.failure is None
        marker = CUT_MARKER.format(limit=file.limit, total=total) if cut else ""
        if marker:
            file.append_now(marker.encode())
        failure = file.failure
        if self._text_counted and not raw_whole:  # neither the text nor the message: the head is all there is
            failure = self._raw.failure or (
                f"its message was {self.size} bytes, over the {self._policy.raw_limit} bytes claimcheck keeps to "
                "pass on as it came"
            )
        spooled = SpooledOutput(
            path=None if failure or self._text_counted else file.path,
            bytes=0 if failure or self._text_counted else file.written,
            total=total,
            lines=file.lines,
            is_error=renderer.is_error,
            head="".join(sink.head),
            failure=failure,
            raw=self._raw.path if raw_whole else None,
            raw_streamed=raw_whole and self._raw.produced > self._policy.raw_keep,
            proven=tuple((start, end) for start, end in self._stream.proven or ()) if raw_whole else (),
            cut=bool(marker),
            output_limit=self._policy.max_output_bytes,
        )
        if failure or self._text_counted:
            file.remove()
        else:
            file.write_index()
        return spooled

    def _discard(self) -> None:
        for file in (self._output.file, self._structured.file, self._raw):
            file.remove()

    async def abort(self) -> None:
        """Forget a message that will never end (the connection went away)."""
        if self._growing is not None:
            self._growing.failed(f"the server's connection closed after {self.size} bytes of its answer")
            self._growing = None
        for file in (self._output.file, self._structured.file, self._raw):
            await file.close()
        self._discard()


async def rendered(spooled: SpooledOutput) -> SpooledOutput:
    """The output of a message kept to be passed on as it came (`SpooledOutput.raw_streamed`, whose text was not
    written), made again from that copy, as any server's output is: for an answer that cannot pass the message on
    as it came. The copy goes; an output that cannot be made says why, with the head."""
    assert spooled.raw is not None
    outputs = SpooledOutputs()
    policy = SpoolPolicy(spooled.raw.parent, spooled.output_limit, outputs)
    spool = MessageSpool(policy, "a kept message")
    try:
        with spooled.raw.open("rb") as kept:
            while piece := await anyio.to_thread.run_sync(kept.read, policy.threshold):
                await spool.feed(piece)
        answer = await spool.finish()
    except OSError as exc:
        await spool.abort()
        answer = exc
    finally:
        spooled.release()
    made = outputs.take(json.loads(answer)["result"]["_meta"][META_KEY]) if isinstance(answer, bytes) else None
    if made is None:
        why = str(answer) if isinstance(answer, Exception) else "it is no tool result"
        return replace(spooled, path=None, raw=None, raw_streamed=False, failure=f"it could not be read again: {why}")
    return made
