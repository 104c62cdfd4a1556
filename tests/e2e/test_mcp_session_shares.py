"""A principal's share of the MCP sessions open over streamable HTTP (`limits.mcpSessions`): opening one past it
ends that principal's least recently used idle session, or is refused while every one of them is in use (a GET
stream open); another principal opens its own as before. Over legacy SSE, where a session is its open GET
stream, one past the share is refused until one of them ends. A real claimcheck over HTTP with a tokens file."""

from __future__ import annotations

import json
import secrets
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import httpx2
import pytest

from tests.support.processes import PYTHON, announced_url, demo_server_entry, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

SERVING = r"serving MCP over streamable HTTP at (http://\S+/mcp)"
SERVING_SSE = r"(http://127\.0\.0\.1:\d+/sse)"
ALICE, MALLORY = secrets.token_hex(32), secrets.token_hex(32)
VERSION = "2025-11-25"
SESSIONLESS = "2026-07-28"


def serve(tmp_path: Path, transport: str = "http", *, tokens: bool = True) -> list[str]:
    settings = {"limits": {"mcpSessions": 2}, "api": {"enabled": False}}
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}, "settings": settings})
    path = tmp_path / "tokens"
    path.write_text(f"alice {ALICE}\nmallory {MALLORY}\n", encoding="utf-8")
    path.chmod(0o600)
    command = [PYTHON, "-m", "server", "serve", "--config", str(config), "--transport", transport, "--port", "0"]
    return [*command, "--auth-tokens-file", str(path)] if tokens else command


