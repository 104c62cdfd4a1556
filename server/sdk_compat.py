"""Every private part of the mcp SDK claimcheck uses, in one place: what it is, why, and what would replace it.

mcp is pinned to the minor release these were read from (pyproject.toml); tests/test_compat_canary.py fails,
naming the entry, when one of them moves or changes shape, so a new SDK release is checked here first. No
other module touches an underscore name of the SDK.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
import mcp.client.sse
import mcp_types as types
from mcp.server.runner import ServerRunner
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared._httpx_utils import McpHttpClientFactory
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher, _JSONRPCDispatchContext
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mcp import Client
    from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
    from mcp.server.connection import Connection
    from mcp.server.lowlevel.server import Server
    from starlette.requests import Request

__all__ = [
    "SSE_REFUSED",
    "SSE_UNPARSED",
    "DispatchContext",
    "HttpClientFactory",
    "connection_of",
    "content_type_ok",
    "dispatch_context",
    "in_flight",
    "is_validation_dump",
    "lift_legacy_sse_event_cap",
    "modern_json_window",
    "quiet_unreadable_sse_posts",
    "release_request_stream",
    "request_stream_taken",
    "send_raw_request",
    "session_owner",
    "set_initialization_options",
    "shape_result",
    "take_request_stream",
    "transport_of",
    "validate_request",
    "wrap_initialization_options",
    "write_message",
]

HttpClientFactory = McpHttpClientFactory
"""The type of the SDK clients' `httpx_client_factory` argument (mcp.shared._httpx_utils). Public API that
would replace it: the factory's Protocol exported from mcp.client."""

DispatchContext = _JSONRPCDispatchContext
"""The request-scoped channel the dispatcher makes for each request it reads. The HTTP fast path makes one for
a request it answers itself, so the request's log messages and questions go where the SDK would send them.
Would be replaced by: a public constructor of a request context for a transport that reads its own requests."""

_Context = TypeVar("_Context", bound=DispatchContext[TransportContext])


def dispatch_context(
    kind: type[_Context],
    dispatcher: JSONRPCDispatcher[Any],
    request_id: types.RequestId,
    metadata: ServerMessageMetadata,
    progress_token: types.RequestId | None = None,
) -> _Context:
    """A `DispatchContext` (or subclass `kind`) for request `request_id`, read by claimcheck instead of the
    dispatcher: its notifications and requests go out through `dispatcher` as the dispatcher's own would, and
    progress it reports goes out under `progress_token` (the request's, when it sent one). Its `_dispatcher`,
    `_request_id` and `_progress_token` fields are the private part."""
    return kind(
        transport=TransportContext(kind="jsonrpc", can_send_request=True),
        _dispatcher=dispatcher,
        _request_id=request_id,
        message_metadata=metadata,
        _progress_token=progress_token,
    )


def connection_of(session: Any) -> Connection | None:
    """The handshake-era connection of a `ServerSession` (None for a 2026-07-28 request, which has none). It keys
    per-connection state (claimcheck's session, subscriptions). Would be replaced by: a public
    `ServerSession.connection`."""
    connection: Connection | None = getattr(session, "_connection", None)
    return connection


def set_initialization_options(server: Server[Any], *args: Any, **kwargs: Any) -> None:
    """Make `server.create_initialization_options()` use these arguments (notification options, experimental
    capabilities): the HTTP session manager calls it without any. Would be replaced by: initialization options
    passed to the session manager."""
    make: Callable[..., Any] = server.create_initialization_options
    server.create_initialization_options = functools.partial(make, *args, **kwargs)  # type: ignore[method-assign]  # the one way in


def wrap_initialization_options(server: Server[Any], wrap: Callable[[Any], Any]) -> None:
    """Make `server.create_initialization_options(...)` pass its result through `wrap` (see above)."""
    make: Callable[..., Any] = server.create_initialization_options

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        return wrap(make(*args, **kwargs))

    server.create_initialization_options = wrapped  # type: ignore[method-assign]  # the one way in


