"""A server over HTTP that refuses claimcheck (401, 403) fails with the HTTP status and the header to check, not
with the SDK's `JSON-RPC error -32603`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import pytest

from server.config import CliOverrides, parse_config
from server.proxy import Proxy

pytestmark = pytest.mark.anyio

REASONS = {401: "Unauthorized", 403: "Forbidden"}


@asynccontextmanager
async def refusing(status: int) -> AsyncIterator[int]:
    """An HTTP server on 127.0.0.1 that answers every request with `status`; yields its port."""

    async def answer(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            seen = b""
            while b"\r\n\r\n" not in seen:
                seen += await stream.receive()
            head, _, body = seen.partition(b"\r\n\r\n")
            length = next(
                (int(line[15:]) for line in head.lower().split(b"\r\n") if line.startswith(b"content-length:")), 0
            )
            while len(body) < length:
                body += await stream.receive()
            refusal = b'{"error": "no"}'
            await stream.send(
                f"HTTP/1.1 {status} {REASONS[status]}\r\ncontent-type: application/json\r\n"
                f"content-length: {len(refusal)}\r\nconnection: close\r\n\r\n".encode()
                + refusal
            )

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, answer)
        yield listener.extra(anyio.abc.SocketAttribute.local_port)
        tg.cancel_scope.cancel()


async def first_failure(entry: dict[str, Any]) -> str | None:
    config = parse_config({"mcpServers": {"web": entry}})
    proxy = Proxy(config, cli=CliOverrides(no_api=True), connect_timeout=10)
    with anyio.fail_after(20):
        async with proxy.running():
            await proxy.pool.settled()
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


async def test_a_refusal_names_each_credential_header_the_server_sends() -> None:
    async with refusing(401) as port:
        url = f"http://127.0.0.1:{port}/mcp"
        why = await first_failure({"url": url, "headers": {"X-Api-Key": "k", "Cookie": "c=1"}})
    assert why is not None
    assert why.endswith("check mcpServers.web.headers.X-Api-Key and mcpServers.web.headers.Cookie")
