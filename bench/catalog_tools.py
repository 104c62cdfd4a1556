"""Record the tool definitions of the real servers find_tools is scored against, into bench/catalog_tools.json.

The six servers: server-everything, server-filesystem and server-memory (npm, installed by tests/support/peers.py),
mcp-server-git, mcp-server-fetch and mcp-server-time (PyPI, in the venv made by bench/setup_catalog.sh). Each is
started directly (no claimcheck) and its `tools/list` kept as it answered. tests/upstream/test_catalog_needs.py
ranks bench/catalog_needs.json over these definitions with claimcheck's own index, offline, so the scores (tuned
and held-out) can be checked on any machine without the servers.

Run from the repo root with the project's venv:
    bash bench/setup_catalog.sh && python bench/catalog_tools.py
"""

from __future__ import annotations

import json
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPDeprecationWarning

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.catalog import servers  # noqa: E402
from tests.support import peers  # noqa: E402

OUT = Path(__file__).resolve().parent / "catalog_tools.json"


async def _never(*args: Any) -> Any:  # declared only, so that a server lists the tools it offers such clients
    raise NotImplementedError


async def listed(entry: dict[str, Any]) -> list[dict[str, Any]]:
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=entry.get("env"), cwd=REPO)
    callbacks = {"sampling_callback": _never, "elicitation_callback": _never, "list_roots_callback": _never}
    with anyio.fail_after(120), warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        async with Client(params, mode="legacy", **callbacks) as client:
            tools = (await client.list_tools()).tools
    return [tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in tools]


async def main() -> None:
    py_peers = REPO / ".cache" / "py-peers"
    chosen = servers(py_peers, True)
    chosen["time"] = {"command": str(py_peers / "bin" / "mcp-server-time"), "args": []}
    recorded = {
        "about": "tools/list of each server as it answered, recorded by bench/catalog_tools.py: server-everything, "
        f"server-filesystem, server-memory {peers.REFERENCE_SERVERS_VERSION} (npm), mcp-server-git, "
        "mcp-server-fetch, mcp-server-time 2026.10.19/2026.10.24 (PyPI); the client declared sampling, elicitation "
        "and roots",
        "servers": {name: await listed(entry) for name, entry in chosen.items()},
    }
    OUT.write_text(json.dumps(recorded, indent=1) + "\n", encoding="utf-8")
    print({name: len(tools) for name, tools in recorded["servers"].items()})


if __name__ == "__main__":
    with tempfile.TemporaryDirectory():
        anyio.run(main)