async def send_raw_request(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """Send a request through a client's dispatcher and get its result unvalidated. The client validates every
    `tools/call` answer as a `CallToolResult`, so a task-augmented call (answered by a `CreateTaskResult`)
    cannot go through `call_tool`. Would be replaced by: task-augmented calls in `Client`."""
    result: dict[str, Any] = await client.session._dispatcher.send_raw_request(method, params)
    return result


def lift_legacy_sse_event_cap() -> None:
    """Remove the legacy SSE client's 1 MiB cap on one event (a tool result is one event, so every large result
    over SSE would end the connection). The cap is an argument of a module-level helper the client calls, with
    no option to lift it; the helper is rebound with `max_event_size=None` (idempotent). Would be replaced by:
    `sse_client(max_sse_event_size=None)`, as `streamable_http_client` has."""
    module: Any = mcp.client.sse
    helper = module.sse_within_origin
    if not (isinstance(helper, functools.partial) and helper.keywords.get("max_event_size", 0) is None):
        module.sse_within_origin = functools.partial(helper, max_event_size=None)


def shape_result(server: Server[Any], method: str, version: str, result: Any) -> dict[str, Any]:
    """A handler's result in its wire form, as the SDK's runner shapes it for the request's protocol version (the
    server's cache hints, the version's serializer, and at 2026-07-28 the result type and the server's identity
    stamp): the fast paths answer a sessionless request byte for byte as the SDK's path. The shaping reads only
    the server, so the runner is made without a connection. Would be replaced by: a public way to serialize a
    result as a server's runner does."""
    runner: Any = ServerRunner(server, cast(Any, None), None)
    shaped: dict[str, Any] = runner._serialize(method, version, result)
    return shaped


def modern_json_window() -> float:
    """How long the SDK's single-exchange HTTP entry (2026-07-28) waits for a silent handler before it answers
    on an SSE stream with keep-alive pings instead of one JSON body (`_SSE_PING_INTERVAL` of its private module).
    The HTTP fast path takes only calls it answers well within it. Would be replaced by: a public setting."""
    from mcp.server import _streamable_http_modern

    window: float = _streamable_http_modern._SSE_PING_INTERVAL
    return window


# The streamable HTTP session manager and transport (the HTTP fast path answers some requests itself, inside
# the SDK's own session). Would be replaced by: a public hook to answer a request in a session.


def transport_of(manager: StreamableHTTPSessionManager, session_id: str) -> StreamableHTTPServerTransport | None:
    """The transport of a live session, by its id."""
    instances: dict[str, StreamableHTTPServerTransport] = manager._server_instances
    return instances.get(session_id)


def session_owner(manager: StreamableHTTPSessionManager, session_id: str) -> AuthorizationContext | None:
    """The authorization context that opened a session (None: none), which every request to it must match."""
    return manager._session_owners.get(session_id)


async def validate_request(transport: StreamableHTTPServerTransport, request: Request) -> bool:
    """Whether the transport's security settings (Host, Origin) let a POST in."""
    return await transport._security.validate_request(request, is_post=True) is None


def content_type_ok(transport: StreamableHTTPServerTransport, request: Request) -> bool:
    return bool(transport._check_content_type(request))


def request_stream_taken(transport: StreamableHTTPServerTransport, request_id: str) -> bool:
    """Whether a request of this id is already open on the transport."""
    return request_id in transport._request_streams


def take_request_stream(transport: StreamableHTTPServerTransport, request_id: str, stream: Any) -> None:
    """Register `stream` as the one the transport's router sends this request's messages to (the router pops
    it when the request's answer passes)."""
    transport._request_streams[request_id] = cast(Any, (stream, stream))


async def mint_priming_event(
    transport: StreamableHTTPServerTransport, request_id: str, protocol_version: str
) -> dict[str, Any] | None:
    """The priming event the SDK begins a request's SSE stream with (its cursor stored first, so a client can resume
    after it), or None where the SDK sends none (no event store, a client before 2025-11-25)."""
    event = await transport._mint_priming_event(request_id, protocol_version)
    return None if event is None else dict(event)


def release_request_stream(transport: StreamableHTTPServerTransport, request_id: str, stream: Any) -> None:
    """Take `stream` out of the transport's table, if it is still the one there for this request."""
    streams = transport._request_streams
    if cast(Any, streams.get(request_id, (None,)))[0] is stream:
        streams.pop(request_id, None)


@contextmanager
def in_flight(transport: StreamableHTTPServerTransport) -> Iterator[None]:
    """A request in flight holds the session open, as in the SDK's `handle_request` (its idle countdown)."""
    idle = transport.idle_scope
    timeout = transport._idle_timeout
    if idle is None or timeout is None:
        yield
        return
    transport._requests_in_flight += 1
    idle.deadline = float("inf")
    try:
        yield
    finally:
        transport._requests_in_flight -= 1
        if not transport._requests_in_flight:
            idle.deadline = anyio.current_time() + timeout


async def write_message(dispatcher: JSONRPCDispatcher[Any], message: types.JSONRPCMessage) -> None:
    """Write one message on the dispatcher's stream, in order with what it writes itself."""
    await dispatcher._write(message)


_VALIDATION_DUMP = "Validation error: "


SSE_UNPARSED = b"Could not parse message"


def is_validation_dump(body: bytes) -> bool:
    """Whether `body` is how the SDK's transports answer (400) a POST whose body is no JSON-RPC message: over
    streamable HTTP, -32602 with pydantic's whole report (two kilobytes for `{"hello": 1}`) under a session id it
    has already dropped; over SSE, `SSE_UNPARSED` (and no word of why). claimcheck answers such a body in one line
    instead (`server.upstream.gate`). Would be replaced by: the SDK answering -32600 with one line."""
    if body == SSE_UNPARSED:
        return True
    if b"-32602" not in body[:256]:
        return False
    try:
        error = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        return False
    return error.get("code") == types.INVALID_PARAMS and str(error.get("message", "")).startswith(_VALIDATION_DUMP)


SSE_REFUSED = "Request validation failed"
"""What the SDK's `SseServerTransport.connect_sse` raises (as a ValueError) after it has answered a request its
transport security refused (403 for another site's Origin, 421 for another Host). Would be replaced by: the SDK
returning after such an answer instead of raising."""


def quiet_unreadable_sse_posts() -> None:
    """The SDK's SSE transport logs a POST body that is no JSON-RPC message with `logger.exception` on the
    `mcp.server.sse` logger ("Failed to parse message": a traceback and a pydantic dump at ERROR), though it answers
    the client 400 for it: a client's mistake, logged in one line at WARNING. Would be replaced by: the SDK logging it
    so itself."""
    sdk_logger = logging.getLogger("mcp.server.sse")
    if _unreadable_post not in sdk_logger.filters:
        sdk_logger.addFilter(_unreadable_post)


def _unreadable_post(record: logging.LogRecord) -> bool:
    if record.msg == "Failed to parse message":
        record.msg = "an SSE client posted a body that is no JSON-RPC message; it was answered 400"
        record.exc_info, record.exc_text = None, None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
    return True
