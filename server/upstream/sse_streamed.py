"""A pass-through's spooled output sent to a legacy SSE client from its file, in pieces, never whole.

The SSE transport is the SDK's (`SseServerTransport`): it has no fast path, so a pass-through is answered on the
SDK's path (`forwarding.forward`), which would read a stored output whole and serialize it (some 15 bytes of
memory for each byte of output, measured). Instead, as over stdio (`server.upstream.streamed`), the SDK's path
answers with a stand-in naming the output (`streamed.stand_in`), and the stream that carries the answer writes the
output in its place:

- `with_outputs` wraps the endpoint that takes the client's POSTs: each request it hands the SDK says where its
  stand-ins go (`streamed.OUTPUTS_KEY` in the request's scope, which `streamed.streaming_of` reads);
- `StandInSend` wraps the ASGI `send` of each client's event stream (`GET /sse`): an event that is a stand-in
  answer goes out as that answer's `message` event with the file's text where the stand-in's token stands, one
  piece at a time (`streamed.spooled_pieces`); every other event goes out as the SDK made it. Nothing else goes
  out on the stream while the answer does (sse-starlette sends its events and pings one at a time, and this
  wrapper too).
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

__all__ = ["StandInSend", "with_outputs"]

_MARK = json.dumps(STREAM_KEY).encode()  # how a stand-in's `_meta` key appears in its event's data
_DATA = b"data: "


def with_outputs(app: ASGIApp, outputs: SpooledOutputs) -> ASGIApp:
    """`app` (the SDK's POST endpoint), with each request's scope naming `outputs`."""

    async def marked(scope: Scope, receive: Receive, send: Send) -> None:
        await app({**scope, OUTPUTS_KEY: outputs}, receive, send)

    return marked


class StandInSend:
    """The `send` of one client's event stream, writing a stand-in answer's output in its place (module doc)."""

    def __init__(self, send: Send, outputs: SpooledOutputs) -> None:
        self._send = send
        self._outputs = outputs
        self._lock = anyio.Lock()

    async def __call__(self, message: Message) -> None:
        async with self._lock:
            body = message.get("body", b"") if message["type"] == "http.response.body" else b""
            found = _stand_in(body) if _MARK in body else None
            if found is None:
                await self._send(message)
                return
            ident, result, token = found
            line, spooled = stand_in_answer(ident, result, token, self._outputs)
            pieces = _one(line) if spooled is None else spooled_pieces(ident, line, token, spooled)
            async with contextlib.aclosing(pieces):
                await self._event(pieces, more_body=bool(message.get("more_body", False)))

    async def _event(self, pieces: AsyncIterator[bytes], *, more_body: bool) -> None:
        """One `message` event whose data is the line `pieces` make (its one newline, its last byte, ends the
        data's line; a blank line ends the event)."""
        await self._send({"type": "http.response.body", "body": b"event: message\r\n" + _DATA, "more_body": True})
        async for piece in pieces:
            await self._send({"type": "http.response.body", "body": piece, "more_body": True})
        await self._send({"type": "http.response.body", "body": b"\r\n", "more_body": more_body})


async def _one(line: bytes) -> AsyncGenerator[bytes]:
    yield line


def _stand_in(body: bytes) -> tuple[types.RequestId, dict[str, Any], str] | None:
    """The id, result and token of the stand-in answer `body` (one event) carries, else None."""
    for line in body.splitlines():
        if not line.startswith(_DATA):
            continue
        try:
            message = json.loads(line[len(_DATA) :])
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
    return None
