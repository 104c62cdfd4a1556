"""A plain call of the sessionless era (2026-07-28) on the fast paths: its client as the SDK's path sees it, and
its answer written as the SDK's path writes it.

Such a request carries its own context in `params._meta` (`server.upstream.plain_call.Sessionless`); the SDK makes
of it a born-ready `Connection` (`Connection.from_envelope`) and a `ServerSession` whose request channel takes no
server-to-client requests, and `SessionlessClients.client_of` makes the same. Over stdio the SDK serves one era a
stream, chosen by the client's first request; `StreamEra` says when that was the sessionless one. A plain call opts
in to neither log messages nor progress, so nothing goes to the client before its answer. The answer is the
handler's result shaped by the SDK's own runner for the request's version (`sdk_compat.shape_result`: the version's
serializer, the result type, the server's identity stamp), framed as the transport's SDK path frames it: a line over
stdio, the body of one `application/json` response over HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.runner import modern_error_data
from mcp.server.session import ServerSession
from mcp.shared.dispatcher import CallOptions
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.transport_context import TransportContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from server import sdk_compat
from server.framing import dump_json
from server.upstream.plain_call import RequestId, Sessionless, line

__all__ = ["SessionlessClients", "SessionlessWire", "StreamEra"]


class _NoBackChannel:
    """The request channel of a sessionless request answered on a fast path, as the SDK's modern entries make
    it: server-to-client requests are refused, and there is nothing to notify (a plain call asked for no log
    messages and has no progress token)."""

    can_send_request = False
    message_metadata = None

    def __init__(self, request_id: RequestId) -> None:
        self.request_id = request_id
        self.transport = TransportContext(kind="jsonrpc", can_send_request=False)

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None
    ) -> dict[str, Any]:
        raise NoBackChannelError(method)

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: CallOptions | None = None) -> None:
        return None

    async def progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        return None


_CONNECTIONS_KEPT = 256


class SessionlessClients:
    """The clients of one fast path's sessionless requests: the born-ready connection of each envelope it read
    (its `Envelopes` keep one `Sessionless` per distinct envelope), what the SDK makes for every request, made
    once here, and only read (client info, capabilities); at most `_CONNECTIONS_KEPT`."""

    __slots__ = ("_connections",)

    def __init__(self) -> None:
        self._connections: dict[Sessionless, Connection] = {}

    def client_of(self, envelope: Sessionless, request_id: RequestId) -> ServerSession | None:
        """The client of a sessionless request as the SDK's path sees it (`ctx.session`); None when its info or
        capabilities would not type (the SDK's path then knows less of it than the fast path could say)."""
        connection = self._connections.get(envelope)
        if connection is None:
            connection = Connection.from_envelope(
                envelope.protocol_version, envelope.client_info, envelope.client_capabilities
            )
            if len(self._connections) >= _CONNECTIONS_KEPT:
                self._connections.clear()
            self._connections[envelope] = connection
        if connection.client_params is None:
            return None
        return ServerSession(cast(Any, _NoBackChannel(request_id)), connection)


_TEMPLATES_KEPT = 64


@dataclass(frozen=True, slots=True)
class SessionlessWire:
    """How a transport's SDK path writes the answer to a sessionless request: `line`, as the stdio transport
    writes a message (`server.framing.encode`); `body`, as the SDK's single-exchange HTTP entry writes its JSON
    response."""

    server: Server[Any]
    framing: Literal["line", "body"]
    _templates: dict[tuple[str, int, bool], dict[str, Any] | None] = field(
        default_factory=dict, compare=False, repr=False
    )
    """The SDK's shaping of a plain text result (`text_result`) by version, items and whether `isError` was sent,
    made once with empty texts: it reads only the server's identity, fixed when the server was made."""

    def result(self, ident: RequestId, result: types.CallToolResult, protocol_version: str) -> bytes:
        wire = sdk_compat.shape_result(self.server, "tools/call", protocol_version, result)
        return self._framed(types.JSONRPCResponse(jsonrpc="2.0", id=ident, result=wire))

    def text_result(
        self, ident: RequestId, texts: list[str], is_error_sent: bool, protocol_version: str
    ) -> bytes | None:
        """`result` of a result of text items and nothing else (`isError` false or absent), without validating
        and shaping it again: the SDK's shaping of the same result with empty texts, the texts put in (the
        shaping passes a text through as it is). None when the shaping does not have that form."""
        key = (protocol_version, len(texts), is_error_sent)
        if key not in self._templates:
            if len(self._templates) >= _TEMPLATES_KEPT:
                self._templates.clear()
            self._templates[key] = self._template(*key)
        template = self._templates[key]
        if template is None:
            return None
        content = [{**item, "text": text} for item, text in zip(template["content"], texts, strict=True)]
        message = {"jsonrpc": "2.0", "id": ident, "result": {**template, "content": content}}
        if self.framing == "body":
            return json.dumps(message, separators=(",", ":")).encode("utf-8")
        return line(message)

    def _template(self, protocol_version: str, items: int, is_error_sent: bool) -> dict[str, Any] | None:
        raw: dict[str, Any] = {"content": [{"type": "text", "text": ""}] * items}
        if is_error_sent:
            raw["isError"] = False
        result = types.CallToolResult.model_validate(raw, by_name=False)
        shaped = sdk_compat.shape_result(self.server, "tools/call", protocol_version, result)
        content = shaped.get("content")
        if type(content) is not list or len(content) != items:
            return None
        if any(type(item) is not dict or item.get("text") != "" for item in content):
            return None
        return shaped  # written at once, never changed: its `_meta` stamp is shared by the answers

    def error(self, ident: RequestId, exc: Exception) -> bytes:
        """The answer to a request whose handling failed, as the SDK's modern entries map the exception."""
        return self._framed(types.JSONRPCError(jsonrpc="2.0", id=ident, error=modern_error_data(exc)))

    def _framed(self, message: types.JSONRPCResponse | types.JSONRPCError) -> bytes:
        if self.framing == "line":
            return dump_json(message).encode("utf-8") + b"\n"
        body = message.model_dump(mode="json", by_alias=True, exclude_none=True)
        return json.dumps(body, separators=(",", ":")).encode("utf-8")


class StreamEra:
    """Whether the SDK serves the sessionless era on a stdio stream (it decides once, at the client's first
    request, and refuses the other era's requests from then on): set when a request of that era passes
    `middleware` (a `Server.middleware`, which sees every request the SDK serves); and how answers on that stream
    are written."""

    def __init__(self, server: Server[Any]) -> None:
        self.sessionless = False
        self.wire = SessionlessWire(server, "line")

    async def middleware(
        self, ctx: ServerRequestContext[Any], call_next: Callable[[ServerRequestContext[Any]], Awaitable[Any]]
    ) -> Any:
        if not self.sessionless and ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            self.sessionless = True
        return await call_next(ctx)
