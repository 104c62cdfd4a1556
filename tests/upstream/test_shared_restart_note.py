"""A shared claimcheck that took over from one that died says so when a handle of before is asked for."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from server.config import parse_config
from server.proxy import Proxy
from server.upstream.surface import build_server
from tests.support.proxies import text_of

pytestmark = pytest.mark.anyio

UNKNOWN = "session-" + "0" * 32 + "/" + "1" * 32


@pytest.mark.parametrize("restarted_at", ["12:34:56", None])
async def test_an_unknown_handle_in_the_shared_claimcheck_names_when_it_was_started_anew(
    restarted_at: str | None,
) -> None:
    config = parse_config({"mcpServers": {}, "settings": {"api": {"enabled": False}}}, {})
    starting = Proxy.start(config, shared=True, many_clients=True, restarted_at=restarted_at)
    async with starting as proxy, Client(build_server(proxy), mode="legacy") as client:
        with anyio.fail_after(10):
            answer = await client.call_tool("tool_output", {"handle": UNKNOWN, "mode": "raw"})
    assert answer.is_error
    assert ("started anew at 12:34:56" in text_of(answer)) == (restarted_at is not None), text_of(answer)
