"""claimcheck behind claimcheck behaves like one claimcheck: one set of handle tools, one handle per call.

The outer claimcheck runs in this process; the inner is a real `claimcheck serve` process (stdio, or
streamable HTTP) in front of the demo server.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from support import OWN_TOOLS, PYTHON, announced_url, demo_server_entry, text_of, write_config

from server.config import parse_config
from server.downstream.chain import CAPABILITY, OWN, PROXIED
from server.proxy import Proxy
from server.upstream.surface import build_server

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

HANDLE = re.compile(r'handle = "(session-[0-9a-f]{32}/[0-9a-f]{32})"')
INNER_SETTINGS = {
    "api": {"enabled": False},
    "asyncTimeoutSecs": 0.5,
    "asyncTokenThreshold": 2000,
    "startupWaitSecs": 60,
}


@asynccontextmanager
async def inner_entry(tmp_path: Path, kind: str) -> AsyncIterator[dict[str, Any]]:
    """The config entry of an inner claimcheck in front of the demo server, whose own rules are strict
    (0.5 s, 2000 tokens), so any double handling would show."""
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": INNER_SETTINGS})
    serve = [PYTHON, "-m", "server", "serve", "--no-api", "--config", str(config)]
    if kind == "stdio":
        yield {"command": serve[0], "args": serve[1:]}
        return
    async with announced_url([*serve, "--transport", "http", "--port", "0"], r"(http://127\.0\.0\.1:\d+/mcp)") as url:
        yield {"url": url}


@asynccontextmanager
async def outer_client(entry: dict[str, Any]) -> AsyncIterator[Client]:
    # The outer time rule is far beyond what a 2 MB answer takes on a loaded machine; the slow call goes to the
    # background by its `background` argument, and the inner claimcheck's 0.5 s rule must not apply to it either.
    settings = {"api": {"enabled": False}, "asyncTimeoutSecs": 120, "asyncTokenThreshold": 10000}
    proxy = Proxy(parse_config({"mcpServers": {"inner": entry}, "settings": settings}))
    async with proxy.running(), Client(build_server(proxy), mode="legacy") as client:
        await proxy.pool.settled()  # the inner claimcheck is up (its start is not what is tested here)
        yield client


@pytest.mark.parametrize("kind", ["stdio", "http"])
async def test_a_chain_of_two_claimchecks_shows_one_set_of_handle_tools_and_makes_one_handle_per_call(
    tmp_path: Path, kind: str
) -> None:
    with anyio.fail_after(90):
        async with inner_entry(tmp_path, kind) as entry, outer_client(entry) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            big = await client.call_tool("inner__demo__big", {"kb": 2048})
            big_handle = HANDLE.search(text_of(big))
            assert big_handle is not None, text_of(big)
            tail = await client.call_tool(
                "tool_output",
                {"handle": big_handle.group(1), "mode": "slice", "slice": {"start": 2097000, "length": 152}},
            )
            grep = await client.call_tool("Grep", {"file": big_handle.group(1), "regex": "^00032767 "})
            slow = await client.call_tool("inner__demo__slow", {"seconds": 3, "background": True})
            slow_handle = HANDLE.search(text_of(slow))
            assert slow_handle is not None, text_of(slow)
            waited = await client.call_tool(
                "wait_for_tool_output", {"handles": [slow_handle.group(1)], "timeout_secs": 30}
            )
            background = await client.call_tool("inner__demo__echo", {"text": "later", "background": True})

    assert OWN_TOOLS <= set(tools)
    assert not [name for name in tools if name.startswith("inner__") and name.removeprefix("inner__") in OWN_TOOLS]
    assert {"inner__demo__big", "inner__demo__slow", "inner__demo__echo"} <= set(tools)
    assert all(OWN not in (tools[name].meta or {}) for name in tools if name.startswith("inner__"))
    assert tools["inner__demo__echo"].meta is not None and PROXIED in tools["inner__demo__echo"].meta
    assert text_of(big).startswith(f"Tool output is too large ({2048 * 1024} bytes, 32768 lines, ")
    last_line = "00032767 INFO demo log line with some words in it".ljust(63, ".") + "\n"
    assert "[characters 2097000-2097152 of 2097152]\n" in text_of(tail)
    assert text_of(tail).split("\n[claimcheck]")[0].endswith(last_line)
    assert "→" in text_of(grep) and "00032767 INFO demo log line" in text_of(grep)
    assert text_of(slow).startswith("Tool inner__demo__slow is running in the background")
    assert "slept 3 s" in text_of(waited) and "running in the background" not in text_of(waited)
    assert text_of(background).startswith("Tool inner__demo__echo is running in the background")


async def test_a_claimcheck_declares_itself_and_marks_its_tools(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": INNER_SETTINGS})
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=PYTHON, args=["-m", "server", "serve", "--no-api", "--config", str(config)])
    with anyio.fail_after(60):
        async with Client(stdio_client(params), mode="legacy") as client:
            capabilities = client.server_capabilities
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            small = await client.call_tool("demo__big", {"kb": 512})
    assert capabilities.experimental is not None and CAPABILITY in capabilities.experimental
    assert all((tools[name].meta or {}).get(OWN) is True for name in OWN_TOOLS)
    assert (tools["demo__echo"].meta or {}).get(PROXIED) == {"background": "background"}
    # A client that is not claimcheck gets handles (too large, or, on a slow machine, handed off at 0.5 s).
    assert 'tool_output(handle = "session-' in text_of(small) and len(text_of(small)) < 2000
