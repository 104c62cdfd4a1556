"""A tiny stdio MCP server that says which process it is, for the config reload tests.

Tools: `whoami` answers "<label> <pid> <parent pid>" (the label is its first argument); `hold {path}` answers once
`path` exists, so a test keeps a call in flight for as long as it needs.
Run: `python tests/support/servers/whoami_server.py LABEL`.
"""

from __future__ import annotations

import logging
import os
import sys
import time

import anyio
from mcp.server.mcpserver import MCPServer


def main() -> None:
    label = sys.argv[1] if len(sys.argv) > 1 else "whoami"
    server = MCPServer("whoami")

    @server.tool(structured_output=False)
    def whoami() -> str:
        """Say this server's label, process id and parent's process id."""
        return f"{label} {os.getpid()} {os.getppid()}"

    @server.tool(structured_output=False)
    async def hold(path: str) -> str:
        """Answer once `path` exists."""

        def poll() -> None:
            while not os.path.exists(path):
                time.sleep(0.05)

        await anyio.to_thread.run_sync(poll, abandon_on_cancel=True)
        return f"released by {os.path.basename(path)}"

    logging.getLogger("mcp").setLevel(logging.CRITICAL)
    server.run("stdio")


if __name__ == "__main__":
    main()
