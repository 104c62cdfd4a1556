"""A server over HTTP that refuses claimcheck (401, 403) fails with the HTTP status and the header to check, not
with the SDK's `JSON-RPC error -32603`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import pytest

from server.config import CliOverrides, Config, parse_config, resolved
from server.downstream.tool_call import call_tool
from server.errors import DownstreamError
from server.proxy import Proxy

pytestmark = pytest.mark.anyio

REASONS = {401: "Unauthorized", 403: "Forbidden"}


@asynccontextmanager
async def refusing(status: int, *, after: frozenset[str] = frozenset(), challenge: str = "") -> AsyncIterator[int]:
    """An HTTP server on 127.0.0.1 that answers with `status` (and `challenge` as its `WWW-Authenticate`); with
    `after`, it first answers the MCP methods named there as a tiny server of one tool would, and refuses the rest.
    Yields its port."""

    async def answer(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            seen = b""
            while b"\r\n\r\n" not in seen:
                seen += await stream.receive()
            head, _, body = seen.partition(b"\r\n\r\n")
            lines = head.lower().split(b"\r\n")
            length = next((int(line[15:]) for line in lines if line.startswith(b"content-length:")), 0)
            while len(body) < length:
                body += await stream.receive()
            message = json.loads(body) if body else {}
            code, reply = status, b'{"error": "no"}'
            if message.get("method") in after:
                code, reply = _served(message)
            reason = "Accepted" if code == 202 else "OK" if code == 200 else REASONS[code]
            asks = f"www-authenticate: {challenge}\r\n" if challenge and code == status else ""
            await stream.send(
                f"HTTP/1.1 {code} {reason}\r\ncontent-type: application/json\r\n{asks}"
                f"content-length: {len(reply)}\r\nconnection: close\r\n\r\n".encode()
                + reply
            )

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, answer)
        yield listener.extra(anyio.abc.SocketAttribute.local_port)
        tg.cancel_scope.cancel()


def _served(message: dict[str, Any]) -> tuple[int, bytes]:
    """A one-tool MCP server's answer over streamable HTTP (JSON responses, no session)."""
    if "id" not in message:
        return 202, b""
    results = {
        "initialize": {
            "protocolVersion": message.get("params", {}).get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "remote", "version": "1"},
        },
        "tools/list": {"tools": [{"name": "fetch", "inputSchema": {"type": "object"}}]},
    }
    return 200, json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": results[message["method"]]}).encode()


@asynccontextmanager
async def proxied_by(config: Config) -> AsyncIterator[Proxy]:
    """A running proxy (no status API) once every server has connected or failed once."""
    starting = Proxy.start(resolved(config, CliOverrides(no_api=True)), connect_timeout=10)
    with anyio.fail_after(20):
        async with starting as proxy:
            await proxy.pool.settled()
            yield proxy


async def first_failure(entry: dict[str, Any]) -> str | None:
    async with proxied_by(parse_config({"mcpServers": {"web": entry}})) as proxy:
        return proxy.pool.downstreams[0].last_error


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
async def test_a_401_names_the_status_and_the_authorization_header_to_check(transport: str) -> None:
    async with refusing(401) as port:
        url = f"http://127.0.0.1:{port}/{'mcp' if transport == 'streamable-http' else 'sse'}"
        headers = {"Authorization": "Bearer expired"}
        why = await first_failure({"url": url, "transport": transport, "headers": headers})
    assert why == f"{url} refused the connection: HTTP 401 Unauthorized; check mcpServers.web.headers.Authorization"


async def test_a_403_without_credentials_says_that_none_are_sent_and_how_to_add_them() -> None:
    async with refusing(403) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        why = await first_failure({"url": url, "headers": {"Accept-Language": "en"}})
    assert why is not None and "-32603" not in why
    assert why.startswith(
        f"{url} refused the connection: HTTP 403 Forbidden; mcpServers.web.headers sends no credentials: add one, "
        'e.g. "Authorization": "Bearer ${TOKEN}"'
    )


async def test_a_401_that_asks_for_an_oauth_sign_in_says_claimcheck_signs_in_nowhere_and_what_does() -> None:
    """A remote server of the MCP authorization spec (Linear's, Atlassian's) answers 401 naming its OAuth metadata:
    the line says to give a token, or to reach it through mcp-remote, which signs in."""
    metadata = 'Bearer resource_metadata="https://example.com/.well-known/oauth-protected-resource"'
    async with refusing(401, challenge=metadata) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        why = await first_failure({"url": url})
    assert why == (
        f"{url} refused the connection: HTTP 401 Unauthorized; it signs clients in with OAuth, which claimcheck does "
        'not do for the servers it calls: give a token it takes in mcpServers.web.headers ("Authorization": "Bearer '
        '${TOKEN}"), or reach it as a stdio server through mcp-remote ("command": "npx", "args": ["-y", "mcp-remote", '
        f'"{url}"]), which signs in'
    )


async def test_a_refusal_names_each_credential_header_the_server_sends() -> None:
    async with refusing(401) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        why = await first_failure({"url": url, "headers": {"X-Api-Key": "k", "Cookie": "c=1"}})
    assert why is not None
    assert why.endswith("check mcpServers.web.headers.X-Api-Key and mcpServers.web.headers.Cookie")


async def test_a_call_the_server_refuses_after_it_connected_names_the_status_and_header_too() -> None:
    up = frozenset({"initialize", "notifications/initialized", "tools/list"})
    async with refusing(401, after=up) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        config = parse_config({"mcpServers": {"web": {"url": url, "headers": {"Authorization": "Bearer gone"}}}})
        async with proxied_by(config) as proxy:
            route = proxy.pool.route("web__fetch")
            assert route is not None
            with pytest.raises(DownstreamError) as failed:
                await call_tool(route.downstream, "fetch", {}, None)
    assert failed.value.reason == (
        f"{url} refused the request: HTTP 401 Unauthorized; check mcpServers.web.headers.Authorization"
    )
