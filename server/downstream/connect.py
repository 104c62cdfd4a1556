"""Connection set-up for one downstream server: what to connect to (its spec), the transport its URL names, and
which one a URL of no `type` means (`Reach`)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias
from urllib.parse import urlsplit

import httpx2
import mcp_types as types
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server

from server import sdk_compat, tracing
from server.config import ServerConfig
from server.downstream.http_spool import SpoolingTransport, spooling_client_factory
from server.downstream.refusal import REFUSED, Refusals, with_refusals
from server.downstream.spool import SpoolPolicy
from server.downstream.stdio import StdioProcess

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = [
    "NO_ENDPOINT",
    "TRANSPORTS",
    "DownstreamSpec",
    "Opened",
    "Reach",
    "Target",
    "Transport",
    "sse_transport",
    "stdio_transport",
    "streamable_http_transport",
]

sdk_compat.lift_legacy_sse_event_cap()  # a tool result is one event: over 1 MiB it would end the connection

Target: TypeAlias = "Server[Any] | MCPServer | AbstractAsyncContextManager[Any] | str"
"""An in-process server (the SDK's low-level or high-level one), a transport, or a URL: what the client takes."""


@dataclass(frozen=True, slots=True)
class DownstreamSpec:
    """A configured server; `target`, when given, replaces what the config says to connect to, and
    `connect_timeout` the pool's (tests)."""

    name: str
    config: ServerConfig
    target: Callable[[], Target] | None = None
    connect_timeout: float | None = None


@dataclass(frozen=True, slots=True)
class Opened:
    """A way in to one server for one connection attempt: what the SDK's `Client` connects through, and for a
    stdio server its process (whose raw channel the fast path writes plain calls to)."""

    target: Target
    process: StdioProcess | None = None
    refusals: Refusals | None = None  # a server over HTTP: the 401/403 it answered, which its failure names


LogSink = Callable[[types.LoggingMessageNotificationParams], Awaitable[None]]


class Transport(Protocol):
    """How claimcheck reaches one kind of server (`ServerConfig.kind`). `spool`: where long messages go (None keeps
    them whole); `on_log`: the server's log messages while a raw request waits; `stack` closes what it opens.
    Adding a transport: one of these, registered in `TRANSPORTS`, and its name in `ServerConfig.transport`."""

    async def __call__(
        self, config: ServerConfig, spool: SpoolPolicy | None, on_log: LogSink, stack: AsyncExitStack
    ) -> Opened: ...


async def stdio_transport(
    config: ServerConfig, spool: SpoolPolicy | None, on_log: LogSink, stack: AsyncExitStack
) -> Opened:
    assert config.command is not None
    process = StdioProcess(config.command, list(config.args), dict(config.env), config.cwd, spool=spool, on_log=on_log)
    return Opened(process.connect(), process)


async def sse_transport(
    config: ServerConfig, spool: SpoolPolicy | None, on_log: LogSink, stack: AsyncExitStack
) -> Opened:
    """Legacy SSE (`/sse` + `/messages/`); its events are spooled by the HTTP client's transport."""
    assert config.url is not None
    headers = dict(config.headers) or None
    refusals = Refusals()
    factory = with_refusals(None if spool is None else spooling_client_factory(spool), refusals)
    return Opened(sse_client(config.url, headers=headers, httpx_client_factory=factory), refusals=refusals)


async def streamable_http_transport(
    config: ServerConfig, spool: SpoolPolicy | None, on_log: LogSink, stack: AsyncExitStack
) -> Opened:
    """Streamable HTTP; JSON bodies and SSE events are spooled by the HTTP client's transport."""
    assert config.url is not None
    transport = SpoolingTransport(spool) if spool is not None else None
    refusals = Refusals()
    http = await stack.enter_async_context(
        httpx2.AsyncClient(
            headers=dict(config.headers),
            timeout=httpx2.Timeout(30.0, read=max(300.0, config.timeout)),
            transport=transport,
            event_hooks={"request": [_trace_header] if tracing.ENABLED else [], "response": [refusals.hook]},
        )
    )
    return Opened(streamable_http_client(config.url, http_client=http, max_sse_event_size=None), refusals=refusals)


_TRACED_BODY_BYTES = 1 << 20
"""The largest request body whose `_meta.traceparent` is copied into a header (a bigger one keeps it in `_meta`)."""


async def _trace_header(request: httpx2.Request) -> None:
    """Carry the trace on in the `traceparent` header too, as the SDK's client wrote it in the request's `_meta`
    (the request is sent from a task of the SDK's, where claimcheck's span is no longer current)."""
    try:
        body = request.content
        message = json.loads(body) if 0 < len(body) <= _TRACED_BODY_BYTES else None
    except (httpx2.RequestNotRead, ValueError):
        return  # a streamed body, or not JSON
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict):
        for name in ("traceparent", "tracestate"):
            if isinstance(meta.get(name), str) and len(meta[name]) <= 512:
                request.headers[name] = meta[name]


TRANSPORTS: dict[str, Transport] = {
    "stdio": stdio_transport,
    "sse": sse_transport,
    "streamable-http": streamable_http_transport,
}


NO_ENDPOINT = "nothing serves MCP at this path"
"""How a server's URL answered 404 is said (`doctor` tells this from the rest by it)."""


@dataclass(slots=True)
class Reach:
    """Which transport reaches a server: its config's kind, or SSE for a `url` of no `type` (how Cursor and Windsurf
    write an SSE server too) that was refused as streamable HTTP with the answer the transports spec says an SSE
    server gives (4xx to the POST of `initialize`). Once SSE has failed as well, the next attempt is streamable HTTP
    again, and the error says both were tried. A `url` with a `type` that got a 4xx: the error says how to ask for
    the other."""

    config: ServerConfig
    kind: str = field(init=False)
    _http_error: str | None = None  # why it failed as streamable HTTP, while SSE is tried

    def __post_init__(self) -> None:
        self.kind = self.config.kind

    def after_failure(self, error: str, status: int | None) -> tuple[bool, str]:
        """A connection attempt that never came up failed with `error` (`status`: the HTTP status the server
        answered, if any): whether to try again at once over `kind`, and the error to report."""
        if self.config.url is None:
            return False, error
        url, path = self.config.url, urlsplit(self.config.url).path
        if status == 404:  # the SDK's client says "Not Found (JSON-RPC error -32601)"
            error = f"{url}: HTTP 404 Not Found ({NO_ENDPOINT})"
        elif status is not None and status >= 500:  # "Server returned an error response (JSON-RPC error -32603)"
            error = f"{url}: HTTP {status}: the server failed to answer `initialize` (its log says why)"
        answered_4xx = status is not None and 400 <= status < 500 and status not in REFUSED
        if self.config.transport is not None:
            if answered_4xx:  # perhaps the other transport: say how to ask for it
                other, kind = ("streamable HTTP", "http") if self.config.transport == "sse" else ("SSE", "sse")
                return False, f'{error} (if it serves {other}, its "type" is "{kind}"; or leave "type" out)'
            return False, error
        if self.kind == "sse":
            self.kind = "streamable-http"
            where = "; its URL has no path: a server answers at one, such as /mcp or /sse" if path in ("", "/") else ""
            if status == 404 and self._http_error == error:
                return False, f"{url}: HTTP 404 Not Found over streamable HTTP and SSE ({NO_ENDPOINT}){where}"
            return False, f"{self._http_error} (tried over SSE too: {error.removeprefix(f'{url}: ')}){where}"
        if not answered_4xx:
            return False, error
        self.kind, self._http_error = "sse", error
        return True, error
