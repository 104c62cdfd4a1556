"""The fast path answers as the SDK's path does: the same calls through two real claimcheck processes,
one with the fast path forced on and one with it forced off, give the same results; every log message of a
call reaches the client; a cancelled call is not answered and the next call gets its own answer."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from support import demo_server_entry, text_of, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

CALL_S = 120


@asynccontextmanager
async def claimcheck(config: Path, fast: str, **options: Any) -> AsyncIterator[Client]:
    serve = ["-m", "server", "serve", "--no-api", "--config", str(config)]
    params = StdioServerParameters(command=sys.executable, args=serve, env={"CLAIMCHECK_FAST_PATH": fast})
    async with Client(params, mode="legacy", **options) as client:
        await client.list_tools()
        yield client


def _shape(result: types.CallToolResult) -> tuple[bool, list[str]]:
    return result.is_error, [item.text if isinstance(item, types.TextContent) else item.type for item in result.content]


async def test_calls_through_the_fast_path_answer_as_through_the_sdk_path(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}})
    calls: list[tuple[str, dict[str, Any]]] = [
        ("demo__echo", {"text": 'plain, "quoted", é 中 \U0001f600 \\ \n'}),
        ("demo__echo", {"text": ""}),
        ("demo__big", {"kb": 4}),
        ("demo__fail", {"message": "it failed"}),
        ("demo__echo", {}),  # a missing argument: the server's own error
        ("demo__nope", {}),  # an unknown tool: claimcheck's error
    ]
    results: dict[str, list[tuple[bool, list[str]]]] = {}
    with anyio.fail_after(CALL_S):
        for fast in ("on", "off"):
            async with claimcheck(config, fast) as client:
                results[fast] = [_shape(await client.call_tool(name, args)) for name, args in calls]
    assert results["on"] == results["off"]
    assert results["on"][0] == (False, ['plain, "quoted", é 中 \U0001f600 \\ \n'])
    assert results["on"][3][0] is True and "it failed" in results["on"][3][1][0]


async def test_every_log_message_of_a_call_reaches_the_client(tmp_path: Path) -> None:
    """The server writes its log message just before its answer; claimcheck relays a log message only while
    the call is in flight, so one relayed after the answer overtook it would be lost."""
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}})
    seen: list[str] = []

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        seen.append(str(params.data))

    with anyio.fail_after(CALL_S):
        async with claimcheck(config, "on", logging_callback=on_log) as client:
            for number in range(5):
                result = await client.call_tool("demo__log", {"message": f"note {number}"})
                assert text_of(result) == f"logged note {number}"
            await client.call_tool("demo__echo", {"text": "last"})  # whatever the client still had to read
    assert [number for number in range(5) if not any(f"note {number}" in line for line in seen)] == [], seen


async def test_a_cancelled_call_is_not_answered_and_the_next_call_gets_its_own_answer(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}})
    with anyio.fail_after(CALL_S):
        async with claimcheck(config, "on") as client:
            with anyio.move_on_after(0.5):  # the client cancels its request (notifications/cancelled)
                await client.call_tool("demo__slow", {"seconds": 3})
                pytest.fail("the slow call should not have been answered")
            for number in range(3):
                result = await client.call_tool("demo__echo", {"text": f"after {number}"})
                assert text_of(result) == f"after {number}"
            listing = text_of(await client.call_tool("list_tool_outputs", {}))
            assert "running" not in listing.lower() or "demo__slow" not in listing
