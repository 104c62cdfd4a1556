"""Connection set-up for one downstream server: what to connect to (its spec), and the transport its URL names."""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass
from typing import Any

import httpx2
import mcp.client.sse
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server

from server.config import ServerConfig
from server.downstream.http_spool import SpoolingTransport, spooling_client_factory
from server.downstream.spool import SpoolPolicy

__all__ = ["DownstreamSpec", "Target", "http_target"]

# The legacy SSE client caps one event at 1 MiB and has no option to lift it; a tool result is one
# event, so every large result over SSE would kill the connection. Its module-level helper is
# rebound here with the cap removed (streamable HTTP gets `max_sse_event_size=None` instead).
_sse_module: Any = mcp.client.sse  # the helper is imported there, not exported
_sse_module.sse_within_origin = functools.partial(_sse_module.sse_within_origin, max_event_size=None)

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
