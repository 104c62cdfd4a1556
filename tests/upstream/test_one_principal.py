"""Whether every client of a serving claimcheck is one principal, as the composition decides it: over HTTP and SSE
without tokens (no tokens, no OAuth), and in the shared claimcheck; then a server's processes are theirs to share
whole by default (`maxInstancesPerPrincipal`), where with tokens half are kept for another principal."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from server.config import parse_config
from server.proxy import Proxy
from server.upstream.bearer import Tokens
from server.upstream.transports import serve_http, serve_sse

pytestmark = pytest.mark.anyio

CONFIG = parse_config({"mcpServers": {}, "settings": {"api": {"enabled": False}}})
WITH_OAUTH = parse_config(
    {
        "mcpServers": {},
        "settings": {
            "api": {"enabled": False},
            "auth": {"issuer": "https://id.test"},
        },
    }
)


@pytest.mark.parametrize("serve", [serve_http, serve_sse], ids=["http", "sse"])
@pytest.mark.parametrize(("tokens", "one"), [(None, True), (Tokens.of("t" * 32), False)], ids=["no-token", "tokens"])
async def test_a_transport_serves_one_principal_exactly_when_its_clients_come_without_tokens(
    serve: Any, tokens: Tokens | None, one: bool
) -> None:
    seen: list[bool] = []
    started = anyio.Event()

    @asynccontextmanager
    async def start(**options: Any) -> AsyncIterator[Proxy]:
        async with Proxy.start(CONFIG, **options) as proxy:
            seen.append(proxy.pool.one_principal)
            started.set()
            yield proxy

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(serve, start, sock, tokens)
            await started.wait()
            tg.cancel_scope.cancel()
    sock.close()
    assert seen == [one]


async def test_the_proxy_is_one_principal_when_shared_or_anonymous_and_never_under_oauth() -> None:
    cases = [(CONFIG, {"shared": True}), (CONFIG, {"anonymous": True}), (WITH_OAUTH, {"anonymous": True})]
    found = []
    for config, options in cases:
        async with Proxy.start(config, many_clients=True, **options) as proxy:
            found.append(proxy.pool.one_principal)
    async with Proxy.start(CONFIG, many_clients=True) as proxy:
        found.append(proxy.pool.one_principal)
    assert found == [True, True, False, False]
