"""FastMCP's proxy in front of one stdio downstream, served over streamable HTTP (bench/http_load.py).

Runs under bench/.venv-fastmcp (see bench/setup_fastmcp.sh), never under the project's venv.
Usage: bench/.venv-fastmcp/bin/python bench/fastmcp_http_proxy.py PORT COMMAND [ARG ...]
"""

from __future__ import annotations

import sys

from fastmcp.server import create_proxy


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        raise SystemExit("usage: fastmcp_http_proxy.py PORT COMMAND [ARG ...]")
    config = {"mcpServers": {"demo": {"command": argv[1], "args": argv[2:]}}}
    proxy = create_proxy(config, name="fastmcp-bench-proxy")
    proxy.run("http", host="127.0.0.1", port=int(argv[0]), path="/mcp", show_banner=False, log_level="warning")


if __name__ == "__main__":
    main(sys.argv[1:])
