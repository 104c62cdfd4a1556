"""A stdio MCP server that is slow to start, for the start-up tests and benchmarks.

`python slow_start_server.py hang` never answers anything (it holds stdin open and sleeps);
`python slow_start_server.py delay SECS NAME` waits SECS before it serves one tool, `NAME`, which
answers "NAME is up".
"""

from __future__ import annotations

import sys
import time

from mcp.server.mcpserver import MCPServer


def main(argv: list[str]) -> None:
    if argv[:1] == ["hang"]:
        time.sleep(3600)
        return
    _, seconds, name = argv
    time.sleep(float(seconds))  # the client's initialize waits in the pipe meanwhile
    server = MCPServer("slow-start")

    def tool() -> str:
        return f"{name} is up"

    server.add_tool(tool, name=name, description=f"answers once the server has started ({name})")
    server.run("stdio")


if __name__ == "__main__":
    main(sys.argv[1:])
