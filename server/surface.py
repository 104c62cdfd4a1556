"""claimcheck's MCP surface: the low-level `Server` clients talk to.

This is the one place where errors become isError results.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
from mcp.server import NotificationOptions, Server
from mcp.server.context import ServerRequestContext
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPDeprecationWarning

from server.errors import ClaimcheckError
from server.proxy import Proxy
from server.relay import RequestRelay

__all__ = ["VERSION", "build_server", "error_result", "initialization_options"]

VERSION = "0.1.0"
_INSTRUCTIONS = (
    "claimcheck forwards the tools of several MCP servers, each named <server>__<tool>. "
    "Errors of a downstream server come back as error results naming the server and tool."
)


def error_result(text: str) -> types.CallToolResult:
    """The isError result every failure inside claimcheck becomes."""
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def build_server(proxy: Proxy) -> Server[Proxy]:
    """A server whose handlers forward to `proxy`'s downstreams."""

    @asynccontextmanager
    async def lifespan(_: Server[Proxy]) -> AsyncIterator[Proxy]:
        yield proxy

    async def list_tools(
        ctx: ServerRequestContext[Proxy], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        await proxy.pool.settled()
        return types.ListToolsResult(tools=proxy.pool.tools())

    async def call_tool(ctx: ServerRequestContext[Proxy], params: types.CallToolRequestParams) -> types.CallToolResult:
        await proxy.pool.settled()
        route = proxy.pool.route(params.name)
        if route is None:
            return error_result(f'Unknown tool "{params.name}". Call tools/list to see the tools claimcheck offers.')
        try:
            result = await route.downstream.call(route.tool, params.arguments, RequestRelay(ctx, proxy.log_level))
        except ClaimcheckError as exc:
            return error_result(str(exc))
        if result.is_error:
            note = f'[claimcheck] the error above came from tool "{route.tool}" of server "{route.downstream.name}".'
            return result.model_copy(update={"content": [*result.content, types.TextContent(type="text", text=note)]})
        return result

    async def set_logging_level(
        ctx: ServerRequestContext[Proxy], params: types.SetLevelRequestParams
    ) -> types.EmptyResult:
        proxy.log_level = params.level
        return types.EmptyResult()

    async def on_initialized(ctx: ServerRequestContext[Proxy], params: Any) -> None:
        proxy.add_session(ctx.session)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)  # logging is deprecated at 2026-07-28, not before
        server: Server[Proxy] = Server(
            "claimcheck",
            version=VERSION,
            instructions=_INSTRUCTIONS,
            lifespan=lifespan,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_set_logging_level=set_logging_level,
            on_subscriptions_listen=ListenHandler(proxy.bus),
        )
    server.add_notification_handler("notifications/initialized", types.NotificationParams, on_initialized)
    # The HTTP session manager calls create_initialization_options() without arguments.
    server.create_initialization_options = functools.partial(  # type: ignore[method-assign]  # see above
        server.create_initialization_options, NotificationOptions(tools_changed=True)
    )
    return server


def initialization_options(server: Server[Proxy]) -> InitializationOptions:
    return server.create_initialization_options()
