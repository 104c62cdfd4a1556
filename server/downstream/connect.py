"""Connection set-up for one downstream server: what to connect to (its spec), and the transport its URL names."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass
from typing import Any

import httpx2
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server

from server import sdk_compat
from server.config import ServerConfig
from server.downstream.http_spool import SpoolingTransport, spooling_client_factory
from server.downstream.spool import SpoolPolicy

__all__ = ["DownstreamSpec", "Target", "http_target"]

sdk_compat.lift_legacy_sse_event_cap()  # a tool result is one event: over 1 MiB it would end the connection

Target = Server[Any] | AbstractAsyncContextManager[Any] | str


@dataclass(frozen=True, slots=True)
class DownstreamSpec:
    """A configured server; `target`, when given, replaces what the config says to connect to, and
    `connect_timeout` the pool's (tests)."""

    name: str
    config: ServerConfig
    target: Callable[[], Target] | None = None
    connect_timeout: float | None = None


async def http_target(config: ServerConfig, spool: SpoolPolicy | None, stack: AsyncExitStack) -> Target:
    """The transport to a server reached over HTTP (legacy SSE or streamable HTTP); long messages go to `spool`."""
    assert config.url is not None
    if config.kind == "sse":
        if spool is None:
            return sse_client(config.url, headers=dict(config.headers) or None)
        factory = spooling_client_factory(spool)
        return sse_client(config.url, headers=dict(config.headers) or None, httpx_client_factory=factory)
    transport = SpoolingTransport(spool) if spool is not None else None
    http = await stack.enter_async_context(
        httpx2.AsyncClient(
            headers=dict(config.headers),
            timeout=httpx2.Timeout(30.0, read=max(300.0, config.timeout)),
            transport=transport,
        )
    )
    return streamable_http_client(config.url, http_client=http, max_sse_event_size=None)
