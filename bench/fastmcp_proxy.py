"""FastMCP's proxy in front of one stdio downstream, served over stdio (path (c) of bench/overhead.py).

Runs under bench/.venv-fastmcp (see bench/setup_fastmcp.sh), never under the project's venv.
Usage: bench/.venv-fastmcp/bin/python bench/fastmcp_proxy.py COMMAND [ARG ...] | --url URL
e.g.   bench/.venv-fastmcp/bin/python bench/fastmcp_proxy.py /work/main/.venv/bin/python -m server.demo.server
"""

from __future__ import annotations

import sys

from fastmcp.server import create_proxy


def main(argv: list[str]) -> None:
    if not argv:
        raise SystemExit("usage: fastmcp_proxy.py COMMAND [ARG ...]")
    # A single-server mcpServers config: FastMCP keeps the downstream's tool names unprefixed.
    if argv[0] == "--url":  # an HTTP downstream
        config = {"mcpServers": {"demo": {"url": argv[1]}}}
    else:
        config = {"mcpServers": {"demo": {"command": argv[0], "args": argv[1:]}}}
    proxy = create_proxy(config, name="fastmcp-bench-proxy")
    proxy.run("stdio", show_banner=False)


if __name__ == "__main__":
    main(sys.argv[1:])
