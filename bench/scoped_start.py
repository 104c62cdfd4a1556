"""The first answer from a server scoped by owner, started on demand, against the floor of starting it directly.

One `claimcheck serve --transport http --auth-tokens-file` runs with a server behind it whose `scope` is "owner"
(server-memory from npm by default; `--server demo` for the Python demo server). Each round, interleaved:

- **cold (claimcheck)**: a principal that has not called yet connects over streamable HTTP and makes its first
  call (`read_graph`, or the demo's `echo`): claimcheck starts that owner's process, waits for it to be up and
  forwards the call. Timed from the call's request to its answer (the connection and handshake are not in it).
- **warm (claimcheck)**: the same principal's second call, to the process now running.
- **direct spawn**: the mcp SDK's client spawns the same server over stdio, initializes, lists its tools and
  makes the same call: the least any start of a new process costs. Timed from the spawn to the answer.

Run from the repo root in the project's venv:  python bench/scoped_start.py [--rounds 15] [--server memory|demo]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def server_entry(kind: str, directory: Path) -> tuple[dict[str, Any], str, dict[str, Any]]:
    """The server's config entry, its tool and the arguments of the timed call."""
    if kind == "demo":
        return {"command": sys.executable, "args": ["-m", "server.demo.server"]}, "echo", {"text": "x"}
    from tests.support.peers import MEMORY_PACKAGE, npm_server_command

    node, entry = npm_server_command(MEMORY_PACKAGE)
    memory = str(directory / "memory-${CLAIMCHECK_INSTANCE}.jsonl")
    return {"command": node, "args": [entry], "env": {"MEMORY_FILE_PATH": memory}}, "read_graph", {}


async def served(command: list[str]) -> tuple[anyio.abc.Process, str]:
    process = await anyio.open_process(command, stdin=-1, stdout=-1, stderr=-1)
    assert process.stderr is not None
    seen = b""
    async for chunk in process.stderr:
        seen += chunk
        found = re.search(rb"serving MCP over streamable HTTP at (http://\S+/mcp)", seen)
        if found:
            return process, found.group(1).decode()
    raise RuntimeError(seen.decode(errors="replace"))


async def drain(stream: Any) -> None:
    async for _ in stream:
        pass


async def claimcheck_round(url: str, token: str, tool: str, arguments: dict[str, Any]) -> tuple[float, float]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        start = time.perf_counter()
        first = await client.call_tool(f"s__{tool}", arguments)
        cold = time.perf_counter() - start
        start = time.perf_counter()
        await client.call_tool(f"s__{tool}", arguments)
        warm = time.perf_counter() - start
    assert not first.is_error, first
    return cold * 1000, warm * 1000


async def direct_round(entry: dict[str, Any], tool: str, arguments: dict[str, Any], directory: Path) -> float:
    env = {**os.environ, **{k: v.replace("${CLAIMCHECK_INSTANCE}", "direct") for k, v in entry.get("env", {}).items()}}
    params = StdioServerParameters(command=entry["command"], args=entry["args"], env=env, cwd=str(REPO))
    start = time.perf_counter()
    async with Client(params, mode="legacy") as client:
        await client.list_tools()
        await client.call_tool(tool, arguments)
        return (time.perf_counter() - start) * 1000


async def main(rounds: int, kind: str) -> None:
    with tempfile.TemporaryDirectory(prefix="claimcheck-scoped-") as tmp:
        directory = Path(tmp)
        entry, tool, arguments = server_entry(kind, directory)
        tokens = [secrets.token_hex(32) for _ in range(rounds + 1)]
        (directory / "tokens").write_text("".join(f"p{i} {t}\n" for i, t in enumerate(tokens)), encoding="utf-8")
        settings = {"asyncTimeoutSecs": 60}
        config = {"mcpServers": {"s": {**entry, "scope": "owner", "maxInstances": rounds + 2}}, "settings": settings}
        (directory / "config.json").write_text(json.dumps(config), encoding="utf-8")
        command = [sys.executable, "-m", "server", "serve", "--no-api", "--config", str(directory / "config.json")]
        command += ["--transport", "http", "--port", "0", "--auth-tokens-file", str(directory / "tokens")]
        process, url = await served(command)
        cold: list[float] = []
        warm: list[float] = []
        direct: list[float] = []
        try:
            async with anyio.create_task_group() as tg:
                assert process.stderr is not None
                tg.start_soon(drain, process.stderr)
                await claimcheck_round(url, tokens[-1], tool, arguments)  # warms claimcheck itself (not counted)
                await direct_round(entry, tool, arguments, directory)
                for index in range(rounds):
                    first, second = await claimcheck_round(url, tokens[index], tool, arguments)
                    cold.append(first)
                    warm.append(second)
                    direct.append(await direct_round(entry, tool, arguments, directory))
                tg.cancel_scope.cancel()
        finally:
            process.terminate()
            await process.wait()
    load = os.getloadavg()[0]
    print(f"server {kind}, {rounds} rounds interleaved, load {load:.2f}\n")
    print("| path | p50 ms | min ms | max ms |\n|---|---:|---:|---:|")
    for label, values in (
        ("cold: owner's first call (process started on demand)", cold),
        ("warm: owner's second call", warm),
        ("direct spawn + initialize + list + call (floor)", direct),
    ):
        print(f"| {label} | {statistics.median(values):.0f} | {min(values):.0f} | {max(values):.0f} |")
    print(f"\ncold / direct: {statistics.median(cold) / statistics.median(direct):.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--server", choices=["memory", "demo"], default="memory")
    options = parser.parse_args()
    anyio.run(main, options.rounds, options.server)
