"""The least a proxy process in Python can add to a stdio call: a bare asyncio relay.

It starts the server given on its command line and copies lines both ways, reading and writing each as
JSON (as any proxy must, to route by tool name and to remap ids): a `tools/call` of `<prefix>__<tool>` goes
to the server as `<tool>`, and the tools it lists come back prefixed. Nothing else: no time rule, no size
rule, no handles, no history, no validation. `bench/overhead.py` runs it as the `relay-floor` path.

    python bench/relay_floor.py PREFIX COMMAND [ARGS...]
"""

from __future__ import annotations

import asyncio
import json
import sys


async def relay(prefix: str, command: list[str]) -> None:
    loop = asyncio.get_running_loop()
    server = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=1 << 24
    )
    assert server.stdin is not None and server.stdout is not None
    client = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(client), sys.stdin)
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout)
    marker = f"{prefix}__"

    async def upward() -> None:
        assert server.stdin is not None
        while line := await client.readline():
            message = json.loads(line)
            params = message.get("params")
            if message.get("method") == "tools/call" and str(params.get("name", "")).startswith(marker):
                params["name"] = params["name"][len(marker) :]
            server.stdin.write(json.dumps(message).encode() + b"\n")
        server.stdin.close()

    async def downward() -> None:
        assert server.stdout is not None
        while line := await server.stdout.readline():
            message = json.loads(line)
            result = message.get("result")
            if isinstance(result, dict) and isinstance(result.get("tools"), list):
                for tool in result["tools"]:
                    tool["name"] = marker + tool["name"]
            out.write(json.dumps(message).encode() + b"\n")

    await asyncio.gather(upward(), downward())


if __name__ == "__main__":
    asyncio.run(relay(sys.argv[1], sys.argv[2:]))
