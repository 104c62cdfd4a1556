"""The catalog behind a ticket over real streamable HTTP, both protocol eras at once: each client's finds join its
own listing, `call_tool` keeps the size rule, and one claimcheck keeps one index for both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.processes import PYTHON, announced_url, demo_server_entry, write_config
from tests.support.proxies import text_of

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

SERVING = r"serving MCP over streamable HTTP at (http://\S+/mcp)"
CATALOG = {"find_tools", "call_tool"}


def client(url: str, mode: str, **options: Any) -> Client:
    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(timeout=60)), mode=mode, **options)


def demo_tools(tools: list[types.Tool]) -> set[str]:
    return {tool.name for tool in tools if tool.name.startswith("demo__")}


async def test_both_eras_find_into_their_own_listings_and_call_through_the_ticket_over_http(tmp_path: Path) -> None:
    settings = {"catalog": "search", "asyncTokenThreshold": 2000, "api": {"enabled": False}}
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": settings})
    command = [PYTHON, "-m", "server", "serve", "--config", str(config), "--transport", "http", "--port", "0"]
    changed = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    with anyio.fail_after(120):
        async with (
            announced_url(command, SERVING) as url,
            client(url, "legacy", message_handler=on_message) as old,
            client(url, "auto") as new,
        ):
            assert new.protocol_version == "2026-07-28" and old.protocol_version != "2026-07-28"
            first = (await old.list_tools()).tools
            found = await old.call_tool("find_tools", {"query": "echo the text back", "limit": 1})
            await changed.wait()
            old_listed = demo_tools((await old.list_tools(cache_mode="refresh")).tools)
            echoed = await old.call_tool("demo__echo", {"text": "found"})

            await new.call_tool("find_tools", {"query": "a tool that sleeps some seconds", "limit": 1})
            new_listed = demo_tools((await new.list_tools(cache_mode="refresh")).tools)
            big = await new.call_tool("call_tool", {"name": "demo__big", "arguments": {"kb": 200}})
            old_after = demo_tools((await old.list_tools(cache_mode="refresh")).tools)
    assert CATALOG <= {tool.name for tool in first} and demo_tools(first) == set()
    assert "demo__echo" in text_of(found)
    assert old_listed == {"demo__echo"} and text_of(echoed) == "found"
    assert new_listed == {"demo__slow"}  # the 2026 client's own finds …
    assert old_after == {"demo__echo"}  # … not the other client's
    assert "Tool output is too large" in text_of(big)  # call_tool keeps the size rule
