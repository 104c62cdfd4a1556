"""Run in a venv of its own with langchain-mcp-adapters (and the mcp 1.x it pins), by
tests/e2e/test_langchain_shared.py.

MultiServerMCPClient with its default stdio set-up opens a new session, so starts a new `claimcheck serve --shared`,
for every tool call. Prints one JSON object: what the big call answered, and what tool_output answered next.
Usage: python langchain_shared_client.py CLAIMCHECK_PYTHON CONFIG XDG_RUNTIME_DIR
"""

import asyncio
import json
import os
import re
import sys

from langchain_mcp_adapters.client import MultiServerMCPClient


async def main() -> None:
    python, config, runtime = sys.argv[1:4]
    env = {**os.environ, "XDG_RUNTIME_DIR": runtime}
    connection = {
        "transport": "stdio",
        "command": python,
        "args": ["-m", "server", "serve", "--shared", "--config", config],
        "env": env,
    }
    client = MultiServerMCPClient({"claimcheck": connection})
    tools = {tool.name: tool for tool in await client.get_tools()}
    big = await tools["demo__big"].ainvoke({"kb": 2048})
    text = json.dumps(big) if not isinstance(big, str) else big
    handle = re.search(r"session-[0-9a-f]{32}/[0-9a-f]{32}", text)
    read = ""
    if handle:
        args = {"handle": handle.group(0), "mode": "slice", "slice": {"start": 0, "length": 200}}
        read = await tools["tool_output"].ainvoke(args)
    print(json.dumps({"big": text, "read": read if isinstance(read, str) else json.dumps(read)}))


asyncio.run(main())
