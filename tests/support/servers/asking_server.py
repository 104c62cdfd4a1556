"""A stdio MCP server whose `confirm` tool asks the client (elicitation) 1 s after it is called.

Run: `python tests/support/servers/asking_server.py`. Used by the questions tests over real stdio.
"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

ASK_AFTER_S = 1.0

server = MCPServer("asking")


class Confirm(BaseModel):
    ok: bool


@server.tool(structured_output=False)
async def confirm(what: str, ctx: Context) -> str:
    """Wait a moment, then ask whether to go on."""
    await anyio.sleep(ASK_AFTER_S)  # by then claimcheck has handed the call off
    answer = await ctx.elicit(f"Really {what}?", Confirm)
    if answer.action == "accept":
        return f"confirmed {what}: {answer.data.ok}"
    return f"not confirmed: {answer.action}"


if __name__ == "__main__":
    server.run("stdio")
