"""FastMCP's proxy over an `mcpServers` config file, served over stdio (the FastMCP path of bench/startup.py).

Runs under bench/.venv-fastmcp (see bench/setup_fastmcp.sh), never under the project's venv.
Usage: bench/.venv-fastmcp/bin/python bench/fastmcp_config_proxy.py CONFIG.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from fastmcp.server import create_proxy


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit("usage: fastmcp_config_proxy.py CONFIG.json")
    config = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    proxy = create_proxy({"mcpServers": config["mcpServers"]}, name="fastmcp-bench-proxy")
    proxy.run("stdio", show_banner=False)


if __name__ == "__main__":
    main(sys.argv[1:])
