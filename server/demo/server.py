"""The bundled demo downstream: slow, big, echo, fail and crash tools over stdio or HTTP.

`claimcheck demo` puts it behind claimcheck; tests and benchmarks use it as a real subprocess.
Run: `python -m server.demo.server [stdio | http PORT | sse PORT]`.
"""

from __future__ import annotations

import logging
import os
import socket
import sys

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

__all__ = ["build_demo_server", "main"]


def build_demo_server() -> MCPServer:
    demo = MCPServer("claimcheck-demo", version="1.0")

    @demo.tool(structured_output=False)
    async def slow(seconds: float, ctx: Context) -> str:
        """Sleep `seconds`, reporting progress about every half second."""
        steps = max(1, round(seconds / 0.5))
        for step in range(steps):
            await anyio.sleep(seconds / steps)
            await ctx.report_progress(step + 1, steps, f"slow: step {step + 1} of {steps}")
        return f"slept {seconds:g} s"

    @demo.tool(structured_output=False)
    def big(kb: int) -> str:
        """Return `kb` KiB of numbered log lines (64 bytes each)."""
        lines = (kb * 1024) // 64
        return "".join(f"{i:08d} INFO demo log line with some words in it".ljust(63, ".") + "\n" for i in range(lines))

    @demo.tool(structured_output=False)
    def echo(text: str) -> str:
        """Return `text` unchanged."""
        return text

    @demo.tool(structured_output=False)
    def fail(message: str = "this tool always fails") -> str:
        """Raise an error with `message`."""
        raise ToolError(message)

    @demo.tool(structured_output=False)
    async def log(message: str, ctx: Context) -> str:
        """Send `message` as an MCP log message, then return it."""
        await ctx.info(message)
        return f"logged {message}"

    @demo.tool(structured_output=False)
    def crash() -> str:
        """Exit the server process at once (to show that claimcheck restarts it)."""
        os._exit(3)

    return demo


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    demo = build_demo_server()
    logging.getLogger("mcp").setLevel(logging.CRITICAL)  # its failing tools are the point of the demo
    kind = args[0] if args else "stdio"
    if kind == "stdio":
        demo.run("stdio")
    elif kind in ("http", "sse") and len(args) == 2:
        anyio.run(_serve_http, demo, kind, int(args[1]))
    else:
        raise SystemExit(f"usage: python -m server.demo.server [stdio | http PORT | sse PORT], not {args!r}")


async def _serve_http(demo: MCPServer, kind: str, port: int) -> None:
    """Serve on 127.0.0.1:`port` (0 picks a free port) and print the URL once listening."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sock.setblocking(False)
    app = demo.streamable_http_app() if kind == "http" else demo.sse_app()
    path = "/mcp" if kind == "http" else "/sse"
    print(f"demo server: listening on http://127.0.0.1:{sock.getsockname()[1]}{path}", file=sys.stderr, flush=True)
    await uvicorn.Server(uvicorn.Config(app, log_level="warning")).serve(sockets=[sock])


if __name__ == "__main__":
    main()
