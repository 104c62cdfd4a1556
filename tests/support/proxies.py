"""In-memory proxies over inline servers, and what the tests read from their answers."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.server import Server
from mcp.server.mcpserver import MCPServer

from server.config import parse_config
from server.downstream.connect import DownstreamSpec
from server.downstream.pool import specs_from_config
from server.proxy import Proxy
from server.upstream.surface import build_server

OWN_TOOLS = frozenset(
    {"tool_output", "wait_for_tool_output", "list_tool_outputs", "cancel_tool_output", "Read", "Grep"}
)


def proxied_names(tools: list[types.Tool]) -> list[str]:
    """The sorted names of the proxied tools, without claimcheck's own."""
    return sorted(tool.name for tool in tools if tool.name not in OWN_TOOLS)


def text_of(result: types.CallToolResult) -> str:
    """All text items of a result, joined by newlines."""
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


@asynccontextmanager
async def running_proxy(
    servers: Mapping[str, Server[Any] | MCPServer | None],
    *,
    fields: Mapping[str, Mapping[str, Any]] | None = None,
    settings: Mapping[str, Any] | None = None,
    connect_timeout: float = 10,
) -> AsyncIterator[Proxy]:
    """A running `Proxy` whose downstreams are in-process servers (None: a server that cannot start)."""
    fields = fields or {}
    data = {
        "mcpServers": {name: {"command": "in-process", **fields.get(name, {})} for name in servers},
        "settings": dict(settings or {}),
    }
    config = parse_config(data)

    def target(name: str) -> Any:
        server = servers[name]
        if server is None:
            raise ConnectionRefusedError(f"{name} is down on purpose")
        return server

    specs = [
        DownstreamSpec(spec.name, spec.config, target=functools.partial(target, spec.name))
        for spec in specs_from_config(config)
    ]
    async with Proxy.start(config, specs=specs, connect_timeout=connect_timeout) as proxy:
        yield proxy


@asynccontextmanager
async def proxied(
    servers: Mapping[str, Server[Any] | MCPServer | None],
    *,
    mode: str = "legacy",
    fields: Mapping[str, Mapping[str, Any]] | None = None,
    settings: Mapping[str, Any] | None = None,
    **client_options: Any,
) -> AsyncIterator[Client]:
    """An MCP client connected in memory to claimcheck in front of `servers`."""
    async with (
        running_proxy(servers, fields=fields, settings=settings) as proxy,
        Client(build_server(proxy), mode=mode, **client_options) as client,
    ):
        yield client
