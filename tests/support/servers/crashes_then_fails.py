"""A stdio server that exits on its `crash` tool and then cannot start again (the flag file named by argv[1] says
it crashed): a server that is down for good after its first crash."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer


def main(flag: Path) -> None:
    if flag.exists():
        print("fatal: the database moved away", file=sys.stderr)
        sys.exit(1)
    server = MCPServer("crashes-then-fails")

    def hello() -> str:
        return "hello"

    def crash() -> str:
        flag.write_text("crashed", encoding="utf-8")
        print("dying now", file=sys.stderr, flush=True)
        os._exit(3)

    server.add_tool(hello, name="hello", description="says hello")
    server.add_tool(crash, name="crash", description="exits with status 3")
    server.run("stdio")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
