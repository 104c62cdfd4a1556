"""Shared test helpers: in-memory proxies over inline servers, and real claimcheck processes."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client
from mcp.server import Server
from mcp.server.mcpserver import MCPServer

from server.config import parse_config
from server.downstream.connect import DownstreamSpec
from server.downstream.pool import specs_from_config
from server.proxy import Proxy
from server.upstream.surface import build_server

PYTHON = sys.executable
PROC = Path(os.environ.get("CLAIMCHECK_TEST_PROC") or "/proc")
"""Where the tests see processes: /proc, or in the macOS simulation (tests/test_macos_simulated.py), where /proc is
hidden from claimcheck, the real one mounted elsewhere for the harness only."""
OWN_TOOLS = frozenset(
    {"tool_output", "wait_for_tool_output", "list_tool_outputs", "cancel_tool_output", "Read", "Grep"}
)


def proxied_names(tools: list[types.Tool]) -> list[str]:
    """The sorted names of the proxied tools, without claimcheck's own."""
    return sorted(tool.name for tool in tools if tool.name not in OWN_TOOLS)


def text_of(result: types.CallToolResult) -> str:
    """All text items of a result, joined by newlines."""
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


@asynccontextmanager
async def running_proxy(
    servers: Mapping[str, Server[Any] | MCPServer | None],
    *,
    fields: Mapping[str, Mapping[str, Any]] | None = None,
    settings: Mapping[str, Any] | None = None,
    connect_timeout: float = 10,
) -> AsyncIterator[Proxy]:
    """A running `Proxy` whose downstreams are in-process servers (None: a server that cannot start)."""
    fields = fields or {}
    data = {
        "mcpServers": {name: {"command": "in-process", **fields.get(name, {})} for name in servers},
        "settings": dict(settings or {}),
    }
    config = parse_config(data)

    def target(name: str) -> Any:
        server = servers[name]
        if server is None:
            raise ConnectionRefusedError(f"{name} is down on purpose")
        return server

    specs = [
        DownstreamSpec(spec.name, spec.config, target=lambda name=spec.name: target(name))
        for spec in specs_from_config(config)
    ]
    proxy = Proxy(config, specs=specs, connect_timeout=connect_timeout)
    async with proxy.running():
        yield proxy


@asynccontextmanager
async def proxied(
    servers: Mapping[str, Server[Any] | MCPServer | None],
    *,
    mode: str = "legacy",
    fields: Mapping[str, Mapping[str, Any]] | None = None,
    settings: Mapping[str, Any] | None = None,
    **client_options: Any,
) -> AsyncIterator[Client]:
    """An MCP client connected in memory to claimcheck in front of `servers`."""
    async with (
        running_proxy(servers, fields=fields, settings=settings) as proxy,
        Client(build_server(proxy), mode=mode, **client_options) as client,
    ):
        yield client


def write_config(directory: Path, data: Mapping[str, Any]) -> Path:
    """The config file of a real claimcheck process. Unless the test sets `startupWaitSecs`, the first
    listing waits for the servers however slowly a loaded machine starts them: only tests/downstream/test_startup.py
    is about that wait."""
    settings = {"startupWaitSecs": 120, **dict(data.get("settings") or {})}
    path = directory / "claimcheck.json"
    path.write_text(json.dumps({**data, "settings": settings}), encoding="utf-8")
    return path


def demo_server_entry(*extra: str) -> dict[str, Any]:
    """A config entry that runs the bundled demo downstream over stdio."""
    return {"command": PYTHON, "args": ["-m", "server.demo.server", *extra]}


@asynccontextmanager
async def announced_url(command: list[str], pattern: str) -> AsyncIterator[str]:
    """Start `command`, wait for its stderr to announce a URL matching `pattern`, stop it afterwards."""
    process = await anyio.open_process(command, stderr=-1, stdout=-1, stdin=-1)
    try:
        assert process.stderr is not None
        seen = b""
        with anyio.fail_after(30):
            async for chunk in process.stderr:
                seen += chunk
                match = re.search(pattern.encode(), seen)
                if match:
                    break
            else:
                raise AssertionError(f"{command} exited before listening: {seen.decode(errors='replace')}")
        async with anyio.create_task_group() as tg:
            tg.start_soon(_drain, process.stderr)
            if process.stdout is not None:
                tg.start_soon(_drain, process.stdout)
            yield match.group(1).decode()
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await _terminate(process)


async def _drain(stream: anyio.abc.ByteReceiveStream) -> None:
    async for _ in stream:
        pass


async def _terminate(process: anyio.abc.Process) -> None:
    if process.returncode is None:
        process.terminate()
        with anyio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
    for stream in (process.stdin, process.stdout, process.stderr):
        if stream is not None:
            await stream.aclose()


API_LINE = r"status API at (http://127\.0\.0\.1:\d+/) \S+ dashboard: [^\n]* in (\S+\.json)\)"
"""claimcheck's start-up line for its status API: (its URL, the discovery file that holds its token)."""


def discovered(path: str | bytes) -> dict[str, Any]:
    """The discovery file named on a start-up line (`API_LINE`'s second group): `url`, `token`, `dashboard` (the
    address with the token) and the rest."""
    text = Path(os.fsdecode(path)).read_text(encoding="utf-8")
    info: dict[str, Any] = json.loads(text)
    return info