class Principal:
    """A client of `url` with `token` ("": none), whose client is named `name`."""

    def __init__(self, http: httpx2.AsyncClient, url: str, token: str, name: str = "shares") -> None:
        self.http, self.url, self.token, self.name = http, url, token, name

    def headers(self, session: str = "") -> dict[str, str]:
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        headers |= {"authorization": f"Bearer {self.token}"} if self.token else {}
        return headers | ({"mcp-session-id": session, "mcp-protocol-version": VERSION} if session else {})

    async def open(self) -> httpx2.Response:
        """initialize (and `notifications/initialized` once it opened a session)."""
        params = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": self.name, "version": "1"}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
        response = await self.http.post(self.url, content=json.dumps(body), headers=self.headers())
        session = response.headers.get("mcp-session-id")
        if session is not None:
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (
                await self.http.post(self.url, content=json.dumps(note), headers=self.headers(session))
            ).status_code == 202
        return response

    async def session(self) -> str:
        response = await self.open()
        assert response.status_code == 200, response.text
        return response.headers["mcp-session-id"]

    async def sessionless_call(self) -> httpx2.Response:
        """A 2026-07-28 `tools/call`: self-contained, with the envelope and the routing headers."""
        envelope = {
            "io.modelcontextprotocol/protocolVersion": SESSIONLESS,
            "io.modelcontextprotocol/clientInfo": {"name": "shares", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        params = {"name": "demo__echo", "arguments": {"text": "no session"}, "_meta": envelope}
        body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": params}
        routing = {"mcp-protocol-version": SESSIONLESS, "mcp-method": "tools/call", "mcp-name": "demo__echo"}
        return await self.http.post(self.url, content=json.dumps(body), headers=self.headers() | routing)

    async def lists(self, session: str) -> int:
        """The status of a `tools/list` in `session`."""
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        return (await self.http.post(self.url, content=json.dumps(body), headers=self.headers(session))).status_code


async def test_a_principal_past_its_mcp_sessions_loses_its_least_recently_used_idle_one_or_is_refused(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(120):
        async with (
            announced_url(serve(tmp_path), SERVING) as url,
            httpx2.AsyncClient(timeout=60) as http,
            AsyncExitStack() as streams,
        ):
            mallory, alice = Principal(http, url, MALLORY), Principal(http, url, ALICE)
            first, second = await mallory.session(), await mallory.session()
            assert await mallory.lists(first) == 200  # `second` is now the least recently used
            third = await mallory.session()
            statuses = [await mallory.lists(session) for session in (first, second, third)]
            for session in (first, third):  # each holds a GET stream open: in use
                headers = mallory.headers(session) | {"accept": "text/event-stream"}
                get = await streams.enter_async_context(http.stream("GET", url, headers=headers))
                assert get.status_code == 200
            refused = await mallory.open()
            sessionless = await mallory.sessionless_call()  # opens no session: served at the share as before
            hers = [await alice.session() for _ in range(2)]
            her_statuses = [await alice.lists(session) for session in hers]
    assert statuses == [200, 404, 200]  # the SDK answers an ended session's id as an unknown one
    assert refused.status_code == 503 and "mcp-session-id" not in refused.headers
    assert refused.json()["error"]["message"].startswith(
        "This principal has 2 MCP sessions open, each with a request or a GET stream open, at most 2 "
        '("limits.mcpSessions")'
    ), refused.text
    assert her_statuses == [200, 200]
    assert sessionless.status_code == 200, sessionless.text
    assert sessionless.json()["result"]["content"] == [{"type": "text", "text": "no session"}]


async def test_clients_without_a_token_are_one_principal_whose_sessions_past_the_share_end_oldest_first(
    tmp_path: Path,
) -> None:
    """No tokens: every client is the same anonymous principal, whatever its name or connection, so sessions
    opened by two clients count in one share (the SDK's 10 000 for everyone would be all there was)."""
    with anyio.fail_after(120):
        async with announced_url(serve(tmp_path, tokens=False), SERVING) as url, httpx2.AsyncClient(timeout=60) as http:
            claude, cursor = Principal(http, url, "", "claude-code"), Principal(http, url, "", "cursor")
            first, second = await claude.session(), await cursor.session()
            assert await claude.lists(first) == 200  # `second` (cursor's) is now the least recently used
            third = await cursor.session()
            statuses = [await claude.lists(first), await cursor.lists(second), await cursor.lists(third)]
    assert statuses == [200, 404, 200]


async def test_a_principal_past_its_sse_sessions_is_refused_until_one_of_its_streams_ends(tmp_path: Path) -> None:
    readers: list[object] = []  # each stream's line reader, kept: one collected would close its stream

    async def opened(http: httpx2.AsyncClient, url: str, token: str, streams: AsyncExitStack) -> httpx2.Response:
        """A `GET /sse` kept open; once it is 200, its first event (the endpoint to post to) has come."""
        headers = {"authorization": f"Bearer {token}", "accept": "text/event-stream"}
        response = await streams.enter_async_context(http.stream("GET", url, headers=headers))
        if response.status_code == 200:
            lines = response.aiter_lines()
            readers.append(lines)
            assert await anext(lines) == "event: endpoint"
        else:
            await response.aread()
        return response

    with anyio.fail_after(120):
        async with (
            announced_url(serve(tmp_path, "sse"), SERVING_SSE) as url,
            httpx2.AsyncClient(timeout=60) as http,
            AsyncExitStack() as streams,
        ):
            async with AsyncExitStack() as first:
                hers = [await opened(http, url, MALLORY, first), await opened(http, url, MALLORY, streams)]
                refused = await opened(http, url, MALLORY, streams)
                alices = await opened(http, url, ALICE, streams)
            # Her first stream is closed: once the server has seen it end, she opens one again.
            while True:  # the server sees the stream end a moment after the client closed it
                again = await opened(http, url, MALLORY, streams)
                if again.status_code != 503:
                    break
                await anyio.sleep(0.1)  # a poll's pace, not a synchronisation
    assert [response.status_code for response in hers] == [200, 200]
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["message"] == (
        'This principal has 2 SSE sessions open, at most 2 ("limits.mcpSessions"); end one of its GET /sse streams '
        "first."
    )
    assert alices.status_code == 200
    assert again.status_code == 200
