"""One event store serves every HTTP session: a session resumes only its own streams (server.upstream.event_store),
though request ids collide across sessions and event ids can be guessed; and a session serves only the principal
that opened it (server.upstream.principals), whoever else sends its id. A real claimcheck over streamable HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from tests.support.processes import PYTHON, announced_url, demo_server_entry, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.subprocess]

SERVING = r"serving MCP over streamable HTTP at (http://\S+/mcp)"
VERSION = "2025-11-25"
BASE = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def open_session(
    http: httpx2.AsyncClient, url: str, name: str, credentials: dict[str, str] | None = None
) -> dict[str, str]:
    """The headers of every later request of a new session (`credentials`: headers the opening request adds)."""
    hello = {"protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": name, "version": "1"}}
    opening = {**BASE, **(credentials or {})}
    opened = await http.post(
        url, headers=opening, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
    )
    session = {**opening, "mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": VERSION}
    await http.post(url, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return session


async def call(
    http: httpx2.AsyncClient, url: str, session: dict[str, str], seconds: float, primed: anyio.Event | None = None
) -> str:
    """`demo__slow` as request id 2 (the same id in every session); the id of its stream's first event."""
    request = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "demo__slow", "arguments": {"seconds": seconds}},
    }
    first_id = ""
    async with http.stream("POST", url, headers=session, json=request) as stream:
        async for line in stream.aiter_lines():
            if line.startswith("id:") and not first_id:
                first_id = line.removeprefix("id:").strip()
                if primed is not None:
                    primed.set()
            if line.startswith("data:") and '"result"' in line:
                break
    assert first_id
    return first_id


async def replayed(http: httpx2.AsyncClient, url: str, session: dict[str, str], last_id: str, until: str) -> list[Any]:
    """The messages a GET with Last-Event-ID gets, until one holds `until` or the stream ends (at most 10 s)."""
    messages: list[Any] = []
    with anyio.move_on_after(10):
        headers = {**session, "Accept": "text/event-stream", "Last-Event-ID": last_id}
        async with http.stream("GET", url, headers=headers) as stream:
            async for line in stream.aiter_lines():
                if line.startswith("data:") and line.removeprefix("data:").strip():
                    messages.append(json.loads(line.removeprefix("data:")))
                    if until and until in line:
                        break
    return messages


async def answer(
    http: httpx2.AsyncClient, method: str, url: str, headers: dict[str, str], body: Any = None
) -> tuple[int, str]:
    """The status and body of a request (of a stream left open, what came within 5 s)."""
    text = ""
    async with http.stream(method, url, headers=headers, json=body) as response:
        with anyio.move_on_after(5):
            async for piece in response.aiter_text():
                text += piece
    return response.status_code, text


def http_claimcheck(tmp_path: Path) -> list[str]:
    config = write_config(tmp_path, {"mcpServers": {"demo": demo_server_entry()}})
    return [PYTHON, "-m", "server", "serve", "--config", str(config), "--no-api", "--transport", "http", "--port", "0"]


async def test_a_session_resumes_its_own_stream_only_not_anothers_of_the_same_request_id(tmp_path: Path) -> None:
    with anyio.fail_after(90):
        async with announced_url(http_claimcheck(tmp_path), SERVING) as url, httpx2.AsyncClient(timeout=30) as http:
            alice, bob = await open_session(http, url, "alice"), await open_session(http, url, "bob")
            ids: dict[str, str] = {}
            primed = anyio.Event()

            async def alices() -> None:
                ids["alice"] = await call(http, url, alice, 1, primed)

            async with anyio.create_task_group() as tg:
                tg.start_soon(alices)
                await primed.wait()  # Bob's request 2 starts after Alice's; hers ends first (1 s against 3 s)
                ids["bob"] = await call(http, url, bob, 3)
            own = await replayed(http, url, bob, ids["bob"], until="slept 3 s")
            guessed = await replayed(http, url, bob, ids["alice"], until="slept 1 s")
    texts = [json.dumps(message) for message in own]
    assert any("slept 3 s" in text for text in texts), texts
    assert not any("slept 1 s" in text for text in texts), texts
    assert guessed == []


async def test_a_session_id_sent_by_another_principal_or_without_credentials_is_unknown_and_replays_nothing(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(90):
        async with announced_url(http_claimcheck(tmp_path), SERVING) as url, httpx2.AsyncClient(timeout=30) as http:
            alice = await open_session(http, url, "alice", {"Authorization": "Bearer alice"})
            first = await call(http, url, alice, 0.1)
            bob = {**alice, "Authorization": "Bearer bob"}
            anonymous = {key: value for key, value in alice.items() if key != "Authorization"}
            other_agent = {**alice, "Claimcheck-Session": "another agent with alice's token"}
            listing = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "list_tool_outputs"}}
            refused = {
                name: [
                    await answer(http, "GET", url, {**headers, "Accept": "text/event-stream", "Last-Event-ID": first}),
                    await answer(http, "POST", url, headers, listing),
                ]
                for name, headers in (("bob", bob), ("anonymous", anonymous), ("other agent", other_agent))
            }
            own = await replayed(http, url, alice, first, until="slept 0.1 s")
    for name, answers in refused.items():
        for status, text in answers:
            assert status == 404, (name, status, text)
            assert "slept" not in text and "Session not found" in text
    assert any("slept 0.1 s" in json.dumps(message) for message in own), own
