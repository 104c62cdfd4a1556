"""Over streamable HTTP, a downstream's question after the hand-off goes at once on the session's standing GET
stream while it is open (server.upstream.standing); without one it rides `wait_for_tool_output`.
A real claimcheck process (uvicorn), tests/support/servers/asking_server.py and roots_server.py, the real SDK client."""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPDeprecationWarning

from tests.support.handles import handle_in
from tests.support.processes import PYTHON, announced_url, program_entry, write_config
from tests.support.proxies import text_of

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]
warnings.simplefilter("ignore", MCPDeprecationWarning)  # roots are deprecated at 2026-07-28 only

SERVING = r"serving MCP over streamable HTTP at (http://\S+/mcp)"


@asynccontextmanager
async def claimcheck_http(tmp_path: Path) -> AsyncIterator[str]:
    servers = {
        "ask": program_entry("asking_server"),
        "fs": program_entry("roots_server"),
    }
    config = write_config(tmp_path, {"mcpServers": servers, "settings": {"asyncTimeoutSecs": 0.5}})
    command = [PYTHON, "-m", "server", "serve", "--config", str(config), "--no-api", "--transport", "http"]
    async with announced_url([*command, "--port", "0"], SERVING) as url:
        yield url


class NoGetStream(httpx2.AsyncHTTPTransport):
    """A client's HTTP that cannot hold a standing GET stream (as behind a proxy that buffers it)."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "GET":
            return httpx2.Response(405, request=request)
        return await super().handle_async_request(request)


async def test_a_question_after_the_hand_off_goes_at_once_on_the_open_get_stream(tmp_path: Path) -> None:
    asked = anyio.Event()
    listed = anyio.Event()

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.set()
        return types.ElicitResult(action="accept", content={"ok": True})

    async def roots(context: Any) -> types.ListRootsResult:
        listed.set()
        return types.ListRootsResult(roots=[types.Root(uri="file:///srv/x", name="x")])  # type: ignore[arg-type]

    with anyio.fail_after(90):
        async with (
            claimcheck_http(tmp_path) as url,
            Client(url, mode="legacy", elicitation_callback=elicit, list_roots_callback=roots) as client,
        ):
            confirm = handle_in(text_of(await client.call_tool("ask__confirm", {"what": "it", "background": True})))
            where = handle_in(text_of(await client.call_tool("fs__roots", {"after": 1, "background": True})))
            await asked.wait()  # no request of the client's is open to carry it: the GET stream did
            await listed.wait()
            done = await client.call_tool("wait_for_tool_output", {"handles": [confirm, where], "timeout_secs": 60})
            while "2 finished" not in text_of(done):
                done = await client.call_tool("wait_for_tool_output", {"handles": [confirm, where]})
    assert "confirmed it: True" in text_of(done)
    assert "file:///srv/x=x" in text_of(done)


async def test_without_a_get_stream_the_question_rides_wait_for_tool_output(tmp_path: Path) -> None:
    seen: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        return types.ElicitResult(action="accept", content={"ok": True})

    with anyio.fail_after(90):
        async with (
            claimcheck_http(tmp_path) as url,
            httpx2.AsyncClient(transport=NoGetStream(), timeout=httpx2.Timeout(30, read=300)) as http,
            Client(streamable_http_client(url, http_client=http), mode="legacy", elicitation_callback=elicit) as client,
        ):
            handle = handle_in(text_of(await client.call_tool("ask__confirm", {"what": "it", "background": True})))
            done = await client.call_tool("wait_for_tool_output", {"handles": [handle]})
    assert seen == ["Really it?"]
    assert "1 finished:" in text_of(done) and "confirmed it: True" in text_of(done)
