"""A stdio MCP server that asks its client for roots (`roots/list`), in a call and outside any.

Run: `python tests/support/servers/roots_server.py`. Used by the roots tests over real stdio.
- tool `roots` (`after`: seconds to wait first): asks during the call, returns the URIs or the error;
- on `notifications/roots/list_changed` it asks again outside any request, as servers that follow
  the client's roots do; tool `heard` tells how many such notifications came and what the last asking got;
- tool `count` adds one to this process's counter and says it, with the process id and `$INSTANCE` (a server
  that keeps per-client state).
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

warnings.simplefilter("ignore", MCPDeprecationWarning)  # roots are deprecated at 2026-07-28 only

_TOOLS = [
    types.Tool(
        name="roots",
        description="Ask the client for its roots",
        input_schema={"type": "object", "properties": {"after": {"type": "number"}}},
    ),
    types.Tool(name="heard", description="What the server heard of roots changes", input_schema={"type": "object"}),
    types.Tool(name="count", description="Count in this process", input_schema={"type": "object"}),
]
heard: dict[str, Any] = {"changes": 0, "roots": None, "count": 0}


async def _ask(ctx: ServerRequestContext[Any]) -> str:
    try:
        result = await ctx.session.list_roots()
    except MCPError as exc:
        return f"error {exc.error.code}: {exc.error.message}"
    return " ".join(f"{root.uri}={root.name}" for root in result.roots) or "(no roots)"


async def list_tools(
    ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
) -> types.ListToolsResult:
    return types.ListToolsResult(tools=_TOOLS)


async def call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "roots":
        await anyio.sleep(float((params.arguments or {}).get("after", 0)))  # by then claimcheck has handed it off
        text = await _ask(ctx)
    elif params.name == "count":
        heard["count"] += 1
        text = f"count={heard['count']} pid={os.getpid()} instance={os.environ.get('INSTANCE', '')}"
    else:
        text = f"changes={heard['changes']} roots={heard['roots']}"
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def roots_changed(ctx: ServerRequestContext[Any], params: Any) -> None:
    heard["changes"] += 1
    heard["roots"] = await _ask(ctx)


server: Server[Any] = Server("roots", on_list_tools=list_tools, on_call_tool=call_tool)
server.add_notification_handler("notifications/roots/list_changed", types.NotificationParams, roots_changed)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
