"""A tool that requires MCP tasks (server-everything's `simulate-research-query`) for a client that knows none."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

import anyio
import pytest
from mcp import Client

from server.config import parse_config
from server.proxy import Proxy
from server.upstream.surface import build_server
from tests.support import peers
from tests.support.handles import handle_in
from tests.support.proxies import text_of

pytestmark = [pytest.mark.anyio, pytest.mark.interop, pytest.mark.subprocess]

TOOL = "everything__simulate-research-query"


def everything_proxy(settings: dict[str, object]) -> AbstractAsyncContextManager[Proxy]:
    node, *args = peers.everything_command()
    config = parse_config({"mcpServers": {"everything": {"command": node, "args": args}}, "settings": settings})
    return Proxy.start(config)


async def test_a_tool_that_requires_tasks_answers_a_plain_call_with_its_stages_as_progress() -> None:
    reported: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        reported.append((progress, message))

    starting = everything_proxy({"asyncTimeoutSecs": 45})
    with anyio.fail_after(90):
        async with starting as proxy, Client(build_server(proxy), mode="legacy") as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            result = await client.call_tool(TOOL, {"topic": "claim checks"}, progress_callback=on_progress)
    assert TOOL in tools
    assert not result.is_error, text_of(result)
    assert text_of(result).startswith("# Research Report: claim checks")
    messages = [message for _, message in reported]
    stages = ["Gathering sources...", "Analyzing content...", "Synthesizing findings...", "Generating report..."]
    # The stages come from polling the task's status: a stage shorter than a poll can pass unseen.
    assert messages[0] == "Gathering sources..." and len(set(messages)) >= 2, messages
    assert [stage for stage in stages if stage in messages] == list(dict.fromkeys(messages)), messages
    assert [value for value, _ in reported] == sorted(value for value, _ in reported)


async def test_a_tool_that_requires_tasks_can_go_to_the_background_and_be_waited_for() -> None:
    starting = everything_proxy({})
    with anyio.fail_after(90):
        async with starting as proxy, Client(build_server(proxy), mode="legacy") as client:
            started = await client.call_tool(TOOL, {"topic": "handles", "background": True})
            handle = handle_in(text_of(started))
            waited = await client.call_tool("wait_for_tool_output", {"handles": [handle]})
    assert text_of(started).startswith(f"Tool {TOOL} is running in the background")
    assert "1 finished" in text_of(waited) and "# Research Report: handles" in text_of(waited)
