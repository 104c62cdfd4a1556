"""The request budget at the HTTP entrances (`/mcp`, `/messages/`), before the fast path or the SDK reads a body.

A POST body past `server.budget`'s budget (nested too deep: its size is `BodyLimit`'s, outside this) is
answered 400 with the JSON-RPC error, under the request's id when the head of the body shows it, as the
SDK answers a body it cannot parse; neither the fast path nor the SDK sees it, and the session goes on. A body
not labelled `application/json` is answered 415, saying so (the SDK answered a bare 400). Any other body is handed
on whole, as the one message of its request (both read it whole anyway); where it is no JSON-RPC message, the
SDK's answer (pydantic's whole report over streamable HTTP, "Could not parse message" over SSE) is said in one line
naming what is wrong, as over stdio.
"""

from __future__ import annotations

import mcp_types as types
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server import sdk_compat
from server.budget import HEAD_BYTES, Refused, check_budget, request_id, unreadable_body
from server.errors import clip

__all__ = ["BudgetGate", "read_body", "replay"]


class BudgetGate:
    """Refuse a POST whose body is past the budget; everything else passes as it came."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, messages = await read_body(receive)
        if body is None:
            await self.app(scope, replay(messages, receive), send)
            return
        messages.clear()  # the body alone is kept from here
        refused, status = check_budget(body, max_bytes=self.max_bytes), 400
        if refused is None and (media := _not_json(scope)) is not None:
            text = f"Unsupported Media Type: send the body with `Content-Type: application/json` (it came as {media})"
            refused, status = Refused(types.INVALID_REQUEST, text, request_id(body[:HEAD_BYTES])), 415
        if refused is not None:
            await _refuse(send, refused, status)
            return
        whole: Message = {"type": "http.request", "body": body, "more_body": False}
        await self.app(scope, replay([whole], receive), _in_one_line(send, body))


def _in_one_line(send: Send, body: bytes) -> Send:
    """`send`, with the SDK's answer to JSON that is no JSON-RPC message (pydantic's whole report) said in one line
    naming what is wrong, as over stdio (`server.budget.unreadable_body`); every other answer passes as it comes."""
    held: Message | None = None

    async def sent(message: Message) -> None:
        nonlocal held
        if message["type"] == "http.response.start" and message["status"] == 400:
            held = message
            return
        if held is None:
            await send(message)
            return
        start, held = held, None
        if not message.get("more_body", False) and sdk_compat.is_validation_dump(message.get("body", b"")):
            await _refuse(send, unreadable_body(body), 400)
            return
        await send(start)
        await send(message)

    return sent


async def _refuse(send: Send, refused: Refused, status: int) -> None:
    """Answer with `refused`'s JSON-RPC error."""
    data = refused.body()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def _not_json(scope: Scope) -> str | None:
    """How a POST's body was labelled when it is not JSON (the SDK refuses it too, with a bare 400), else None."""
    labels = [value for key, value in scope.get("headers", []) if key == b"content-type"]
    label = labels[0].decode("latin-1").strip() if labels else ""
    if label.lower().startswith("application/json"):
        return None
    return clip(label, 80) if label else "no Content-Type"


async def read_body(receive: Receive) -> tuple[bytes | None, list[Message]]:
    """The whole body (None if the client left first) and the messages it came in, for a replay."""
    messages: list[Message] = []
    chunks: list[bytes] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return None, messages
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), messages


def replay(messages: list[Message], receive: Receive) -> Receive:
    """`receive` for an app that reads the body again: the messages already read, then the rest."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
