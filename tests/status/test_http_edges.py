"""The HTTP edges of the status API and of `/mcp` (and SSE's `/messages/`), on real uvicorn servers on 127.0.0.1:
one Authorization header, validated numbers, slow and idle connections closed without starving others,
clients that leave mid-request logged quietly, and request bodies held to `settings.maxRequestBytes`."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer

from server.config import parse_config
from server.downstream.connect import DownstreamSpec
from server.downstream.pool import specs_from_config
from server.proxy import Proxy
from server.status.api import StatusApi, serve_api
from server.status.events import EventHub
from server.status.history import History
from server.upstream.bearer import Tokens
from server.upstream.transports import serve_http, serve_sse
from tests.support.proxies import text_of

pytestmark = pytest.mark.anyio

SLOW_CLIENTS = 200
JSON_RPC = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def downstream() -> MCPServer:
    server = MCPServer("down")

    @server.tool(structured_output=False)
    def echo(text: str) -> str:
        return text

    return server


def listening_socket() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


@asynccontextmanager
async def mcp_server(
    transport: str = "http", settings: Mapping[str, Any] | None = None, **options: Any
) -> AsyncIterator[str]:
    """claimcheck's `/mcp` (or `/sse`) served in this process in front of an inline server; yields its base URL."""
    config = parse_config({"mcpServers": {"down": {"command": "in-process"}}, "settings": dict(settings or {})})
    server = downstream()
    specs = [DownstreamSpec(s.name, s.config, target=lambda: server) for s in specs_from_config(config)]
    start = partial(Proxy.start, config, specs=specs)
    sock = listening_socket()
    serve = serve_http if transport == "http" else serve_sse
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(serve, start, sock, **options))
            yield f"http://127.0.0.1:{sock.getsockname()[1]}"
            tg.cancel_scope.cancel()
    finally:
        sock.close()


@asynccontextmanager
async def status_api(tmp_path: Path, **options: Any) -> AsyncIterator[tuple[str, str]]:
    """The status API alone over an empty history; yields its URL and token."""
    history = History(tmp_path / "history.sqlite3")
    api = StatusApi(EventHub(history), version="test", heartbeat_secs=30)
    async with anyio.create_task_group() as tg:
        await tg.start(history.run)
        url = await tg.start(partial(serve_api, api, 0, tmp_path, **options))
        yield url, api.token
        tg.cancel_scope.cancel()


@asynccontextmanager
async def connections(port: int, count: int, first_bytes: bytes) -> AsyncIterator[list[anyio.abc.SocketStream]]:
    """`count` connections that send `first_bytes` (maybe nothing) and then nothing more."""
    opened: list[anyio.abc.SocketStream] = []
    try:
        for _ in range(count):
            stream = await anyio.connect_tcp("127.0.0.1", port)
            opened.append(stream)
            if first_bytes:
                await stream.send(first_bytes)
        yield opened
    finally:
        for stream in opened:
            await stream.aclose()


async def what_the_server_said_before_closing(stream: anyio.abc.SocketStream) -> bytes:
    said = b""
    try:
        while True:
            said += await stream.receive()
    except (anyio.EndOfStream, anyio.BrokenResourceError, ConnectionResetError):
        return said


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


async def test_duplicate_authorization_headers_are_refused_by_the_status_api_and_by_mcp(tmp_path: Path) -> None:
    twice = [("Authorization", "Bearer a"), ("Authorization", "Bearer b")]
    with anyio.fail_after(30):
        async with status_api(tmp_path) as (url, token), httpx2.AsyncClient(timeout=10) as http:
            api = await http.get(f"{url}v1/tasks", headers=[("Authorization", f"Bearer {token}"), *twice[1:]])
            origins = await http.get(
                f"{url}v1/tasks", headers=[("Authorization", f"Bearer {token}"), ("Origin", "a"), ("Origin", "b")]
            )
        async with mcp_server(auth=Tokens.of("s3cret")) as base, httpx2.AsyncClient(timeout=10) as http:
            body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            right_then_wrong = [("Authorization", "Bearer s3cret"), ("Authorization", "Bearer wrong")]
            mcp = await http.post(f"{base}/mcp", json=body, headers=[*JSON_RPC.items(), *right_then_wrong])
            wrong_then_right = await http.post(
                f"{base}/mcp", json=body, headers=[*JSON_RPC.items(), *reversed(right_then_wrong)]
            )
    assert api.status_code == 400 and "more than one Authorization header" in api.json()["error"]
    assert origins.status_code == 400 and "Origin" in origins.json()["error"]
    assert mcp.status_code == 400 and wrong_then_right.status_code == 400


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ({"offset": str(2**63)}, "offset"),
        ({"offset": "1" + "0" * 40}, "offset"),
        ({"offset": "-1"}, "offset"),
        ({"limit": "-5"}, "limit"),
        ({"limit": "0"}, "limit"),
        ({"limit": "1e3"}, "limit"),
        ({"limit": "٣"}, "limit"),  # an Arabic-Indic digit, which int() would take
        ({"limit": ""}, "limit"),
        ([("limit", "5"), ("limit", "6")], "limit"),
    ],
)
async def test_a_numeric_query_parameter_out_of_range_or_not_a_number_is_a_400_naming_it(
    tmp_path: Path, query: Any, named: str
) -> None:
    with anyio.fail_after(20):
        async with status_api(tmp_path) as (url, token), httpx2.AsyncClient(timeout=10) as http:
            reply = await http.get(f"{url}v1/tasks", params=query, headers={"Authorization": f"Bearer {token}"})
            fine = await http.get(
                f"{url}v1/tasks", params={"offset": "1000"}, headers={"Authorization": f"Bearer {token}"}
            )
    assert reply.status_code == 400 and reply.json()["error"].startswith(named)
    assert fine.status_code == 200 and fine.json()["tasks"] == []


