"""A pass-through's spooled output sent to an HTTP client from its file, in pieces, never whole.

The SDK's HTTP transports (legacy SSE, and streamable HTTP for what its fast path leaves it: a server scoped per
client, a server reached over HTTP, the sessionless era, the fast path off) answer a pass-through on the SDK's path
(`forwarding.forward`), which would read a stored output whole and serialize it: some 15 bytes of memory for each
byte of output, measured. Instead, as over stdio (`server.upstream.streamed`), the SDK's path answers with a
stand-in naming the output (`streamed.stand_in`), and the response that carries the answer writes the output in
its place:

- `with_outputs` marks each request's scope with where its stand-ins go (`streamed.OUTPUTS_KEY`, which
  `streamed.streaming_of` reads);
- `StandInSend` wraps the ASGI `send` of a response that may carry answers: an SSE event that is a stand-in answer
  goes out as that event (its other fields, an event id among them, as they were) with the file's text where the
  stand-in's token stands in its data, one piece at a time (`streamed.spooled_pieces`); so does a JSON body that
  is one (its length, no longer known, left out: the body is sent chunked). Everything else goes out as the SDK
  made it. Nothing else goes out on the response while the answer does (sse-starlette sends its events and pings
  one at a time, and this wrapper too);
- `with_stand_ins` does both, for an endpoint whose requests and responses are the same HTTP exchanges
  (streamable HTTP); the legacy SSE transport takes requests on one endpoint and answers on another's stream.

An output is written once: the event store keeps the stand-in (small), so a client that resumes its stream after
the answer went out is told the output is no longer held; one that resumes it before gets the output.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import anyio
import mcp_types as types
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.downstream.spooled import SpooledOutputs
from server.upstream.streamed import OUTPUTS_KEY, STREAM_KEY, spooled_pieces, stand_in_answer

__all__ = ["StandInSend", "with_outputs", "with_stand_ins"]

_MARK = json.dumps(STREAM_KEY).encode()  # how a stand-in's `_meta` key appears in the JSON of its answer
_DATA = b"data: "
_JSON = b"application/json"


def with_outputs(app: ASGIApp, outputs: SpooledOutputs) -> ASGIApp:
    """`app`, with each request's scope naming `outputs` (where the SDK's path puts its stand-ins' outputs)."""

    async def marked(scope: Scope, receive: Receive, send: Send) -> None:
        await app({**scope, OUTPUTS_KEY: outputs}, receive, send)

    return marked


def with_stand_ins(app: ASGIApp, outputs: SpooledOutputs) -> ASGIApp:
    """`app`, whose requests' stand-ins go to `outputs` and whose responses write them from their files."""
    marked = with_outputs(app, outputs)

    async def answering(scope: Scope, receive: Receive, send: Send) -> None:
        await marked(scope, receive, StandInSend(send, outputs) if scope["type"] == "http" else send)

    return answering


class StandInSend:
    """The `send` of one response, writing a stand-in answer's output in its place (module doc)."""

    def __init__(self, send: Send, outputs: SpooledOutputs) -> None:
        self._send = send
        self._outputs = outputs
        self._lock = anyio.Lock()
        self._held: Message | None = None  # a JSON body's start, until its body shows whether it is a stand-in

    async def __call__(self, message: Message) -> None:
        async with self._lock:
            if message["type"] == "http.response.start" and _is_json(message):
                self._held = message
                return
            held, self._held = self._held, None
            body = message.get("body", b"") if message["type"] == "http.response.body" else b""
            found = _stand_in(body, json_body=held is not None) if _MARK in body else None
            if found is None:
                if held is not None:
                    await self._send(held)
                await self._send(message)
                return
            before, (ident, result, token), ending, after = found
            if held is not None:
                headers = [(name, value) for name, value in held["headers"] if name.lower() != b"content-length"]
                await self._send({**held, "headers": headers})
            line, spooled = stand_in_answer(ident, result, token, self._outputs)
            line = line[:-1] + ending  # the line ends as the one it stands in for did
            pieces = _one(line) if spooled is None else spooled_pieces(ident, line, token, spooled)
            async with contextlib.aclosing(pieces):
                await self._write(before, pieces, after, more_body=bool(message.get("more_body", False)))

    async def _write(self, before: bytes, pieces: AsyncIterator[bytes], after: bytes, *, more_body: bool) -> None:
        """`before`, the line `pieces` make, then `after`."""
        if before:
            await self._send({"type": "http.response.body", "body": before, "more_body": True})
        async for piece in pieces:
            await self._send({"type": "http.response.body", "body": piece, "more_body": True})
        await self._send({"type": "http.response.body", "body": after, "more_body": more_body})


async def _one(line: bytes) -> AsyncGenerator[bytes]:
    yield line


def _is_json(start: Message) -> bool:
    for name, value in start.get("headers", ()):
        if name.lower() == b"content-type":
            return bytes(value).partition(b";")[0].strip().lower() == _JSON
    return False


_Found = tuple[bytes, tuple[types.RequestId, dict[str, Any], str], bytes, bytes]


def _stand_in(body: bytes, *, json_body: bool) -> _Found | None:
    """What comes before the stand-in answer `body` carries (a JSON body's, or the data of one SSE event), the
    answer's id, result and token, how its line ends (the SSE writer's CRLF, say), and what comes after that
    line; None when it carries none."""
    if json_body:
        answer = _answer(body)
        return None if answer is None else (b"", answer, _ending(body), b"")
    start = 0
    while start < len(body):
        end = body.find(b"\n", start)
        end = len(body) if end < 0 else end + 1
        line = body[start:end]
        if line.startswith(_DATA):
            answer = _answer(line[len(_DATA) :])
            return None if answer is None else (body[:start] + _DATA, answer, _ending(line), body[end:])
        start = end
    return None


def _ending(line: bytes) -> bytes:
    return line[len(line.rstrip(b"\r\n")) :]


def _answer(data: bytes) -> tuple[types.RequestId, dict[str, Any], str] | None:
    """The id, result and token of the stand-in answer `data` is the JSON of, else None."""
    try:
        message = json.loads(data)
    except ValueError:
        return None
    if not isinstance(message, dict) or not isinstance(result := message.get("result"), dict):
        return None
    meta = result.get("_meta")
    token = meta.get(STREAM_KEY) if isinstance(meta, dict) else None
    ident = message.get("id")
    if not isinstance(token, str) or not isinstance(ident, int | str):
        return None
    return ident, result, token
