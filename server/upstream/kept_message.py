"""A tool result answered with the server's own message, streamed from the spool's copy of it, never held whole.

A server whose rules are off (`"async": false`) is passed through: its client gets the result as the server gave
it, images and `structuredContent` included. A long one is spooled to disk as it arrives; its spool keeps the
message whole (`SpoolPolicy.whole`, up to `maxOutputBytes`), and past what is read whole into memory
(`SpooledOutput.raw_streamed`) its answer is written from that copy (`message_pieces`): the line's head under the
client's id, then the message's `result` as the server wrote it, byte for byte, with the items claimcheck adds after
the content (the note that says where an error came from, the status footer) put at the end of its `content`
array, where `server.upstream.replies.with_lines` puts them. Where those items are is read from the line the answer
would have been with the output's text in it (the same line `spooled_pieces` fills), so every entrance adds the
same ones.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Sequence
from pathlib import Path
from typing import IO, Any

import anyio
import mcp_types as types
from pydantic import TypeAdapter, ValidationError

from server.downstream.json_spans import NotPassable, ResultSpans, spans_in_file
from server.errors import clip

__all__ = ["added", "message_pieces", "passable", "unreadable_answer"]

_PIECE_BYTES = 1 << 20
_VALIDATED_BYTES = 1 << 20
"""A content item up to this size is validated as the SDK's client validates it; a longer one (an image, mostly)
is not held whole: its type is checked."""
_CONTENT: TypeAdapter[types.ContentBlock] = TypeAdapter(types.ContentBlock)
_TYPES = frozenset({"text", "image", "audio", "resource", "resource_link"})
_THE_SERVERS = frozenset({"content", "isError", "structuredContent", "_meta"})
"""Members of a result that are the server's to say: never added from claimcheck's line."""


def unreadable_answer(ident: types.RequestId, exc: OSError) -> bytes:
    """The error answer to `ident` when the output to pass on cannot be read."""
    message = f"claimcheck could not read the output it was passing on: {exc.strerror or exc}"
    error = {"code": types.INTERNAL_ERROR, "message": message}
    return json.dumps({"jsonrpc": "2.0", "id": ident, "error": error}).encode() + b"\n"


def added(line: bytes, placeholder: str) -> tuple[list[Any], dict[str, Any]]:
    """What `line` adds to the server's result: the content items after the text item `placeholder` (claimcheck's
    note, the footer), and the members of its result besides content, `isError`, `structuredContent` and `_meta`
    (what the request's protocol version requires of every result: `resultType`, in the sessionless era)."""
    result = json.loads(line)["result"]
    if not isinstance(result, dict):
        return [], {}
    members = {key: value for key, value in result.items() if key not in _THE_SERVERS}
    content = result.get("content")
    items: list[Any] = content if isinstance(content, list) else []
    for index, item in enumerate(items):
        if isinstance(item, dict) and item.get("text") == placeholder:
            return items[index + 1 :], members
    return [], members


def passable(path: Path, proven: Sequence[Sequence[int]] = ()) -> ResultSpans | str:
    """Where the kept message in `path` has its result, when it can be passed on as it came: JSON a strict reader
    takes (`json_spans`), and content items the SDK's client takes (each validated as its model, but one too long
    to hold, whose type is checked); else why not. `proven`: where its strings were read strictly on the way in
    (`SpooledOutput.proven`), passed over. Blocking."""
    try:
        spans = spans_in_file(path, proven)
        if spans is None:
            return "it is no tool result"
        with path.open("rb") as file:
            for item in spans.items:
                if item.end - item.start > _VALIDATED_BYTES:
                    if item.type not in _TYPES:
                        return f"a content item of type {item.type!r}"
                    continue
                file.seek(item.start)
                _CONTENT.validate_json(file.read(item.end - item.start))
    except NotPassable as exc:
        return str(exc)
    except ValidationError as exc:
        return f"a content item that is not one: {clip(str(exc), 200)}"
    except OSError as exc:
        return f"it cannot be read: {exc.strerror or exc}"
    return spans


async def message_pieces(
    ident: types.RequestId, line: bytes, placeholder: str, path: Path, spans: ResultSpans
) -> AsyncGenerator[bytes]:
    """The answer to `ident` that is the server's message kept in `path`, whose result is at `spans` (`passable`),
    a piece at a time (see the module's doc); an error answer instead when it cannot be read, or after what was sent
    when it cannot be read on. Its files are the caller's to remove."""
    try:
        stored = await anyio.to_thread.run_sync(path.open, "rb")
    except OSError as exc:
        yield unreadable_answer(ident, exc)
        return
    try:
        head = b'{"jsonrpc":"2.0","id":' + _dumped(ident) + b',"result":'
        items, members = added(line, placeholder)
        first = [_dumped(key) + b":" + _dumped(value) for key, value in members.items() if key not in spans.members]
        cuts: list[tuple[int, bytes]] = []
        joined = b",".join(_dumped(item) for item in items)
        if joined and spans.content_end is not None:
            cuts.append((spans.content_end, joined if spans.content_empty else b"," + joined))
        elif joined:  # a result with no content: it gets one, of what is added
            first.append(b'"content":[' + joined + b"]")
        if first:
            cuts.insert(0, (spans.start + 1, b",".join(first) + (b"" if spans.result_empty else b",")))
        yield head
        position = spans.start
        ending = b"}" + line[line.rfind(b"}") + 1 :]  # the line ends as the one it stands in for does
        for offset, insert in [*cuts, (spans.end, ending)]:
            async for piece in _copied(stored, position, offset):
                yield piece
            yield insert
            position = offset
    except OSError as exc:
        yield unreadable_answer(ident, exc)
    finally:
        stored.close()


async def _copied(stored: IO[bytes], start: int, end: int) -> AsyncGenerator[bytes]:
    """The bytes `[start, end)` of `stored`, a piece at a time."""
    stored.seek(start)
    left = end - start
    while left > 0:
        piece = await anyio.to_thread.run_sync(stored.read, min(left, _PIECE_BYTES))
        if not piece:
            raise OSError(f"the kept message ends at {end - left} bytes, before its result")
        left -= len(piece)
        yield piece


def _dumped(value: Any) -> bytes:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
    except UnicodeEncodeError:  # a lone surrogate: passed on escaped
        return json.dumps(value, separators=(",", ":")).encode()