async def test_a_normal_client_keeps_getting_answers_while_200_slow_and_idle_connections_hang_on(
    tmp_path: Path,
) -> None:
    slow_headers = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    with anyio.fail_after(60):
        async with mcp_server() as base:
            port = port_of(base)
            async with (
                connections(port, SLOW_CLIENTS // 2, slow_headers),
                connections(port, SLOW_CLIENTS // 2, b""),
                Client(streamable_http_client(f"{base}/mcp"), mode="legacy") as client,
            ):
                answers = [text_of(await client.call_tool("down__echo", {"text": f"call {i}"})) for i in range(20)]
        async with status_api(tmp_path) as (url, token):
            async with (
                connections(port_of(url), SLOW_CLIENTS, b"GET /v1/tasks HTTP/1.1\r\nHost: 127.0.0.1\r\n"),
                httpx2.AsyncClient(timeout=10, headers={"Authorization": f"Bearer {token}"}) as http,
            ):
                replies = [(await http.get(f"{url}v1/tasks")).status_code for _ in range(20)]
    assert answers == [f"call {i}" for i in range(20)]
    assert replies == [200] * 20


async def test_connections_that_send_no_complete_request_in_time_are_closed_and_the_partial_ones_told_408(
    tmp_path: Path,
) -> None:
    with anyio.fail_after(30):
        async with mcp_server(request_deadline=0.5) as base:
            port = port_of(base)
            body_started = (
                b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b'Content-Length: 1000\r\n\r\n{"jsonrpc"'
            )
            async with (
                connections(port, 50, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n") as partial,
                connections(port, 50, b"") as idle,
                connections(port, 50, body_started) as bodies,
            ):
                said = {
                    "partial": {await what_the_server_said_before_closing(s) for s in partial},
                    "idle": {await what_the_server_said_before_closing(s) for s in idle},
                    "bodies": {await what_the_server_said_before_closing(s) for s in bodies},
                }
            async with Client(streamable_http_client(f"{base}/mcp"), mode="legacy") as client:
                after = text_of(await client.call_tool("down__echo", {"text": "still serving"}))
        async with status_api(tmp_path, request_deadline=0.5) as (url, _):
            async with connections(port_of(url), 20, b"GET / HTTP/1.1\r\n") as api_partial:
                api_said = {await what_the_server_said_before_closing(s) for s in api_partial}
    timed_out = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    assert said == {"partial": {timed_out}, "idle": {b""}, "bodies": {b""}}
    assert api_said == {timed_out}
    assert after == "still serving"


async def test_a_client_that_leaves_mid_request_is_a_debug_line_not_an_error_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="server.http_edge")
    half = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n"
        b'{"jsonrpc": "2.0", "id": 1, '
    )
    with anyio.fail_after(30):
        async with mcp_server() as base:
            async with connections(port_of(base), 20, half):
                async with Client(streamable_http_client(f"{base}/mcp"), mode="legacy") as client:
                    await client.call_tool("down__echo", {"text": "the body has arrived"})  # they are being read
            async with Client(streamable_http_client(f"{base}/mcp"), mode="legacy") as client:
                after = text_of(await client.call_tool("down__echo", {"text": "still serving"}))
                while len(left(caplog)) < 20:
                    await client.send_ping()  # each ping gives the server's loop a turn to notice a departure
    assert after == "still serving"
    assert [r for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert len(left(caplog)) == 20


def left(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "server.http_edge" and "left before" in r.getMessage()]


async def chunks(total: int) -> AsyncIterator[bytes]:
    """A body of `total` bytes sent chunked, without a Content-Length."""
    piece = b" " * 65536
    for _ in range(total // len(piece)):
        yield piece


@pytest.mark.parametrize("transport", ["http", "sse"])
async def test_a_request_body_over_max_request_bytes_gets_413_and_the_server_keeps_serving(transport: str) -> None:
    limit = 256 * 1024
    path = "/mcp" if transport == "http" else "/messages/?session_id=0123456789abcdef0123456789abcdef"
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * (limit * 2)}})
    with anyio.fail_after(60):
        settings = {"maxRequestBytes": limit, "asyncTokenThreshold": 1_000_000}
        async with mcp_server(transport, settings) as base, httpx2.AsyncClient(timeout=30) as http:
            declared = await http.post(f"{base}{path}", content=big, headers=JSON_RPC)
            streamed = await http.post(f"{base}{path}", content=chunks(limit * 4), headers=JSON_RPC)
            if transport == "http":
                async with Client(streamable_http_client(f"{base}/mcp"), mode="legacy") as client:
                    after = text_of(await client.call_tool("down__echo", {"text": "x" * (limit // 2)}))
                assert after == "x" * (limit // 2)
    assert declared.status_code == 413 and streamed.status_code == 413
    message = declared.json()["error"]["message"]
    assert message == f"Request too large: {len(big)} bytes, over the {limit}-byte limit (settings.maxRequestBytes)."
    assert streamed.json()["error"]["message"] == (
        f"Request too large: over the {limit}-byte limit (settings.maxRequestBytes); the rest was not read."
    )
