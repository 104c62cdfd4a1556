"""A proxy in front of one inline downstream whose slow tools finish when the test says so, and what the
tests read from its answers (handles, the running message)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp import Client
from mcp.client._transport import TransportStreams
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.message import ServerMessageMetadata, SessionMessage

from server.proxy import Proxy
from server.upstream.streamed import LineLink
from server.upstream.surface import build_server
from tests.support.proxies import running_proxy, text_of

THRESHOLD = 1000
FOOTER_AGE = re.compile(r"\(\d+(?:\.\d)?s\)")
"""A running call's age in the status footer (tenths of a second): it differs between two runs of one test."""
RUNNING = re.compile(
    r'^Tool down__(\w+) is running in the background \(handle: "(session-[0-9a-f]{32}/[0-9a-f]{32})"\)\.\n'
    r'Call wait_for_tool_output\(handles = \["\2"\]\) to wait for it, or go on with other work\.\n'
    r'When it is ready, search it with Grep\(file = "\2", regex = "what you look for"\) or read it with '
    r'Read\(file = "\2", start = 0, lines = 100\); if it is JSON, tool_output\(handle = "\2", mode = "json"\) '
    r"shows its shape\.$"  # the client declares no sampling and no endpoint is configured: no `extract`
)


def big_text(lines: int) -> str:
    return "".join(f"line {i:05d} of the big output, with words to count\n" for i in range(lines))


class Downstream:
    """An inline downstream whose slow tools finish when the test says so."""

    def __init__(self) -> None:
        self.release = anyio.Event()
        self.cancelled = anyio.Event()
        self.server = MCPServer("down")
        server = self.server

        @server.tool(structured_output=False)
        def echo(text: str) -> str:
            return text

        @server.tool(structured_output=False)
        def big(lines: int) -> str:
            return big_text(lines)

        @server.tool(structured_output=False)
        async def gated(text: str = "released") -> str:
            try:
                await self.release.wait()
            except anyio.get_cancelled_exc_class():
                self.cancelled.set()
                raise
            return text

        @server.tool(structured_output=False)
        async def gated_failure() -> str:
            await self.release.wait()
            raise ToolError("the disk is on fire")


@asynccontextmanager
async def handles_proxy(down: Downstream, settings: dict[str, Any] | None = None) -> AsyncIterator[Proxy]:
    base = {"asyncTokenThreshold": THRESHOLD, "asyncTimeoutSecs": 5}
    async with running_proxy({"down": down.server}, settings={**base, **(settings or {})}) as proxy:
        yield proxy


@asynccontextmanager
async def client_of(proxy: Proxy, mode: str = "legacy") -> AsyncIterator[Client]:
    async with Client(build_server(proxy), mode=mode) as client:
        yield client


@asynccontextmanager
async def linked_client(proxy: Proxy, link: str, mode: str = "legacy") -> AsyncIterator[Client]:
    """A client whose requests come over one transport link (`LineLink`), as a relay's do to the shared
    claimcheck (`server.upstream.shared_serve`)."""
    async with Client(_LinkedStreams(proxy, LineLink(None, link)), mode=mode) as client:
        yield client


@dataclass(frozen=True)
class _Bearer:
    """A request's transport context as HTTP's carries a token: its headers (`server.handles.owners.owner_key`)."""

    headers: dict[str, str]
    scope: dict[str, Any] = field(default_factory=dict)


@asynccontextmanager
async def client_with_token(proxy: Proxy, token: str, mode: str = "legacy") -> AsyncIterator[Client]:
    """A client whose every request carries `Authorization: Bearer <token>`, as over HTTP: the principal of
    that token (clients without one are all one principal, `server.handles.owners.ANONYMOUS`)."""
    context = _Bearer({"authorization": f"Bearer {token}"})
    async with Client(_LinkedStreams(proxy, context), mode=mode) as client:
        yield client


class _LinkedStreams:
    """A client transport to `proxy`'s SDK server over memory streams, every message stamped with `context` (its
    requests' `ctx.request`)."""

    def __init__(self, proxy: Proxy, context: object) -> None:
        self._proxy, self._context = proxy, context
        self._streams: contextlib.AbstractAsyncContextManager[TransportStreams] | None = None

    @asynccontextmanager
    async def _connect(self) -> AsyncIterator[TransportStreams]:
        server = build_server(self._proxy)
        metadata = ServerMessageMetadata(request_context=self._context)
        to_server, from_client = anyio.create_memory_object_stream[SessionMessage | Exception](1)
        stamped, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception](1)
        server_writes, to_client = anyio.create_memory_object_stream[SessionMessage](1)

        async def stamp() -> None:
            async with from_client, stamped:
                async for message in from_client:
                    if isinstance(message, SessionMessage):
                        message.metadata = metadata
                    await stamped.send(message)

        async with anyio.create_task_group() as tg:
            tg.start_soon(stamp)
            tg.start_soon(server.run, server_reads, server_writes, server.create_initialization_options())
            try:
                yield to_client, to_server
            finally:
                tg.cancel_scope.cancel()

    async def __aenter__(self) -> TransportStreams:
        self._streams = self._connect()
        return await self._streams.__aenter__()

    async def __aexit__(self, *exc: object) -> None:
        if self._streams is not None:
            await self._streams.__aexit__(None, None, None)


def handle_in(text: str) -> str:
    match = re.search(r"session-[0-9a-f]{32}/[0-9a-f]{32}", text)
    assert match, text
    return match.group(0)


async def start_in_background(client: Client, tool: str = "down__gated", **args: Any) -> str:
    result = await client.call_tool(tool, {**args, "background": True})
    match = RUNNING.match(result.content[0].text)  # type: ignore[union-attr]  # a text item, or the test fails
    assert match, text_of(result)
    return match.group(2)
